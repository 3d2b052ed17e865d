/**
 * The RabbitMQ replay backend: takes messages from a dead-letter queue with `basic.get` (not
 * acknowledged yet), republishes each straight to the work queue the DLQ belongs to (through the
 * default exchange), waits for the publisher confirm, and only then acks the DLQ copy.
 *
 * The destination never comes from the message: its headers (`twophase-original-*`, `x-death`)
 * can be written by anyone allowed to publish to the work exchange. The work queue is `--queue`,
 * else the DLQ's name less `.dlq` (twophase's default naming) when that queue exists. A recorded
 * route is followed only with `trustRecordedRoute` (`--trust-recorded-route`); a recorded route
 * that points away from the work queue is reported as refused on the message's line.
 *
 * Plain amqplib, no automatic reconnect: a CLI run should fail fast and be re-run. If the
 * process dies, every message taken and not yet acked returns to the DLQ (the broker requeues
 * unacknowledged messages of a closed connection).
 */
import amqp, { type Channel, type ChannelModel, type ConfirmChannel, type GetMessage, type Options } from 'amqplib';
import { checkKnownOptions, optionNames } from '../../../src/adapter-kit';
// The adapter's own modules, not its public entry point: the wire helpers the replay shares with
// the source are internal to twophase.
import { BrokerConnectionError } from '../../rabbitmq/connection-error';
import { HEADERS, readCount, readString, recordedRoute, type RecordedRoute, replayProperties } from '../../rabbitmq/headers';
import { deadLetteredMessage, matchPublished, type PublishedMessage, returnedMessage } from '../../rabbitmq/publish-match';
import { assertPublishable } from '../../rabbitmq/wire-limits';
import { type ReplayBackend, type ReplayDestination, type ReplayItem, ReplayItemError, type ReplayOpenContext } from '../replay-backend';
import { replayKeyOf } from '../replay-key';

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
  /**
   * The work queue the DLQ belongs to, where messages are replayed (through the default
   * exchange). Default: the DLQ's name less `.dlq`, when that queue exists.
   */
  readonly workQueue?: string;
  /**
   * Follow the exchange and routing key each message records instead of sending it to the work
   * queue: for a message the broker dead-lettered, its newest `x-death` entry; else its
   * `twophase-original-exchange` / `-routing-key` headers. Anyone allowed to publish to the work
   * exchange can write these; set it only when every such publisher is trusted. Default false.
   */
  readonly trustRecordedRoute?: boolean;
  /** Confirm deadline of one republish, ms. Default 10 000. */
  readonly publishTimeoutMs?: number;
  /**
   * After the broker nacked a republish: how long to wait for its dead-lettered copy to reach
   * the DLQ (`x-overflow: reject-publish-dlx`) before deciding the broker made none, ms. Default 5000.
   */
  readonly refusedCopyWaitMs?: number;
  /**
   * Channels taking messages from the DLQ in parallel (`basic.get` is one round trip per
   * message). Default 4. Messages are then examined in about, not exactly, queue order.
   */
  readonly getChannels?: number;
}

/** A dead-lettered message as the RabbitMQ replay backend holds it between `next()` and `remove()`/`release()`. */
export interface RabbitItem extends ReplayItem {
  readonly message: GetMessage;
  /** The channel that got it: its ack or nack must go there (delivery tags are per channel). */
  readonly channel: Channel;
  readonly route?: { readonly exchange: string; readonly routingKey: string };
}

/** Suffix of twophase's default DLQ name (`<queue>.dlq`). */
const DLQ_SUFFIX = '.dlq';

/**
 * A republish the tool is waiting on: for its confirm, or, after the broker refused it, for the
 * broker's dead-lettered copy. A replay copy carries no correlation header: a `basic.return` and a
 * dead-lettered copy are matched to it by exchange, routing key, message id, body and headers
 * (`matchPublished`, oldest waiting first), as the adapter's publisher matches its returns.
 */
interface PendingReplay extends PublishedMessage {
  /** The broker answered the publish (ack or nack): a `basic.return`, which comes before the answer, is no longer for it. */
  answered: boolean;
  /** The `basic.return` text, once one came. */
  returned?: string;
  /** The broker's dead-lettered copy of it was seen on the watch queue. */
  copySeen: boolean;
  /** Called when that copy is seen, while {@link RabbitMqReplayBackend.refused} waits for it. */
  onCopy?: () => void;
}

/** Default of {@link RabbitMqReplayOptions.getChannels}. */
const DEFAULT_GET_CHANNELS = 4;
/** Messages taken ahead of the replay loop, at most. */
const READ_AHEAD = 128;

/** Default of {@link RabbitMqReplayOptions.refusedCopyWaitMs}. */
const DEFAULT_REFUSED_COPY_WAIT_MS = 5000;

/** RabbitMQ implementation of {@link ReplayBackend}. */
export class RabbitMqReplayBackend implements ReplayBackend<RabbitItem> {
  readonly name = 'rabbitmq';
  private model: ChannelModel | undefined;
  /** Channels that take messages with `basic.get`, in parallel (a get is one round trip). */
  private readers: Channel[] = [];
  private watchChannel: Channel | undefined;
  private publishChannel: ConfirmChannel | undefined;
  private source = '';
  /** Messages taken and not yet handed out by `next`, in the order they were taken. */
  private readonly buffered: { readonly message: GetMessage; readonly channel: Channel }[] = [];
  /** Most messages to take in this run: what the queue held at the start, capped by the limit. */
  private toTake = 0;
  private taken = 0;
  private readersLeft = 0;
  private readerError: unknown;
  private wakeNext: (() => void) | undefined;
  private wakeReaders: (() => void) | undefined;
  private readonly held: { readonly message: GetMessage; readonly channel: Channel }[] = [];
  private readonly knownExchanges = new Map<string, Promise<void>>([['', Promise.resolve()]]);
  /** Republishes waiting for their confirm or, once refused, for their dead-lettered copy; oldest first. */
  private readonly pending = new Set<PendingReplay>();
  private watch: { queue: Promise<string>; bound: Map<string, Promise<void>> } | undefined;
  private readonly removed = new WeakSet<GetMessage>();
  private notice: ReplayOpenContext['notice'] = () => undefined;
  private checkedFirst = false;
  private closed = false;
  /** The work queue messages go back to (resolved by `open`). */
  private workQueue: string | undefined;

  constructor(private readonly options: RabbitMqReplayOptions = {}) {
    checkKnownOptions(
      'RabbitMqReplayBackend options',
      options,
      optionNames<RabbitMqReplayOptions>()(['url', 'toExchange', 'toRoutingKey', 'toQueue', 'workQueue', 'trustRecordedRoute', 'publishTimeoutMs', 'refusedCopyWaitMs', 'getChannels']),
    );
    if (options.toExchange !== undefined && options.toQueue !== undefined) {
      throw new ReplayItemError('give either toExchange or toQueue, not both');
    }
  }

  async open(source: string, context?: ReplayOpenContext): Promise<{ available: number }> {
    this.source = source;
    if (context) this.notice = context.notice;
    // noDelay: each get, publish and ack is a small frame waiting on the next one; with Nagle's
    // algorithm on, every round trip also waited for the peer's delayed TCP acknowledgement.
    this.model = await connectAmqp(this.options.url ?? DEFAULT_AMQP_URL, { noDelay: true, clientProperties: { connection_name: `twophase-cli:replay:${source}` } });
    this.model.on('error', () => undefined);
    this.publishChannel = await this.model.createConfirmChannel();
    this.publishChannel.on('error', () => undefined);
    this.publishChannel.on('return', (message: GetMessage) => {
      const entry = matchPublished(this.pending, returnedMessage(message), (p) => !p.answered && p.returned === undefined);
      if (!entry) return;
      const fields = message.fields as unknown as { replyCode?: number; replyText?: string };
      entry.returned = `${fields.replyCode ?? ''} ${fields.replyText ?? 'returned'}`.trim();
    });
    const probe = await this.model.createChannel();
    probe.on('error', () => undefined);
    let messageCount: number;
    let consumerCount: number;
    try {
      ({ messageCount, consumerCount } = await probe.checkQueue(source));
    } catch (error) {
      throw new Error(`queue "${source}" does not exist (or is not accessible): ${(error as Error).message}`, { cause: error });
    }
    this.workQueue = await this.resolveWorkQueue(source);
    await probe.close().catch(() => undefined);
    this.toTake = Math.min(messageCount, context?.limit ?? Number.POSITIVE_INFINITY);
    const readers = Math.max(1, Math.min(this.options.getChannels ?? DEFAULT_GET_CHANNELS, this.toTake));
    for (let i = 0; i < readers; i++) {
      const channel = await this.model.createChannel();
      channel.on('error', () => undefined);
      this.readers.push(channel);
    }
    if (this.toTake > 0) {
      this.readersLeft = this.readers.length;
      for (const channel of this.readers) void this.read(channel);
    }
    if (consumerCount > 0) {
      this.notice({ level: 'warn', text: `queue "${source}" has ${consumerCount} consumer(s): a dead-letter queue usually has none; is it a work queue?` });
    }
    return { available: messageCount };
  }

  async next(): Promise<RabbitItem | undefined> {
    for (;;) {
      const first = this.buffered.shift();
      if (first) {
        this.wakeReaders?.();
        return this.toItem(first.message, first.channel);
      }
      if (this.readerError !== undefined) throw this.readerError;
      if (this.readersLeft === 0) return undefined;
      await new Promise<void>((resolve) => {
        this.wakeNext = resolve;
      });
      this.wakeNext = undefined;
    }
  }

  /**
   * One reader: takes messages with `basic.get` on its channel, keeping at most
   * {@link READ_AHEAD} taken messages waiting for `next`, until the run's share is taken or the
   * queue is empty.
   */
  private async read(channel: Channel): Promise<void> {
    try {
      while (!this.closed && this.taken < this.toTake) {
        if (this.buffered.length >= READ_AHEAD) {
          await new Promise<void>((resolve) => {
            const previous = this.wakeReaders;
            this.wakeReaders = () => {
              this.wakeReaders = undefined;
              previous?.();
              resolve();
            };
          });
          continue;
        }
        this.taken++;
        const message = await channel.get(this.source, { noAck: false });
        if (!message) {
          this.taken--;
          break;
        }
        this.buffered.push({ message, channel });
        this.wakeNext?.();
      }
    } catch (error) {
      this.readerError ??= error;
    } finally {
      this.readersLeft--;
      this.wakeNext?.();
    }
  }

  private toItem(message: GetMessage, channel: Channel): RabbitItem {
    const { route, refused } = this.routeOf(message);
    const headers = message.properties.headers;
    if (!this.checkedFirst) {
      this.checkedFirst = true;
      if (!isDeadLettered(headers)) {
        this.notice({
          level: 'warn',
          text: `the first message of "${this.source}" carries no dead-letter headers (${HEADERS.reason}, x-death): "${this.source}" does not look like a dead-letter queue`,
        });
      }
    }
    return {
      message,
      channel,
      route,
      messageId: typeof message.properties.messageId === 'string' ? message.properties.messageId : undefined,
      ...replayKeyOf(headers, message.properties.messageId),
      reason: readString(headers, HEADERS.reason) ?? deathReason(headers),
      attempts: readCount(headers, HEADERS.attempts),
      // x-death describes the broker's own dead-letters; a message twophase dead-lettered (its
      // reason header set) may carry x-death entries of its delay queues, which say nothing of why.
      errorMessage: readString(headers, HEADERS.errorMessage) ?? (readString(headers, HEADERS.reason) === undefined ? deathText(headers) : undefined),
      destination: route ? describe(route) : undefined,
      ...(refused !== undefined ? { refusedRoute: refused } : {}),
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
    // Bound before the publish, so the broker's copy of a refused republish cannot be missed.
    await this.watchDeadLetters(item.message);
    const entry: PendingReplay = {
      exchange: route.exchange,
      routingKey: route.routingKey,
      content: item.message.content,
      messageId: properties.messageId,
      headers: properties.headers ?? {},
      answered: false,
      copySeen: false,
    };
    this.pending.add(entry);
    try {
      await withTimeout(
        new Promise<void>((resolve, reject) => {
          channel.publish(route.exchange, route.routingKey, item.message.content, properties, (error: unknown) => {
            entry.answered = true;
            if (error) reject(error);
            else resolve();
          });
        }),
        this.options.publishTimeoutMs ?? 10_000,
      );
    } catch (error) {
      // amqplib rejects a nacked publish with "message nacked" (0.10); match loosely across versions.
      if (error instanceof Error && /\bnack/i.test(error.message)) throw await this.refused(item, route, entry);
      throw error;
    } finally {
      this.pending.delete(entry);
    }
    // A basic.return comes before the confirm of its publish.
    if (entry.returned !== undefined) {
      throw new ReplayItemError(`unroutable: no queue is bound to ${describe(route).description} (${entry.returned}); left in the DLQ`);
    }
    return describe(route);
  }

  async remove(item: RabbitItem): Promise<void> {
    if (this.removed.has(item.message)) return;
    this.removed.add(item.message);
    item.channel.ack(item.message, false);
  }

  async release(item: RabbitItem): Promise<void> {
    if (this.removed.has(item.message)) return;
    // A nack with requeue now would put it back at the head, where the next get finds it again.
    this.held.push({ message: item.message, channel: item.channel });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      this.wakeReaders?.();
      // Taken and never handed out (a limit, a stop) or left in place: back to the queue.
      for (const { message, channel } of [...this.held.splice(0), ...this.buffered.splice(0)]) channel.nack(message, false, true);
      for (const channel of this.readers) await channel.close();
      await this.watchChannel?.close();
      await this.publishChannel?.close();
    } catch {
      // the connection close below returns anything unacked
    }
    await this.model?.close().catch(() => undefined);
  }

  /**
   * The broker nacked a republish: the destination refused it. With `x-overflow:
   * reject-publish-dlx` (a full queue) the broker also dead-letters the refused copy, and when
   * that copy lands back in this DLQ the original is removed, so the DLQ holds one copy of the
   * message, not two. Otherwise the original stays. Either way the run stops: a full queue
   * refuses the next messages too.
   */
  private async refused(item: RabbitItem, route: { exchange: string; routingKey: string }, entry: PendingReplay): Promise<ReplayItemError> {
    const where = describe(route).description;
    const copied = await this.waitForCopy(entry, this.options.refusedCopyWaitMs ?? DEFAULT_REFUSED_COPY_WAIT_MS);
    if (copied) {
      await this.remove(item);
      return new ReplayItemError(
        `nacked by the broker: ${where} refused the message (queue full: x-max-length with x-overflow reject-publish-dlx); ` +
          `the broker dead-lettered the refused copy back to "${this.source}", so the original was removed and one copy remains there. ` +
          'Stopped; re-run once the queue has room',
        { stopsRun: true },
      );
    }
    return new ReplayItemError(
      `nacked by the broker: ${where} refused the message (queue full: x-max-length with x-overflow reject-publish or reject-publish-dlx, ` +
        'or a broker-side failure); left in the DLQ. Stopped; re-run once the queue has room',
      { stopsRun: true },
    );
  }

  /** Resolves true once the broker's dead-lettered copy of `entry` was seen (maybe already), false after `ms`. */
  private waitForCopy(entry: PendingReplay, ms: number): Promise<boolean> {
    if (entry.copySeen) return Promise.resolve(true);
    if (!this.watch) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        entry.onCopy = undefined;
        resolve(false);
      }, ms);
      entry.onCopy = () => {
        clearTimeout(timer);
        entry.onCopy = undefined;
        resolve(true);
      };
    });
  }

  /**
   * Binds a private (exclusive, auto-delete) queue to the exchange and routing key that fed this
   * DLQ message (its dead-letter exchange), so a copy the broker dead-letters into the same DLQ
   * during the run is seen too. Messages of the DLQ published to the default exchange have no
   * such exchange; their refused copies cannot be recognised (the original then stays).
   *
   * A copy is taken as the broker's dead-letter of a waiting republish when its newest `x-death`
   * entry names that republish's exchange and routing key and it has the same message id, body
   * and (less the broker's death headers) headers; the oldest such republish not yet matched takes it.
   */
  private async watchDeadLetters(message: GetMessage): Promise<void> {
    const exchange = message.fields.exchange;
    if (exchange === '') return;
    if (!this.watch) {
      const channel = (this.watchChannel = await this.model!.createChannel());
      channel.on('error', () => undefined);
      const queue = channel.assertQueue('', { exclusive: true, autoDelete: true, durable: false }).then(async ({ queue: name }) => {
        await channel.consume(
          name,
          (copy) => {
            const published = copy ? deadLetteredMessage(copy) : undefined;
            if (!published) return;
            const entry = matchPublished(this.pending, published, (p) => !p.copySeen);
            if (!entry) return;
            entry.copySeen = true;
            entry.onCopy?.();
          },
          { noAck: true },
        );
        return name;
      });
      this.watch = { queue, bound: new Map() };
    }
    const key = `${exchange}\u0000${message.fields.routingKey}`;
    let bound = this.watch.bound.get(key);
    if (!bound) {
      const channel = this.watchChannel!;
      bound = this.watch.queue.then(async (name) => {
        await channel.bindQueue(name, exchange, message.fields.routingKey);
      });
      this.watch.bound.set(key, bound);
    }
    await bound;
  }

  /**
   * The work queue of `source`: `workQueue` (which must exist), else `source` less `.dlq` when
   * that queue exists. Undefined only when an explicit destination or `trustRecordedRoute` makes
   * it unnecessary.
   * @throws Error when no work queue can be found and nothing else says where messages go
   */
  private async resolveWorkQueue(source: string): Promise<string | undefined> {
    const given = this.options.workQueue;
    const candidate = given ?? (source.endsWith(DLQ_SUFFIX) && source.length > DLQ_SUFFIX.length ? source.slice(0, -DLQ_SUFFIX.length) : undefined);
    const explicit = this.options.toQueue !== undefined || this.options.toExchange !== undefined || this.options.trustRecordedRoute === true;
    if (candidate !== undefined) {
      const found = await queueExists(this.model!, candidate);
      if (found) return candidate;
      if (given !== undefined) throw new Error(`work queue "${given}" (--queue) does not exist (or is not accessible)`);
    }
    if (explicit) return undefined;
    throw new Error(
      `cannot tell which work queue "${source}" belongs to` +
        (candidate !== undefined ? ` (no queue "${candidate}")` : '') +
        ': give --queue <work queue>; replayed messages go back to that queue',
    );
  }

  /**
   * Where a message goes, and a note when its recorded route was refused. In order: `toQueue`;
   * `toExchange` (with `toRoutingKey`, else the recorded routing key); the recorded route with
   * `trustRecordedRoute`; else the work queue through the default exchange.
   */
  private routeOf(message: GetMessage): { route?: { exchange: string; routingKey: string }; refused?: string } {
    if (this.options.toQueue !== undefined) return { route: { exchange: '', routingKey: this.options.toQueue } };
    const recorded = recordedRoute(message);
    if (this.options.toExchange !== undefined) {
      const routingKey = this.options.toRoutingKey ?? recorded?.routingKey;
      return { route: routingKey === undefined ? undefined : { exchange: this.options.toExchange, routingKey } };
    }
    if (this.options.trustRecordedRoute === true) return { route: recorded ? { exchange: recorded.exchange, routingKey: recorded.routingKey } : undefined };
    const workQueue = this.workQueue!;
    return { route: { exchange: '', routingKey: workQueue }, refused: recorded ? refusal(recorded, workQueue) : undefined };
  }

  /** Publishing to a missing exchange would close the confirm channel (404): check it first. */
  private ensureExchange(exchange: string): Promise<void> {
    let known = this.knownExchanges.get(exchange);
    if (!known) {
      known = this.checkExchange(exchange);
      this.knownExchanges.set(exchange, known);
      known.catch(() => this.knownExchanges.delete(exchange));
    }
    return known;
  }

  private async checkExchange(exchange: string): Promise<void> {
    const probe = await this.model!.createChannel();
    probe.on('error', () => undefined);
    try {
      await probe.checkExchange(exchange);
      await probe.close();
    } catch (error) {
      throw new ReplayItemError(`exchange "${exchange}" does not exist; left in the DLQ`, { cause: error });
    }
  }
}

/**
 * Why the route `recorded` was not followed, when it points away from `workQueue`; undefined
 * when it agrees with the work queue (or only names the exchange the message was published to).
 */
function refusal(recorded: RecordedRoute, workQueue: string): string | undefined {
  const where = describe(recorded).description;
  if (recorded.ignored !== undefined) {
    const i = recorded.ignored;
    const named = [i.exchange !== undefined ? `exchange "${i.exchange}"` : '', i.routingKey !== undefined ? `routing key "${i.routingKey}"` : '', i.queue !== undefined ? `queue "${i.queue}"` : '']
      .filter((part) => part !== '')
      .join(' ');
    return `${HEADERS.originalExchange}/-routing-key/-queue headers (${named}) on a message the broker dead-lettered from queue "${recorded.queue ?? '?'}" were written by its publisher`;
  }
  if (recorded.queue !== undefined && recorded.queue !== workQueue) return `${where}: it was dead-lettered from queue "${recorded.queue}", not from "${workQueue}"`;
  if (recorded.exchange === '' && recorded.routingKey !== workQueue) return `${where} is not the work queue "${workQueue}"`;
  return undefined;
}

/** True when the queue exists (a failed check closes its channel, so a throwaway one is used). */
async function queueExists(model: ChannelModel, queue: string): Promise<boolean> {
  const probe = await model.createChannel();
  probe.on('error', () => undefined);
  try {
    await probe.checkQueue(queue);
    await probe.close().catch(() => undefined);
    return true;
  } catch (error) {
    if ((error as { code?: unknown })?.code === 404) return false;
    throw error;
  }
}

function describe(route: { exchange: string; routingKey: string }): ReplayDestination {
  return {
    description: route.exchange === '' ? `queue "${route.routingKey}" (default exchange)` : `exchange "${route.exchange}" routing key "${route.routingKey}"`,
  };
}

/** True when the headers show a dead-letter: twophase's reason header or the broker's `x-death`. */
function isDeadLettered(headers: Record<string, unknown> | undefined): boolean {
  return readString(headers, HEADERS.reason) !== undefined || (Array.isArray(headers?.['x-death']) && headers['x-death'].length > 0);
}

/** For a message the broker dead-lettered by itself: what happened, in words. */
function deathText(headers: Record<string, unknown> | undefined): string | undefined {
  const deaths = headers?.['x-death'];
  if (!Array.isArray(deaths) || deaths.length === 0) return undefined;
  const last = deaths[0] as { reason?: unknown; queue?: unknown; count?: unknown };
  const text = (v: unknown) => (typeof v === 'string' ? v : Buffer.isBuffer(v) ? v.toString('utf8') : undefined);
  const reason = text(last.reason);
  const queue = text(last.queue);
  if (reason === undefined) return undefined;
  const why: Record<string, string> = {
    rejected: 'rejected (basic.reject or basic.nack with requeue=false)',
    expired: 'message TTL expired',
    maxlen: 'queue length limit exceeded',
    delivery_limit: 'delivery limit exceeded',
  };
  return `dead-lettered by the broker from queue "${queue ?? '?'}": ${why[reason] ?? reason}`;
}

function deathReason(headers: Record<string, unknown> | undefined): string | undefined {
  const deaths = headers?.['x-death'];
  if (!Array.isArray(deaths) || deaths.length === 0) return undefined;
  const reason = (deaths[0] as { reason?: unknown }).reason;
  return typeof reason === 'string' ? `broker:${reason}` : undefined;
}

/**
 * One connect attempt (a CLI run fails fast and is re-run).
 * @throws BrokerConnectionError naming host, port, vhost and cause
 */
async function connectAmqp(url: string, socketOptions: Options.Connect & { readonly noDelay?: boolean; readonly clientProperties?: Record<string, unknown> }): Promise<ChannelModel> {
  try {
    return await amqp.connect(url, socketOptions);
  } catch (error) {
    throw new BrokerConnectionError(url, error, { attempts: 1 });
  }
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
