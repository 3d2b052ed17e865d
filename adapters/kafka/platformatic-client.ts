/**
 * Binds the adapter's {@link KafkaClient} interface to @platformatic/kafka 2.x. The only file of
 * the adapter that touches @platformatic/kafka's API surface; the package is loaded when
 * {@link platformaticClient} is called, so `twophase/kafka` imports without it.
 *
 * @platformatic/kafka facts this binding relies on (2.12.1, `dist/clients/consumer/*.js`):
 * - `consumer.consume({ autocommit: false })` returns one `MessagesStream` (a Readable) for the
 *   member's whole assignment; nothing is committed unless `consumer.commit()` is called.
 *   Offsets and timestamps are bigint, headers a Map (repeated keys in `headerEntries`).
 * - There is no per-partition pause and no rebalance callback that can delay a revocation: under
 *   the classic protocol the client rejoins on its own; under KIP-848 (`groupProtocol:
 *   'consumer'`) it acknowledges a revocation on the next heartbeat. `consumer.assignments` is
 *   replaced by a new array at each change and the stream then fetches the new assignment.
 * - `consumer.commit()` sends the generation (classic) or member epoch (KIP-848) it holds at the
 *   time of the call; on a rejoin error it rejoins and sends the same offsets again, under the
 *   newer generation, where the broker takes them even when the partition moved to another
 *   member (seen in the chaos runs, up to four generations later). The offset committer commits
 *   an unchanged offset again after a while (offset-committer.ts), so such a late commit cannot
 *   hold the group's offset behind.
 *
 * What the binding adds so the source sees the same contract as with kafkajs:
 * - **Group join on every assignment change.** The assignment array is compared at each fetch,
 *   record, heartbeat and join; a change is reported to {@link GroupConsumer.onGroupJoin}
 *   synchronously, before any record fetched after it is delivered.
 * - **Fetch again from the committed offset.** The source stops every worker at a join and
 *   expects each partition it keeps to start again at its committed offset. The binding keeps,
 *   per partition, the records delivered since the last commit that landed, and delivers them
 *   again at the start of the new generation; records below the next expected offset that the
 *   stream fetches again are dropped. A revoked partition's fetch position is forgotten, so if it
 *   comes back it starts at the group's committed offset (or the reset policy).
 * - **Per-partition pause.** Records of a paused partition are held back (in order) and
 *   delivered on resume; when more than `maxHeldRecords` are held, the whole stream pauses.
 * - **A typed refusal of a classic join.** `INCONSISTENT_GROUP_PROTOCOL` (another client's
 *   assignor names in the group) becomes a {@link KafkaGroupProtocolError} naming the fixes.
 */
import type {
  Admin as PlatformaticAdmin,
  Consumer as PlatformaticConsumer,
  ConsumerOptions,
  Message,
  MessagesStream,
  Producer as PlatformaticProducer,
  ProducerOptions,
} from '@platformatic/kafka';
import * as nodeModule from 'node:module';
import { ConfigurationError } from '../../src';
import type {
  ClusterAdmin,
  FetchedBatch,
  GroupAssignment,
  GroupConsumer,
  GroupConsumerConfig,
  GroupDescription,
  KafkaClient,
  KafkaHeaders,
  KafkaRecord,
  ProducedRecordMetadata,
  RecordProducer,
  RecordProducerConfig,
  TopicPartition,
  TopicPartitionOffset,
} from './client';
import { KafkaGroupProtocolError } from './errors';
import { joinsSettled, trackJoins } from './platformatic-joins';

/** The package name, as users install it. */
export const PLATFORMATIC_KAFKA = '@platformatic/kafka';

/** The Node versions @platformatic/kafka 2.x declares (`engines`): 22.22 or later on 22, 24.6 or later. */
export const PLATFORMATIC_NODE_RANGE = '>= 22.22.0 || >= 24.6.0';

/** Connection settings shared by the consumer, producer and admin @platformatic/kafka builds. */
export interface PlatformaticConnection {
  /** Client id sent to the broker. */
  readonly clientId: string;
  /** `host:port` of one or more brokers. */
  readonly bootstrapBrokers: readonly string[];
  /** Any other @platformatic/kafka `BaseOptions` (tls, sasl, timeout in ms, retries, retryDelay in ms, …). */
  readonly [option: string]: unknown;
}

/** Binding settings. */
export interface PlatformaticClientOptions {
  /**
   * Consumer group protocol: `classic` (JoinGroup/SyncGroup, client-side assignment) or
   * `consumer` (KIP-848: incremental, server-side assignment; Kafka 4.0 or later). Default `classic`.
   */
  readonly groupProtocol?: 'classic' | 'consumer';
  /** KIP-848 only: the server-side assignor (`uniform` or `range`); the broker's default when unset. */
  readonly groupRemoteAssignor?: string;
  /** Records held back for paused partitions before the whole stream pauses. Default 2000. */
  readonly maxHeldRecords?: number;
}

type PlatformaticModule = typeof import('@platformatic/kafka');

/** True when `version` (`v22.22.0`) satisfies {@link PLATFORMATIC_NODE_RANGE}. */
export function nodeSupportsPlatformatic(version: string): boolean {
  const [major = 0, minor = 0] = version.replace(/^v/, '').split('.').map(Number);
  if (major === 22) return minor >= 22;
  if (major === 24) return minor >= 6;
  return major > 24 || major === 23;
}

let loaded: PlatformaticModule | undefined;

/**
 * The `Map` of the context @platformatic/kafka runs in. The client tests `headers instanceof Map`;
 * a test runner that runs this file in another V8 context (jest) would otherwise hand it a Map it
 * does not recognise, and the headers would be dropped.
 */
let ClientMap: MapConstructor = Map;

/**
 * Checks that @platformatic/kafka can run here and is installed.
 * @param version the Node version to check (default: this process's)
 * @throws ConfigurationError naming the Node version when it is below {@link PLATFORMATIC_NODE_RANGE},
 *   or naming the package when it is not installed
 */
export function checkPlatformaticRuntime(version = process.version): void {
  loadPlatformatic(version);
}

/**
 * Loads @platformatic/kafka with Node's own `require` (the package is ESM-only; Node 22.12 and
 * later load it synchronously). Not exported from `twophase/kafka`, so its declarations never
 * name the package's types.
 */
function loadPlatformatic(version = process.version): PlatformaticModule {
  if (!nodeSupportsPlatformatic(version)) {
    throw new ConfigurationError(`${PLATFORMATIC_KAFKA} needs Node ${PLATFORMATIC_NODE_RANGE}; this process runs Node ${version}. Use kafkajs (kafkajsClient) on this Node, or upgrade Node.`);
  }
  if (loaded) return loaded;
  try {
    // Node's own module loader (test runners that replace `require` cannot load ESM this way).
    const native = (process.getBuiltinModule?.('node:module') as unknown as typeof nodeModule | undefined) ?? nodeModule;
    loaded = native.createRequire(__filename)(PLATFORMATIC_KAFKA) as PlatformaticModule;
    const vm = process.getBuiltinModule?.('node:vm') as { runInThisContext(code: string): unknown } | undefined;
    ClientMap = (vm?.runInThisContext('Map') as MapConstructor | undefined) ?? Map;
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND') {
      throw new ConfigurationError(`${PLATFORMATIC_KAFKA} is not installed: run \`npm install ${PLATFORMATIC_KAFKA}\` (an optional peer dependency of twophase/kafka)`, { cause: error });
    }
    throw error;
  }
  return loaded;
}

/**
 * A {@link KafkaClient} on @platformatic/kafka: each consumer, producer and admin the adapter asks
 * for is built with `connection`.
 *
 * ```ts
 * const client = platformaticClient({ clientId: 'billing', bootstrapBrokers: ['127.0.0.1:9092'] }, { groupProtocol: 'consumer' });
 * const source = new KafkaSource({ client }, { topics: ['payments'], groupId: 'billing' });
 * ```
 * With `groupProtocol: 'classic'`, a consumer whose join the broker refuses with
 * `INCONSISTENT_GROUP_PROTOCOL` (a kafkajs member in the group) fails its start, or crashes on a
 * later rejoin, with a {@link KafkaGroupProtocolError}.
 * @throws ConfigurationError when @platformatic/kafka is not installed, when Node is older than
 *   {@link PLATFORMATIC_NODE_RANGE}, or for an invalid option
 */
export function platformaticClient(connection: PlatformaticConnection, options: PlatformaticClientOptions = {}): KafkaClient {
  const kafka = loadPlatformatic();
  if (!connection || typeof connection.clientId !== 'string' || !Array.isArray(connection.bootstrapBrokers) || connection.bootstrapBrokers.length === 0) {
    throw new ConfigurationError('platformaticClient: connection needs clientId (string) and bootstrapBrokers (non-empty array of host:port)');
  }
  for (const key of Object.keys(options)) {
    if (!['groupProtocol', 'groupRemoteAssignor', 'maxHeldRecords'].includes(key)) throw new ConfigurationError(`platformaticClient: unknown option "${key}"`);
  }
  const protocol = options.groupProtocol ?? 'classic';
  if (protocol !== 'classic' && protocol !== 'consumer') throw new ConfigurationError(`platformaticClient: groupProtocol must be "classic" or "consumer", got ${JSON.stringify(protocol)}`);
  const maxHeld = options.maxHeldRecords ?? 2000;
  if (!Number.isInteger(maxHeld) || maxHeld < 1) throw new ConfigurationError(`platformaticClient: maxHeldRecords must be a positive integer, got ${String(maxHeld)}`);
  const base = { ...connection, bootstrapBrokers: [...connection.bootstrapBrokers] };
  trackJoins(kafka);
  return {
    consumer: (config) =>
      new PlatformaticGroupConsumer(new kafka.Consumer(consumerOptions(base, config, protocol, options.groupRemoteAssignor)), maxHeld, protocol === 'classic' ? config.groupId : undefined),
    producer: (config) => new PlatformaticRecordProducer(new kafka.Producer(producerOptions(base, config))),
    admin: () => new PlatformaticClusterAdmin(new kafka.Admin(base as never)),
  };
}

function consumerOptions(base: Record<string, unknown>, config: GroupConsumerConfig, protocol: 'classic' | 'consumer', assignor: string | undefined): ConsumerOptions<Buffer, Buffer, Buffer, Buffer> {
  const out: Record<string, unknown> = { ...base, groupId: config.groupId, autocommit: false };
  // The client checks rebalanceTimeout >= sessionTimeout for both protocols; under KIP-848 the
  // session timeout and heartbeat interval are the broker's (group.consumer.*), not the member's.
  if (config.sessionTimeout !== undefined) out.sessionTimeout = config.sessionTimeout;
  if (protocol === 'consumer') {
    out.groupProtocol = 'consumer';
    if (assignor) out.groupRemoteAssignor = assignor;
  } else if (config.heartbeatInterval !== undefined) {
    out.heartbeatInterval = config.heartbeatInterval;
  }
  if (config.rebalanceTimeout !== undefined) out.rebalanceTimeout = config.rebalanceTimeout;
  if (config.maxWaitTimeInMs !== undefined) out.maxWaitTime = config.maxWaitTimeInMs;
  if (config.maxBytesPerPartition !== undefined) out.maxBytesPerPartition = config.maxBytesPerPartition;
  if (config.maxBytes !== undefined) out.maxBytes = config.maxBytes;
  if (config.minBytes !== undefined) out.minBytes = config.minBytes;
  if (config.metadataMaxAge !== undefined) out.metadataMaxAge = config.metadataMaxAge;
  if (config.allowAutoTopicCreation !== undefined) out.autocreateTopics = config.allowAutoTopicCreation;
  // Fetch isolation: 0 = READ_UNCOMMITTED, 1 = READ_COMMITTED (Kafka's Fetch API).
  out.isolationLevel = config.readUncommitted ? 0 : 1;
  if (config.rackId !== undefined) out.clientRack = config.rackId;
  return out as unknown as ConsumerOptions<Buffer, Buffer, Buffer, Buffer>;
}

function producerOptions(base: Record<string, unknown>, config: RecordProducerConfig | undefined): ProducerOptions<Buffer, Buffer, Buffer, Buffer> {
  const out: Record<string, unknown> = { ...base };
  if (config?.allowAutoTopicCreation !== undefined) out.autocreateTopics = config.allowAutoTopicCreation;
  if (config?.idempotent !== undefined) out.idempotent = config.idempotent;
  return out as unknown as ProducerOptions<Buffer, Buffer, Buffer, Buffer>;
}

const key = (topic: string, partition: number): string => `${topic}:${partition}`;

/** How long `disconnect` waits for a group join in flight before it closes anyway, ms. */
const CLOSE_AFTER_JOIN_MS = 10_000;

/** Headers as the port gives them: one key per name, repeated names as arrays, values as Buffers. */
export function headersFromEntries(entries: ReadonlyArray<readonly [Buffer, Buffer]>): KafkaHeaders {
  const out: Record<string, Buffer | Buffer[]> = {};
  for (const [name, value] of entries) {
    const k = name.toString('utf8');
    const bytes = value ?? Buffer.alloc(0);
    const seen = out[k];
    if (seen === undefined) out[k] = bytes;
    else if (Array.isArray(seen)) seen.push(bytes);
    else out[k] = [seen, bytes];
  }
  return out;
}

/** Headers as @platformatic/kafka writes them: a Map with one Buffer key per occurrence (repeated names kept). */
export function headersToMap(headers: KafkaHeaders | undefined): Map<Buffer, Buffer> | undefined {
  if (!headers) return undefined;
  const out = new ClientMap<Buffer, Buffer>();
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) out.set(Buffer.from(name, 'utf8'), Buffer.isBuffer(one) ? one : Buffer.from(String(one), 'utf8'));
  }
  return out;
}

function toBuffer(value: Buffer | string | null | undefined): Buffer | undefined {
  if (value === null || value === undefined) return undefined;
  return Buffer.isBuffer(value) ? value : Buffer.from(value, 'utf8');
}

function toRecord(message: Message<Buffer, Buffer, Buffer, Buffer>): KafkaRecord {
  return {
    key: message.key === undefined || message.key === null ? null : message.key,
    value: message.value === undefined || message.value === null ? null : message.value,
    offset: message.offset.toString(),
    timestamp: message.timestamp.toString(),
    headers: headersFromEntries(message.headerEntries),
  };
}

interface PartitionState {
  readonly topic: string;
  readonly partition: number;
  /** Delivered to the source, not covered by a commit that landed (delivered again at the next join). */
  delivered: KafkaRecord[];
  /** Fetched, not yet delivered (the partition is paused, or the flush is pending). */
  held: KafkaRecord[];
  /** The offset after the last record taken from the stream; records below it are fetched again and dropped. */
  next: bigint | undefined;
}

class PlatformaticGroupConsumer implements GroupConsumer {
  private stream: MessagesStream<Buffer, Buffer, Buffer, Buffer> | undefined;
  private topics: string[] = [];
  private fromBeginning = false;
  private readonly partitions = new Map<string, PartitionState>();
  private readonly pausedKeys = new Set<string>();
  private assignmentSeen: unknown = null;
  private epoch = 0;
  private heldCount = 0;
  /** Commits sent and not answered; an assignment change waits for them. */
  private commitsInFlight = 0;
  /** An assignment change seen while commits were in flight: reported once they are answered. */
  private joinDeferred = false;
  /** Records of partitions assigned by a change not reported yet, by partition. */
  private readonly early = new Map<string, KafkaRecord[]>();
  private streamPaused = false;
  private flushScheduled = false;
  private running = false;
  private eachBatch: ((batch: FetchedBatch) => Promise<void>) | undefined;
  private readonly joinListeners = new Set<(event: GroupAssignment) => void>();
  private readonly rebalanceListeners = new Set<() => void>();
  private readonly crashListeners = new Set<(error: Error, restart: boolean) => void>();

  /**
   * @param classicGroupId the group id when the member joins with the classic protocol: a join
   *   refused with INCONSISTENT_GROUP_PROTOCOL then becomes a {@link KafkaGroupProtocolError}
   */
  constructor(
    private readonly consumer: PlatformaticConsumer<Buffer, Buffer, Buffer, Buffer>,
    private readonly maxHeld: number,
    private readonly classicGroupId: string | undefined,
  ) {
    const check = () => this.checkAssignment();
    consumer.on('consumer:group:join', check);
    consumer.on('consumer:heartbeat:end', check);
    consumer.on('consumer:group:rebalance', () => {
      for (const listener of this.rebalanceListeners) listener();
    });
    // A failed rejoin (after a heartbeat found the member out of the group) is emitted on the
    // consumer, and the member sends no more heartbeats: a crash. Without a listener, the
    // EventEmitter would throw it as an uncaught exception and end the process.
    consumer.on('error', (error: Error) => this.crashed(error));
  }

  async connect(): Promise<void> {
    // Connections open on first use; a metadata request fails here when no broker answers.
    await this.consumer.metadata({ topics: [] });
  }

  subscribe(subscription: { readonly topics: readonly string[]; readonly fromBeginning: boolean }): Promise<void> {
    this.topics = [...subscription.topics];
    this.fromBeginning = subscription.fromBeginning;
    return Promise.resolve();
  }

  async run(eachBatch: (batch: FetchedBatch) => Promise<void>): Promise<void> {
    this.eachBatch = eachBatch;
    this.running = true;
    const stream = await this.consumer
      .consume({
        topics: this.topics,
        mode: 'committed',
        fallbackMode: this.fromBeginning ? 'earliest' : 'latest',
        autocommit: false,
      })
      .catch((error: unknown) => {
        throw this.typed(error);
      });
    this.stream = stream;
    const check = () => this.checkAssignment();
    stream.on('fetch', check);
    stream.on('offsets', check);
    stream.on('error', (error: Error) => this.crashed(error));
    this.checkAssignment();
    stream.on('data', (message: Message<Buffer, Buffer, Buffer, Buffer>) => this.onMessage(message));
  }

  pause(partitions: readonly TopicPartition[]): void {
    for (const p of partitions) this.pausedKeys.add(key(p.topic, p.partition));
  }

  resume(partitions: readonly TopicPartition[]): void {
    for (const p of partitions) this.pausedKeys.delete(key(p.topic, p.partition));
    this.scheduleFlush();
  }

  paused(): ReadonlyArray<{ readonly topic: string; readonly partitions: readonly number[] }> {
    const grouped = new Map<string, number[]>();
    for (const k of this.pausedKeys) {
      const state = this.partitions.get(k);
      if (!state) continue;
      const list = grouped.get(state.topic) ?? [];
      list.push(state.partition);
      grouped.set(state.topic, list);
    }
    return [...grouped].map(([topic, partitions]) => ({ topic, partitions }));
  }

  async disconnect(): Promise<void> {
    this.running = false;
    const stream = this.stream;
    this.stream = undefined;
    if (stream && !stream.destroyed) await stream.close().catch(() => undefined);
    // Never close while a (re)join is in flight: the client would go on heartbeating after the
    // close, for good (platformatic-joins.ts). A join ends within the group's rebalance.
    await joinsSettled(this.consumer, CLOSE_AFTER_JOIN_MS);
    await this.consumer.close(true);
  }

  onGroupJoin(listener: (event: GroupAssignment) => void): () => void {
    this.joinListeners.add(listener);
    return () => this.joinListeners.delete(listener);
  }

  onRebalancing(listener: () => void): () => void {
    this.rebalanceListeners.add(listener);
    return () => this.rebalanceListeners.delete(listener);
  }

  onCrash(listener: (error: Error, restart: boolean) => void): () => void {
    this.crashListeners.add(listener);
    return () => this.crashListeners.delete(listener);
  }

  /** Reports a changed assignment as a new generation (see the module comment). */
  private checkAssignment(): void {
    const current = this.consumer.assignments;
    if (!this.running || current === this.assignmentSeen || current === null) return;
    if (this.commitsInFlight > 0) {
      // A commit sent while the old assignment held lands before the client acknowledges the
      // change (same coordinator connection, in order); report the change once it is answered,
      // so no commit of the old generation completes after the new one began.
      this.joinDeferred = true;
      return;
    }
    this.joinDeferred = false;
    this.assignmentSeen = current;
    const assignment: Record<string, number[]> = {};
    const now = new Set<string>();
    for (const { topic, partitions } of current) {
      if (!this.topics.includes(topic)) continue;
      assignment[topic] = [...partitions].sort((a, b) => a - b);
      for (const partition of partitions) now.add(key(topic, partition));
    }
    for (const [k, state] of this.partitions) {
      if (now.has(k)) {
        // Kept: its new worker starts again at the committed offset.
        this.heldCount += state.delivered.length;
        state.held = state.delivered.concat(state.held);
        state.delivered = [];
      } else {
        this.heldCount -= state.held.length;
        this.partitions.delete(k);
        this.pausedKeys.delete(k);
        this.stream?.offsetsToFetch.delete(k);
      }
    }
    for (const [k, records] of this.early) if (!now.has(k) || this.partitions.has(k)) this.heldCount -= records.length;
    for (const k of now) {
      if (this.partitions.has(k)) continue;
      const [topic, partition] = splitKey(k);
      const held = this.early.get(k) ?? [];
      const last = held[held.length - 1];
      this.partitions.set(k, { topic, partition, delivered: [], held, next: last ? BigInt(last.offset) + 1n : undefined });
    }
    this.early.clear();
    this.epoch++;
    const event: GroupAssignment = { memberId: this.consumer.memberId ?? '', assignment };
    for (const listener of this.joinListeners) listener(event);
    this.scheduleFlush();
  }

  private onMessage(message: Message<Buffer, Buffer, Buffer, Buffer>): void {
    this.checkAssignment();
    const k = key(message.topic, message.partition);
    const state = this.partitions.get(k);
    if (!state) {
      // A partition of an assignment change not reported yet (commits in flight): keep its
      // records for the new generation. Any other is revoked: its next owner fetches it.
      if (this.joinDeferred && this.assignedNow(message.topic, message.partition)) {
        const early = this.early.get(k) ?? [];
        const last = early[early.length - 1];
        if (last && message.offset < BigInt(last.offset) + 1n) return;
        early.push(toRecord(message));
        this.early.set(k, early);
        this.heldCount++;
      }
      return;
    }
    if (state.next !== undefined && message.offset < state.next) return;
    state.next = message.offset + 1n;
    state.held.push(toRecord(message));
    this.heldCount++;
    if (this.heldCount > this.maxHeld && !this.streamPaused && this.stream) {
      this.streamPaused = true;
      this.stream.pause();
    }
    this.scheduleFlush();
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    if (!this.running || !this.eachBatch) return;
    for (const [k, state] of this.partitions) {
      if (state.held.length === 0 || this.pausedKeys.has(k)) continue;
      const records = state.held;
      state.held = [];
      this.heldCount -= records.length;
      state.delivered.push(...records);
      this.eachBatch(this.batchOf(state, records)).catch((error: unknown) => {
        for (const listener of this.crashListeners) listener(error instanceof Error ? error : new Error(String(error)), false);
      });
    }
    if (this.streamPaused && this.heldCount <= this.maxHeld / 2 && this.stream) {
      this.streamPaused = false;
      this.stream.resume();
    }
  }

  private batchOf(state: PartitionState, records: KafkaRecord[]): FetchedBatch {
    const epoch = this.epoch;
    return {
      topic: state.topic,
      partition: state.partition,
      highWatermark: '-1',
      messages: records,
      resolveOffset: () => undefined,
      // The client heartbeats on its own timer, whatever the handlers do.
      heartbeat: () => Promise.resolve(),
      commit: (offsets) => this.commit(offsets),
      isRunning: () => this.running,
      isStale: () => epoch !== this.epoch,
    };
  }

  /** Reports a fatal client error to the crash listeners (typed; no restart), while running. */
  private crashed(error: Error): void {
    if (!this.running) return;
    const typed = this.typed(error) as Error;
    for (const listener of this.crashListeners) listener(typed, false);
  }

  /** A classic join refused for another client's assignor names as a {@link KafkaGroupProtocolError}; any other error as it is. */
  private typed(error: unknown): unknown {
    if (this.classicGroupId === undefined || !brokerErrorIn(error, 'INCONSISTENT_GROUP_PROTOCOL')) return error;
    return new KafkaGroupProtocolError(this.classicGroupId, { cause: error });
  }

  private assignedNow(topic: string, partition: number): boolean {
    return (this.consumer.assignments ?? []).some((a) => a.topic === topic && a.partitions.includes(partition));
  }

  private async commit(offsets: readonly TopicPartitionOffset[]): Promise<void> {
    if (this.joinDeferred) throw new Error('the group assignment is changing: commit refused until the new assignment is reported');
    this.commitsInFlight++;
    try {
      await this.consumer.commit({ offsets: offsets.map((o) => ({ topic: o.topic, partition: o.partition, offset: BigInt(o.offset), leaderEpoch: -1 })) });
    } finally {
      this.commitsInFlight--;
      // After the caller saw the answer (its continuation runs in this turn of the event loop).
      if (this.commitsInFlight === 0 && this.joinDeferred) setImmediate(() => this.checkAssignment());
    }
    for (const o of offsets) {
      const state = this.partitions.get(key(o.topic, o.partition));
      if (!state) continue;
      const committed = BigInt(o.offset);
      const firstKept = state.delivered.findIndex((r) => BigInt(r.offset) >= committed);
      state.delivered = firstKept < 0 ? [] : state.delivered.slice(firstKept);
    }
  }
}

function splitKey(k: string): [string, number] {
  const at = k.lastIndexOf(':');
  return [k.slice(0, at), Number(k.slice(at + 1))];
}

/** A broker error as @platformatic/kafka reports it: its API error name and whether the client retries it. */
interface BrokerErrorShape {
  readonly apiId?: unknown;
  readonly canRetry?: unknown;
  readonly errors?: unknown;
  readonly cause?: unknown;
}

/**
 * The first error in `error`, its aggregate members (`errors`) or causes (depth-first, at most 5
 * levels) that `matches`; undefined when none does.
 */
function findBrokerError(error: unknown, matches: (e: BrokerErrorShape) => boolean, depth = 0): BrokerErrorShape | undefined {
  if (!error || typeof error !== 'object' || depth > 5) return undefined;
  const e = error as BrokerErrorShape;
  if (matches(e)) return e;
  for (const inner of Array.isArray(e.errors) ? e.errors : []) {
    const found = findBrokerError(inner, matches, depth + 1);
    if (found) return found;
  }
  return findBrokerError(e.cause, matches, depth + 1);
}

/** True when `error`, one of its aggregate members or causes, is the broker error `apiId` (e.g. INCONSISTENT_GROUP_PROTOCOL). */
function brokerErrorIn(error: unknown, apiId: string): boolean {
  return findBrokerError(error, (e) => e.apiId === apiId) !== undefined;
}

/** The first broker error in `error`, its aggregate members or causes, that the client will not retry. */
function refusalIn(error: unknown): { apiId: string } | undefined {
  const found = findBrokerError(error, (e) => typeof e.apiId === 'string' && e.canRetry === false);
  return found ? { apiId: found.apiId as string } : undefined;
}

/**
 * The client's error, marked as the adapter reads kafkajs errors: `retriable: false` and `type`
 * (the broker's error name, e.g. MESSAGE_TOO_LARGE) when the broker refused for good.
 */
function withRefusal(error: unknown): unknown {
  const refusal = refusalIn(error);
  // Not `instanceof Error`: under a test runner the client's errors come from another V8 context.
  if (!refusal || typeof error !== 'object' || error === null) return error;
  return Object.assign(error, { retriable: false, type: refusal.apiId });
}

class PlatformaticRecordProducer implements RecordProducer {
  constructor(private readonly producer: PlatformaticProducer<Buffer, Buffer, Buffer, Buffer>) {}

  async connect(): Promise<void> {
    await this.producer.metadata({ topics: [] });
  }

  async send(request: Parameters<RecordProducer['send']>[0]): Promise<ProducedRecordMetadata[]> {
    const result = await this.producer.send({
      acks: request.acks ?? -1,
      ...(request.timeoutMs !== undefined ? { timeout: request.timeoutMs } : {}),
      messages: request.records.map((r) => ({
        topic: request.topic,
        key: toBuffer(r.key),
        value: toBuffer(r.value),
        partition: r.partition,
        timestamp: r.timestamp === undefined ? undefined : BigInt(r.timestamp),
        headers: headersToMap(r.headers),
      })),
    }).catch((error: unknown) => {
      throw withRefusal(error);
    });
    return (result.offsets ?? []).map((o) => ({ topic: o.topic, partition: o.partition, baseOffset: o.offset.toString() }));
  }

  disconnect(): Promise<void> {
    return this.producer.close();
  }
}

class PlatformaticClusterAdmin implements ClusterAdmin {
  constructor(private readonly admin: PlatformaticAdmin) {}

  async connect(): Promise<void> {
    await this.admin.metadata({ topics: [] });
  }

  disconnect(): Promise<void> {
    return this.admin.close();
  }

  listTopics(): Promise<string[]> {
    return this.admin.listTopics();
  }

  async createTopics(topics: ReadonlyArray<{ readonly topic: string; readonly numPartitions?: number; readonly replicationFactor?: number }>): Promise<boolean> {
    const existing = new Set(await this.admin.listTopics());
    const missing = topics.filter((t) => !existing.has(t.topic));
    if (missing.length === 0) return false;
    await this.admin.createTopics({ topics: missing.map((t) => ({ topic: t.topic, partitions: t.numPartitions ?? 1, replicas: t.replicationFactor ?? 1 })) });
    return true;
  }

  async partitionCounts(topics: readonly string[]): Promise<Record<string, number>> {
    const meta = await this.admin.metadata({ topics: [...topics], forceUpdate: true });
    const out: Record<string, number> = {};
    for (const [name, topic] of meta.topics) if (topics.includes(name)) out[name] = topic.partitionsCount;
    return out;
  }

  async watermarks(topic: string): Promise<Array<{ partition: number; low: string; high: string }>> {
    const count = (await this.partitionCounts([topic]))[topic] ?? 0;
    const ask = async (timestamp: bigint) => {
      const partitions = Array.from({ length: count }, (_, partitionIndex) => ({ partitionIndex, timestamp }));
      const [listed] = await this.admin.listOffsets({ topics: [{ name: topic, partitions }] });
      return new Map((listed?.partitions ?? []).map((p) => [p.partitionIndex, p.offset.toString()]));
    };
    // ListOffsets timestamps: -2 = earliest, -1 = latest (Kafka protocol).
    const [low, high] = await Promise.all([ask(-2n), ask(-1n)]);
    return Array.from({ length: count }, (_, partition) => ({ partition, low: low.get(partition) ?? '0', high: high.get(partition) ?? '0' }));
  }

  async committedOffsets(groupId: string, topic: string): Promise<Array<{ partition: number; offset: string }>> {
    const count = (await this.partitionCounts([topic]))[topic] ?? 0;
    const [group] = await this.admin.listConsumerGroupOffsets({ groups: [{ groupId, topics: [{ name: topic, partitionIndexes: Array.from({ length: count }, (_, i) => i) }] }] });
    const listed = group?.topics.find((t) => t.name === topic)?.partitions ?? [];
    return listed.map((p) => ({ partition: p.partitionIndex, offset: p.committedOffset.toString() })).sort((a, b) => a.partition - b.partition);
  }

  async describeGroup(groupId: string): Promise<GroupDescription> {
    const groups = await this.admin.describeGroups({ groups: [groupId] });
    const group = groups.get(groupId);
    const state = group?.state ? String(group.state) : 'Dead';
    const members = [...(group?.members.values() ?? [])].map((m) => ({ memberId: m.id, clientId: m.clientId, clientHost: m.clientHost }));
    return { state: state.charAt(0) + state.slice(1).toLowerCase().replace(/_(\w)/g, (_, c: string) => c.toUpperCase()), members };
  }
}
