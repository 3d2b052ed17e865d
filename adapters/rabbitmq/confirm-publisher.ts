/**
 * Publishing with publisher confirms and mandatory routing, over a supervised confirm channel.
 *
 * A publish resolves only when the broker confirmed it (`basic.ack`) and did not return it:
 * every publish is `mandatory`, and RabbitMQ sends the `basic.return` of an unroutable mandatory
 * message before its `basic.ack` ("Consumer Acknowledgements and Publisher Confirms" docs, "When
 * Will Published Messages Be Confirmed by the Broker?"), so a return seen by the time the confirm
 * arrives belongs to a publish still waiting. A return is matched (`publish-match.ts`) to the oldest waiting publish
 * with the same exchange, routing key, message id and body (and, among several, the same
 * headers): no correlation header is added, so the message a reader sees carries only its own
 * headers. Two waiting publishes that match alike are byte-for-byte the same message to the same
 * place, so either may take the return: one of the two copies is reported unroutable either way.
 */
import type { Channel, ConsumeMessage, Options } from 'amqplib';
import type { AmqpConnectionManager } from 'amqp-connection-manager';
import { type Logger } from '../../src';
import { withDeadline } from '../../src/adapter-kit';
import { SupervisedChannel } from './channel-supervisor';
import { PublishError, UnroutableError } from './errors';
import { assertPublishable } from './wire-limits';
import { HEADERS } from './headers';
import { matchPublished, type PublishedMessage, returnedMessage } from './publish-match';

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
  /** Publishes waiting for their confirm, oldest first. */
  private readonly pending = new Set<PendingPublish>();

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
   * @param options publish options; `mandatory` is forced on
   * @throws UnroutableError when the broker returned the message (no queue bound)
   * @throws PublishError when the broker nacked it, the channel closed first, or no confirm came within `timeoutMs`
   * @throws MessageTooLargeError when the headers encode to more than amqplib can send (nothing was sent)
   * @throws ConfigurationError when amqplib cannot encode the publish otherwise (a short string over
   *   255 bytes, a value with no AMQP type; nothing was sent)
   */
  async publish(exchange: string, routingKey: string, content: Buffer, options: Options.Publish, timeoutMs = this.options.timeoutMs): Promise<void> {
    const headers: Record<string, unknown> = { ...(options.headers ?? {}) };
    // Sent by older versions to match returns; never passed on.
    delete headers[HEADERS.publishId];
    const publishOptions = { ...options, headers, mandatory: true };
    assertPublishable(exchange, routingKey, content.length, publishOptions, `publish to exchange "${exchange}" with routing key "${routingKey}"`, this.frameMax());
    const entry: PendingPublish = { exchange, routingKey, content, messageId: options.messageId, headers };
    this.pending.add(entry);
    try {
      const sent = this.channel.current.publish(exchange, routingKey, content, { ...publishOptions, timeout: timeoutMs });
      // The wrapper's own timeout stops once a message was sent; a resend after a reconnect has
      // none, so bound the whole wait here as well.
      await withDeadline(sent, timeoutMs + 50, `confirm of a publish to "${exchange}"/"${routingKey}"`);
    } catch (error) {
      const text = error instanceof Error ? error.message : String(error);
      // amqplib rejects every publish of a channel the broker closed with a bare "channel closed";
      // the broker's reason came on the channel's error event (a 404 for a missing exchange).
      const reason = /channel closed/i.test(text) && this.channel.lastCloseError ? `; the broker closed the channel: ${this.channel.lastCloseError.message}` : '';
      throw new PublishError(`publish to exchange "${exchange}" with routing key "${routingKey}" was not confirmed: ${text}${reason}`, { cause: error });
    } finally {
      this.pending.delete(entry);
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
    const fields = message.fields as unknown as { replyCode?: number; replyText?: string; exchange: string; routingKey: string };
    const entry = matchPublished(this.pending, returnedMessage(message), (p) => p.returned === undefined);
    if (entry) entry.returned = `${fields.replyCode ?? ''} ${fields.replyText ?? 'returned'}`.trim();
    else this.options.logger.warn({ channel: this.options.name, exchange: fields.exchange, routingKey: fields.routingKey }, 'a returned message matched no publish waiting for its confirm');
  }
}

/** A publish waiting for its confirm, as far as a `basic.return` can be matched to it. */
interface PendingPublish extends PublishedMessage {
  returned?: string;
}
