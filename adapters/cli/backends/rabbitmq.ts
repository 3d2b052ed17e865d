/**
 * The RabbitMQ replay backend: takes messages from a dead-letter queue with `basic.get` (not
 * acknowledged yet), republishes each to the exchange and routing key it was first published to
 * (headers `twophase-original-exchange` / `twophase-original-routing-key`, else the newest
 * `x-death` entry), waits for the publisher confirm, and only then acks the DLQ copy.
 *
 * Plain amqplib, no automatic reconnect: a CLI run should fail fast and be re-run. If the
 * process dies, every message taken and not yet acked returns to the DLQ (the broker requeues
 * unacknowledged messages of a closed connection).
 */
import amqp, { type Channel, type ChannelModel, type ConfirmChannel, type GetMessage } from 'amqplib';
import { checkKnownOptions, optionNames } from '../../../src';
import { assertPublishable, HEADERS, idempotencyKeyOf, readCount, readString, replayProperties, replayRoute } from '../../rabbitmq';
import { type ReplayBackend, type ReplayDestination, type ReplayItem, ReplayItemError } from '../replay-backend';

/** Default AMQP URL of the CLI. */
export const DEFAULT_AMQP_URL = 'amqp://guest:guest@127.0.0.1:5672';

/** Options of the RabbitMQ backend. */
export interface RabbitMqReplayOptions {
  /** AMQP URL. Default `amqp://guest:guest@127.0.0.1:5672`. */
  readonly url?: string;
  /** Send every message to this exchange instead of its original one (with `toRoutingKey`). */
  readonly toExchange?: string;
  /** Routing key used with `toExchange`. Default: the message's original routing key. */
  readonly toRoutingKey?: string;
  /** Send every message straight to this queue (default exchange), instead of its original route. */
  readonly toQueue?: string;
  /** Confirm deadline of one republish, ms. Default 10 000. */
  readonly publishTimeoutMs?: number;
}

interface RabbitItem extends ReplayItem {
  readonly message: GetMessage;
  readonly route?: { readonly exchange: string; readonly routingKey: string };
}

/** RabbitMQ implementation of {@link ReplayBackend}. */
export class RabbitMqReplayBackend implements ReplayBackend<RabbitItem> {
  readonly name = 'rabbitmq';
  private model: ChannelModel | undefined;
  private getChannel: Channel | undefined;
  private publishChannel: ConfirmChannel | undefined;
  private source = '';
  private readonly held: GetMessage[] = [];
  private readonly knownExchanges = new Set<string>(['']);
  private returned: string | undefined;
  private closed = false;

  constructor(private readonly options: RabbitMqReplayOptions = {}) {
    checkKnownOptions('RabbitMqReplayBackend options', options, optionNames<RabbitMqReplayOptions>()(['url', 'toExchange', 'toRoutingKey', 'toQueue', 'publishTimeoutMs']));
    if (options.toExchange !== undefined && options.toQueue !== undefined) {
      throw new ReplayItemError('give either toExchange or toQueue, not both');
    }
  }

  async open(source: string): Promise<{ available: number }> {
    this.source = source;
    this.model = await amqp.connect(this.options.url ?? DEFAULT_AMQP_URL, { clientProperties: { connection_name: `twophase-cli:replay:${source}` } });
    this.model.on('error', () => undefined);
    this.getChannel = await this.model.createChannel();
    this.getChannel.on('error', () => undefined);
    this.publishChannel = await this.model.createConfirmChannel();
    this.publishChannel.on('error', () => undefined);
    this.publishChannel.on('return', (message: GetMessage) => {
      const fields = message.fields as unknown as { replyCode?: number; replyText?: string };
      this.returned = `${fields.replyCode ?? ''} ${fields.replyText ?? 'returned'}`.trim();
    });
    const { messageCount } = await this.getChannel.checkQueue(source);
    return { available: messageCount };
  }

  async next(): Promise<RabbitItem | undefined> {
    const message = await this.getChannel!.get(this.source, { noAck: false });
    if (!message) return undefined;
    const route = this.routeOf(message);
    const headers = message.properties.headers;
    return {
      message,
      route,
      messageId: typeof message.properties.messageId === 'string' ? message.properties.messageId : undefined,
      key: idempotencyKeyOf(message.properties),
      reason: readString(headers, HEADERS.reason) ?? deathReason(headers),
      attempts: readCount(headers, HEADERS.attempts),
      errorMessage: readString(headers, HEADERS.errorMessage),
      destination: route ? describe(route) : undefined,
    };
  }

  async republish(item: RabbitItem): Promise<ReplayDestination> {
    const route = item.route;
    if (!route) throw new ReplayItemError('the message records no original exchange and routing key (no twophase headers, no x-death)');
    await this.ensureExchange(route.exchange);
    const channel = this.publishChannel!;
    const properties = { ...replayProperties(item.message, Date.now()), mandatory: true };
    try {
      // amqplib fails an unencodable publish only after registering its confirm callback.
      const frameMax = (this.model?.connection as unknown as { frameMax?: number } | undefined)?.frameMax;
      assertPublishable(route.exchange, route.routingKey, item.message.content.length, properties, `the replay to ${describe(route).description}`, frameMax);
    } catch (error) {
      throw new ReplayItemError(`${(error as Error).message}; left in the DLQ`);
    }
    // One publish at a time on this channel, so a basic.return belongs to this publish.
    this.returned = undefined;
    await withTimeout(
      new Promise<void>((resolve, reject) => {
        channel.publish(route.exchange, route.routingKey, item.message.content, properties, (error: unknown) => (error ? reject(error) : resolve()));
      }),
      this.options.publishTimeoutMs ?? 10_000,
    );
    if (this.returned !== undefined) {
      throw new ReplayItemError(`unroutable: no queue is bound to ${describe(route).description} (${this.returned}); left in the DLQ`);
    }
    return describe(route);
  }

  async remove(item: RabbitItem): Promise<void> {
    this.getChannel!.ack(item.message, false);
  }

  async release(item: RabbitItem): Promise<void> {
    // A nack with requeue now would put it back at the head, where the next get finds it again.
    this.held.push(item.message);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      for (const message of this.held.splice(0)) this.getChannel?.nack(message, false, true);
      await this.getChannel?.close();
      await this.publishChannel?.close();
    } catch {
      // the connection close below returns anything unacked
    }
    await this.model?.close().catch(() => undefined);
  }

  private routeOf(message: GetMessage): { exchange: string; routingKey: string } | undefined {
    if (this.options.toQueue !== undefined) return { exchange: '', routingKey: this.options.toQueue };
    const original = replayRoute(message);
    if (this.options.toExchange !== undefined) {
      const routingKey = this.options.toRoutingKey ?? original?.routingKey;
      return routingKey === undefined ? undefined : { exchange: this.options.toExchange, routingKey };
    }
    return original;
  }

  /** Publishing to a missing exchange would close the confirm channel (404): check it first. */
  private async ensureExchange(exchange: string): Promise<void> {
    if (this.knownExchanges.has(exchange)) return;
    const probe = await this.model!.createChannel();
    probe.on('error', () => undefined);
    try {
      await probe.checkExchange(exchange);
      this.knownExchanges.add(exchange);
      await probe.close();
    } catch (error) {
      throw new ReplayItemError(`exchange "${exchange}" does not exist; left in the DLQ`, { cause: error });
    }
  }
}

function describe(route: { exchange: string; routingKey: string }): ReplayDestination {
  return {
    description: route.exchange === '' ? `queue "${route.routingKey}" (default exchange)` : `exchange "${route.exchange}" routing key "${route.routingKey}"`,
  };
}

function deathReason(headers: Record<string, unknown> | undefined): string | undefined {
  const deaths = headers?.['x-death'];
  if (!Array.isArray(deaths) || deaths.length === 0) return undefined;
  const reason = (deaths[0] as { reason?: unknown }).reason;
  return typeof reason === 'string' ? `broker:${reason}` : undefined;
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no publisher confirm within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
