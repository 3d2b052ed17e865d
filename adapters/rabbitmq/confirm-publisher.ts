/**
 * Publishing with publisher confirms and mandatory routing, over a supervised confirm channel.
 *
 * A publish resolves only when the broker confirmed it (`basic.ack`) and did not return it:
 * every publish is `mandatory`, and RabbitMQ sends the `basic.return` of an unroutable mandatory
 * message before its `basic.ack` ("Consumer Acknowledgements and Publisher Confirms" docs, "When
 * Will Published Messages Be Confirmed by the Broker?"), so a return seen by the time the confirm
 * arrives belongs to that publish. Each publish carries a `twophase-publish-id` header to match
 * the two.
 */
import { randomUUID } from 'node:crypto';
import type { Channel, ConsumeMessage, Options } from 'amqplib';
import type { AmqpConnectionManager } from 'amqp-connection-manager';
import { type Logger, withDeadline } from '../../src';
import { SupervisedChannel } from './channel-supervisor';
import { PublishError, UnroutableError } from './errors';
import { assertPublishable } from './wire-limits';
import { HEADERS, readString } from './headers';

/** Options of a {@link ConfirmPublisher}. */
export interface ConfirmPublisherOptions {
  /** Channel name for logs. */
  readonly name: string;
  /** Default confirm deadline of one publish, ms. */
  readonly timeoutMs: number;
  /** Pause before replacing a channel the broker closed, ms. */
  readonly recoveryDelayMs: number;
  readonly logger: Logger;
}

/** Confirmed, mandatory publishing. Internal to the package. */
export class ConfirmPublisher {
  private readonly channel: SupervisedChannel;
  private readonly pending = new Map<string, { returned?: string }>();
  private readonly idPrefix = randomUUID().slice(0, 8);
  private sequence = 0;

  constructor(
    private readonly manager: AmqpConnectionManager,
    private readonly options: ConfirmPublisherOptions,
  ) {
    this.channel = new SupervisedChannel(manager, {
      name: options.name,
      confirm: true,
      recoveryDelayMs: options.recoveryDelayMs,
      logger: options.logger,
      setup: async (channel: Channel) => {
        channel.on('return', (message: ConsumeMessage) => this.onReturn(message));
      },
    });
  }

  /**
   * Opens the channel and waits until it is usable.
   * @throws TimeoutError when it is not connected within `timeoutMs`
   */
  async start(timeoutMs: number): Promise<void> {
    this.channel.start();
    await withDeadline(this.channel.current.waitForConnect(), timeoutMs, `opening publisher channel ${this.options.name}`);
  }

  /**
   * Publishes and waits for the broker's confirm. Safe to call concurrently.
   * @param options publish options; `mandatory` is forced on, and a `twophase-publish-id` header is added
   * @throws UnroutableError when the broker returned the message (no queue bound)
   * @throws PublishError when the broker nacked it, the channel closed first, or no confirm came within `timeoutMs`
   * @throws MessageTooLargeError when the headers encode to more than amqplib can send (nothing was sent)
   * @throws ConfigurationError when amqplib cannot encode the publish otherwise (a short string over
   *   255 bytes, a value with no AMQP type; nothing was sent)
   */
  async publish(exchange: string, routingKey: string, content: Buffer, options: Options.Publish, timeoutMs = this.options.timeoutMs): Promise<void> {
    const id = `${this.idPrefix}-${++this.sequence}`;
    const headers = { ...(options.headers ?? {}), [HEADERS.publishId]: id };
    const publishOptions = { ...options, headers, mandatory: true };
    assertPublishable(exchange, routingKey, content.length, publishOptions, `publish to exchange "${exchange}" with routing key "${routingKey}"`, this.frameMax());
    const entry: { returned?: string } = {};
    this.pending.set(id, entry);
    try {
      const sent = this.channel.current.publish(exchange, routingKey, content, { ...publishOptions, timeout: timeoutMs });
      // The wrapper's own timeout stops once a message was sent; a resend after a reconnect has
      // none, so bound the whole wait here as well.
      await withDeadline(sent, timeoutMs + 50, `confirm of a publish to "${exchange}"/"${routingKey}"`);
    } catch (error) {
      throw new PublishError(`publish to exchange "${exchange}" with routing key "${routingKey}" was not confirmed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    } finally {
      this.pending.delete(id);
    }
    if (entry.returned !== undefined) throw new UnroutableError(exchange, routingKey, entry.returned);
  }

  /** The negotiated frame_max of the current connection, bytes; undefined while disconnected. */
  private frameMax(): number | undefined {
    const connection = this.manager.connection as unknown as { connection?: { frameMax?: unknown } } | undefined;
    const value = connection?.connection?.frameMax;
    return typeof value === 'number' ? value : undefined;
  }

  /** Closes the channel; unconfirmed publishes reject. */
  close(): Promise<void> {
    return this.channel.close();
  }

  private onReturn(message: ConsumeMessage): void {
    const id = readString(message.properties.headers, HEADERS.publishId);
    const entry = id === undefined ? undefined : this.pending.get(id);
    const fields = message.fields as unknown as { replyCode?: number; replyText?: string };
    if (entry) entry.returned = `${fields.replyCode ?? ''} ${fields.replyText ?? 'returned'}`.trim();
  }
}
