/**
 * The Kafka replay backend of `twophase dlq replay --broker kafka <topic>.dlq`.
 *
 * A Kafka topic is a log: a record cannot be removed from it. The dead-letter topic is read by a
 * consumer group of its own (`twophase-dlq-replay.<dlq topic>`), and "removed" means that group's
 * committed offset moved past the record. Each record is produced back to the topic named in its
 * `twophase-original-topic` header (acks = all) before its offset may be committed, so a crash
 * leaves every record in the dead-letter topic (offset not committed), at its destination, or
 * in both: never in neither. A record in both is harmless: its copy carries its idempotency key
 * (the original `topic:partition:offset` when it had no `idempotency-key` header), so the
 * consumer's claim applies its effect once.
 *
 * The committed offset of a partition stops at the first record left in place (skipped or
 * failed), so a later run sees it again, and also re-sends the records after it that this run
 * replayed (again harmless, as above).
 *
 * `--url`: the broker list, `host:port[,host:port…]` (a `kafka://` prefix is allowed). Default
 * `$TWOPHASE_KAFKA_BROKERS`, else `127.0.0.1:9092`. An `amqp://` URL (the CLI's AMQP default
 * variable) is ignored. `--to-queue <topic>` sends every record to that topic instead of its
 * original one; `--to-exchange` has no meaning for Kafka and is refused.
 */
import {
  type ClusterAdmin,
  type FetchedBatch,
  type GroupConsumer,
  HEADERS,
  type KafkaClient,
  type KafkaRecord,
  readCount,
  readHeader,
  type RecordProducer,
  replayRecord,
} from '../../kafka';
import { type ReplayBackend, type ReplayDestination, type ReplayItem, ReplayItemError, type ReplayOpenContext } from '../replay-backend';
import { replayKeyOf } from '../replay-key';

/** Environment variable with the default broker list of the Kafka backend. */
export const KAFKA_BROKERS_ENV = 'TWOPHASE_KAFKA_BROKERS';
/** Default broker list. */
export const DEFAULT_KAFKA_BROKERS = '127.0.0.1:9092';

/** Options of the Kafka backend. */
export interface KafkaReplayOptions {
  /** Broker list, `host:port[,host:port…]`, optionally prefixed `kafka://`. */
  readonly url?: string;
  /** Send every record to this topic instead of its original one (the CLI's `--to-queue`). */
  readonly toTopic?: string;
  /** The CLI's `--to-exchange`: no meaning for Kafka; given, `open` fails with a usage error. */
  readonly toExchange?: string;
  /** The CLI's `--queue`: no meaning for Kafka (records go back to the topic twophase recorded); given, `open` fails. */
  readonly workQueue?: string;
  /** The CLI's `--trust-recorded-route`: no meaning for Kafka; given, `open` fails. */
  readonly trustRecordedRoute?: boolean;
  /** Consumer group that tracks what was replayed. Default `twophase-dlq-replay.<dlq topic>`. */
  readonly groupId?: string;
  /** How long `next` waits for the next record before giving up, ms. Default 30 000. */
  readonly fetchTimeoutMs?: number;
  /**
   * The client (kafkajs through `kafkajsClient`, @platformatic/kafka through `platformaticClient`).
   * The CLI builds it from `--client` and {@link kafkaBrokers}.
   */
  readonly client: KafkaClient;
  readonly env?: Readonly<Record<string, string | undefined>>;
}

interface KafkaItem extends ReplayItem {
  readonly partition: number;
  readonly record: KafkaRecord;
  readonly target?: string;
}

type Mark = 'taken' | 'removed' | 'left';

/** Session timeout of the replay tool's group member, ms: how long a killed run blocks the next join. */
const REPLAY_SESSION_TIMEOUT_MS = 30_000;
/** A join slower than this gets a notice, ms. */
const JOIN_NOTICE_AFTER_MS = 3000;

/** Replayed records between two commits of the replay group's offsets. */
const COMMIT_EVERY = 100;

/**
 * Parses `--url` into a broker list; undefined when empty or an AMQP URL (the CLI's AMQP default).
 * @throws Error naming the broker when an entry is not `host:port`
 */
export function parseBrokers(url: string | undefined): string[] | undefined {
  if (url === undefined || url.trim() === '') return undefined;
  const trimmed = url.trim();
  if (/^amqps?:\/\//i.test(trimmed)) return undefined;
  const list = trimmed.replace(/^kafka:\/\//i, '').split(',').map((b) => b.trim()).filter((b) => b.length > 0);
  for (const broker of list) {
    if (!/^[^\s:/]+:\d{1,5}$/.test(broker)) throw new Error(`invalid Kafka broker "${broker}" in --url (expected host:port[,host:port…])`);
  }
  return list.length > 0 ? list : undefined;
}

/**
 * The broker list of a run: `--url`, else `$TWOPHASE_KAFKA_BROKERS`, else 127.0.0.1:9092.
 * @throws Error naming the broker when an entry is not `host:port`
 */
export function kafkaBrokers(url: string | undefined, env: Readonly<Record<string, string | undefined>> = process.env): string[] {
  return parseBrokers(url) ?? parseBrokers(env[KAFKA_BROKERS_ENV]) ?? [DEFAULT_KAFKA_BROKERS];
}

/** Kafka implementation of {@link ReplayBackend}. */
export class KafkaReplayBackend implements ReplayBackend<KafkaItem> {
  readonly name = 'kafka';
  private readonly client: KafkaClient;
  private admin: ClusterAdmin | undefined;
  private consumer: GroupConsumer | undefined;
  private producer: RecordProducer | undefined;
  private source = '';
  /** Per partition: the first offset not yet examined in this run, and the snapshot high watermark. */
  private readonly ends = new Map<number, bigint>();
  private readonly positions = new Map<number, bigint>();
  private readonly pending: KafkaItem[] = [];
  private readonly marks = new Map<number, Array<{ offset: bigint; mark: Mark }>>();
  private controls: FetchedBatch | undefined;
  private wake: (() => void) | undefined;
  private topics: Set<string> | undefined;
  private paused = false;
  private closed = false;
  private notice: ReplayOpenContext['notice'] = () => undefined;
  private checkedFirst = false;
  private committing: Promise<void> = Promise.resolve();
  private removedSinceCommit = 0;
  private readonly refused: Error | undefined;

  constructor(private readonly options: KafkaReplayOptions) {
    if (options.toExchange !== undefined) this.refused = new Error('--to-exchange has no meaning for Kafka; use --to-queue <topic> to send every record to one topic');
    else if (options.workQueue !== undefined || options.trustRecordedRoute === true) {
      this.refused = new Error(
        `${options.workQueue !== undefined ? '--queue' : '--trust-recorded-route'} has no meaning for Kafka: a record goes back to the topic twophase recorded when it dead-lettered it; use --to-queue <topic> to send every record to one topic`,
      );
    }
    this.client = options.client;
  }

  async open(source: string, context?: ReplayOpenContext): Promise<{ available: number }> {
    if (this.refused) throw this.refused;
    const notice = context?.notice ?? (() => undefined);
    this.notice = notice;
    this.source = source;
    const groupId = this.options.groupId ?? `twophase-dlq-replay.${source}`;
    this.admin = this.client.admin();
    await this.admin.connect();
    const topics = await this.admin.listTopics();
    if (!topics.includes(source)) throw new Error(`dead-letter topic "${source}" does not exist`);
    this.topics = new Set(topics);
    const [watermarks, committed] = await Promise.all([this.admin.watermarks(source), this.admin.committedOffsets(groupId, source)]);
    let available = 0n;
    for (const { partition, low, high } of watermarks) {
      const done = committed.find((c) => c.partition === partition)?.offset;
      const start = done !== undefined && BigInt(done) >= BigInt(low) ? BigInt(done) : BigInt(low);
      this.ends.set(partition, BigInt(high));
      this.positions.set(partition, start);
      if (BigInt(high) > start) available += BigInt(high) - start;
    }
    if (available === 0n) return { available: 0 };
    const group = await this.admin.describeGroup?.(groupId).catch(() => undefined);
    if (group && group.members.length > 0) {
      const hosts = [...new Set(group.members.map((m) => `${m.clientId}@${m.clientHost.replace(/^\//, '')}`))].join(', ');
      notice({
        level: 'warn',
        text:
          `consumer group "${groupId}" still has ${group.members.length} member(s) (${hosts}; state ${group.state}): another replay of "${source}" is running, ` +
          `or an earlier one was killed. The broker drops a dead member only after its session timeout (${REPLAY_SESSION_TIMEOUT_MS / 1000} s for replay runs), so joining may wait that long`,
      });
    }
    this.producer = this.client.producer({ allowAutoTopicCreation: false });
    await this.producer.connect();
    const consumer = this.client.consumer({ groupId, sessionTimeout: REPLAY_SESSION_TIMEOUT_MS, heartbeatInterval: 3000, maxWaitTimeInMs: 200 });
    this.consumer = consumer;
    await consumer.connect();
    await consumer.subscribe({ topics: [source], fromBeginning: true });
    const joinStarted = Date.now();
    // Joining waits for every current member to rejoin or time out; say so when it takes long.
    const slow = setTimeout(() => {
      notice({
        level: 'warn',
        text:
          `still joining consumer group "${groupId}" after ${JOIN_NOTICE_AFTER_MS / 1000} s: the broker waits for its current members to rejoin or to pass ` +
          `their session timeout (up to ${REPLAY_SESSION_TIMEOUT_MS / 1000} s after a killed replay run)`,
      });
    }, JOIN_NOTICE_AFTER_MS);
    try {
      await consumer.run(async (batch) => this.onBatch(batch));
    } finally {
      clearTimeout(slow);
    }
    const joinMs = Date.now() - joinStarted;
    if (joinMs >= JOIN_NOTICE_AFTER_MS) notice({ level: 'info', text: `joined consumer group "${groupId}" after ${(joinMs / 1000).toFixed(1)} s` });
    return { available: Number(available) };
  }

  async next(): Promise<KafkaItem | undefined> {
    const until = Date.now() + (this.options.fetchTimeoutMs ?? 30_000);
    for (;;) {
      const item = this.pending.shift();
      if (item) {
        if (this.paused && this.pending.length < 100) {
          this.paused = false;
          this.consumer?.resume([...this.ends.keys()].map((partition) => ({ topic: this.source, partition })));
        }
        return item;
      }
      if (this.exhausted() || !this.consumer) return undefined;
      if (Date.now() > until) throw new Error(`no record of "${this.source}" arrived within ${this.options.fetchTimeoutMs ?? 30_000} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 250);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
  }

  async republish(item: KafkaItem): Promise<ReplayDestination> {
    const plan = replayRecord(item.record, Date.now());
    const target = this.options.toTopic ?? plan?.topic;
    if (!plan || target === undefined) throw new ReplayItemError(`record ${item.messageId ?? ''} has no ${HEADERS.originalTopic} header (not dead-lettered by twophase)`);
    if (!this.topics?.has(target)) {
      this.topics = new Set(await this.admin!.listTopics());
      if (!this.topics.has(target)) throw new ReplayItemError(`topic "${target}" does not exist; left in the dead-letter topic`);
    }
    await this.producer!.send({ topic: target, records: [plan.record], acks: -1 });
    return { description: `topic "${target}"` };
  }

  async remove(item: KafkaItem): Promise<void> {
    this.mark(item, 'removed');
    // Commit now and then, so a long run that is killed does not start over (re-sending is
    // harmless, but slow).
    if (++this.removedSinceCommit >= COMMIT_EVERY) {
      this.removedSinceCommit = 0;
      await this.commit();
    }
  }

  async release(item: KafkaItem): Promise<void> {
    this.mark(item, 'left');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      await this.commit();
    } finally {
      await Promise.all([this.consumer?.disconnect(), this.producer?.disconnect(), this.admin?.disconnect()].map((p) => p?.catch(() => undefined)));
    }
  }

  private onBatch(batch: FetchedBatch): void {
    if (this.closed || batch.topic !== this.source) return;
    this.controls = batch;
    const end = this.ends.get(batch.partition) ?? 0n;
    let position = this.positions.get(batch.partition) ?? 0n;
    for (const record of batch.messages) {
      const offset = BigInt(record.offset);
      if (offset < position || offset >= end) continue;
      position = offset + 1n;
      this.pending.push(this.toItem(batch.partition, record));
      let list = this.marks.get(batch.partition);
      if (!list) this.marks.set(batch.partition, (list = []));
      list.push({ offset, mark: 'taken' });
    }
    this.positions.set(batch.partition, position);
    batch.resolveOffset(batch.messages[batch.messages.length - 1]!.offset);
    if (this.pending.length >= 1000 && !this.paused) {
      this.paused = true;
      this.consumer?.pause([...this.ends.keys()].map((partition) => ({ topic: this.source, partition })));
    }
    this.wake?.();
  }

  private exhausted(): boolean {
    for (const [partition, end] of this.ends) if ((this.positions.get(partition) ?? 0n) < end) return false;
    return true;
  }

  private toItem(partition: number, record: KafkaRecord): KafkaItem {
    const headers = record.headers;
    if (!this.checkedFirst) {
      this.checkedFirst = true;
      if (readHeader(headers, HEADERS.reason) === undefined && readHeader(headers, HEADERS.originalTopic) === undefined) {
        this.notice({
          level: 'warn',
          text: `the first record of "${this.source}" carries no dead-letter headers (${HEADERS.reason}, ${HEADERS.originalTopic}): "${this.source}" does not look like a dead-letter topic`,
        });
      }
    }
    const target = this.options.toTopic ?? readHeader(headers, HEADERS.originalTopic);
    return {
      partition,
      record,
      target,
      messageId: readHeader(headers, HEADERS.originalMessageId) ?? `${this.source}:${partition}:${record.offset}`,
      // The replayed copy carries the original `topic:partition:offset` as its key when it had no key header.
      ...replayKeyOf(headers, readHeader(headers, HEADERS.originalMessageId)),
      reason: readHeader(headers, HEADERS.reason),
      attempts: readCount(headers, HEADERS.attempts),
      errorMessage: readHeader(headers, HEADERS.errorMessage),
      destination: target === undefined ? undefined : { description: `topic "${target}"` },
    };
  }

  private mark(item: KafkaItem, mark: Mark): void {
    const entry = this.marks.get(item.partition)?.find((m) => m.offset === BigInt(item.record.offset));
    if (entry) entry.mark = mark;
  }

  /** Commits, per partition, the offset of the first record not removed (or past the last removed one). */
  /**
   * Commits one at a time: the replay loop may remove records while an earlier commit is still
   * in flight, and a later commit must not land before (and be overwritten by) an earlier one.
   */
  private commit(): Promise<void> {
    const next = this.committing.then(() => this.commitNow());
    this.committing = next.catch(() => undefined);
    return next;
  }

  private async commitNow(): Promise<void> {
    const controls = this.controls;
    if (!controls) return;
    const offsets: Array<{ topic: string; partition: number; offset: string }> = [];
    for (const [partition, list] of this.marks) {
      let next: bigint | undefined;
      for (const { offset, mark } of list) {
        if (mark !== 'removed') break;
        next = offset + 1n;
      }
      if (next !== undefined) offsets.push({ topic: this.source, partition, offset: next.toString() });
    }
    if (offsets.length > 0) await controls.commit(offsets);
  }
}
