/**
 * KafkaSource: a {@link MessageSource} over a Kafka consumer group (kafkajs 2.x by default).
 *
 * Design, and the broker behaviour each rule rests on:
 * - **Fetch and process are decoupled.** `eachBatch` only queues the records on their
 *   partition's worker and moves the fetch position (`resolveOffset`, which commits nothing with
 *   auto-commit off). The client's fetch loop therefore keeps running while handlers run: it
 *   heartbeats, and it rejoins promptly when the group rebalances, so a long handler neither gets
 *   the member evicted nor holds up a rebalance of the whole group (kafkajs issues #130, #708).
 * - **Order within a partition.** One worker per partition dispatches one record at a time in
 *   offset order; partitions run concurrently, bounded by `partitionConcurrency`.
 * - **Offsets.** A record's offset is resolved only when it settled (claim committed and acked,
 *   a done duplicate, or written to the dead-letter topic). Commits carry the end of the
 *   contiguous settled prefix of each partition, every `commitIntervalMs`, when the group starts
 *   rebalancing, and at shutdown ({@link OffsetCommitter}, offset-committer.ts).
 * - **Ownership.** Kafka's classic group protocol checks the generation of an OffsetCommit but not
 *   which member owns the partition (KIP-62 era coordinator; kafkajs issue #1046): a member that
 *   rejoined could commit a partition that moved to another member. Each group join therefore
 *   starts a new generation here; workers of the old one stop (their in-flight dispatch finishes
 *   and commits its claim, and claim commits in flight end), and only workers of the current generation, for partitions in the
 *   current assignment, are ever committed. The check and the commit call run in one synchronous
 *   step, and the commit is sent once (no client retry that could carry a newer generation).
 *   The broker refuses commits of an older generation (`ILLEGAL_GENERATION`) on its own.
 * - **Rebalance mid-handler.** The record's new owner claims it, finds it busy (this member's
 *   lease, kept alive by the consumer), waits in place, and once this member committed the
 *   claim, finds it done and skips it.
 * - **Requeue in place.** Busy, retryable failures, claim store outages and lost leases pause
 *   the partition's fetching, wait, and dispatch the same record again; the core counts attempts
 *   and dead-letters at `maxAttempts`. Nothing after the record runs meanwhile.
 * - **Dead letters.** A reject writes the record to `<topic>.dlq` (acks = all) with headers naming
 *   the original topic, partition, offset, reason and attempts, and only then settles the offset
 *   ({@link DeadLetterWriter}, dead-letter-writer.ts; the topics are checked at start by
 *   dead-letter-topics.ts).
 *
 * This file is the façade: lifecycle (start, stopIntake, close, crash), group generations and the
 * partition workers; the jobs above live in their own units.
 */
import {
  type Claimer,
  ConfigurationError,
  type Logger,
  type MessageSource,
  ShutdownError,
} from '../../src';
import {
  AdapterEvents,
  type AdapterSurface,
  checkKnownOptions,
  type DeliverySink,
  LogLimiter,
  type SourceStartOptions,
  Semaphore,
} from '../../src/adapter-kit';
import type { Kafka } from 'kafkajs';
import type { FetchedBatch, GroupAssignment, GroupConsumer, KafkaClient, KafkaRecord, RecordProducer, TopicPartition } from './client';
import { runStartChecks } from './start-checks';
import { DeadLetterWriter } from './dead-letter-writer';
import type { KafkaSourceEvent, KafkaSourceStats } from './events';
import { kafkajsClient } from './kafkajs-client';
import { KAFKAJS_CONSUMER_DEFAULTS, type KafkaSourceOptions, resolveKafkaSourceOptions, type ResolvedKafkaSourceOptions } from './options';
import { OffsetCommitter } from './offset-committer';
import { PartitionWorker, type WorkerHost } from './partition-worker';
import { checkPeerVersion } from '../../src/adapter-kit';
import { SUPPORTED_RANGE } from './peer';
import { asUnavailable } from './errors';

export type { KafkaSourceEvent, KafkaSourceStats } from './events';

/** What the source is given: a kafkajs `Kafka` (the caller creates and configures it) or any {@link KafkaClient}. */
export type KafkaSourceDependencies = { readonly kafka: Kafka } | { readonly client: KafkaClient };

/** Lifecycle of a source. */
export type KafkaSourceState = 'created' | 'starting' | 'running' | 'stopping' | 'closed' | 'crashed';

interface Generation {
  readonly epoch: number;
  readonly memberId: string;
  /** `topic\0partition` of every partition assigned in this generation. */
  readonly owned: ReadonlySet<string>;
  readonly partitions: readonly TopicPartition[];
  /** The latest batch of this generation: its controls commit and heartbeat for the consumer. */
  controls: FetchedBatch | undefined;
}

const tp = (topic: string, partition: number): string => `${topic}\u0000${partition}`;

/**
 * Consumes Kafka topics for a {@link twophase!ConsumerBase} (see the module comment for the design).
 *
 * ```ts
 * const source = new KafkaSource({ kafka }, { topics: ['payments'], groupId: 'billing' });
 * const consumer = new PaymentsConsumer({ name: 'billing', claimer, source });
 * await consumer.start();
 * ```
 */
export class KafkaSource implements MessageSource, AdapterSurface<ResolvedKafkaSourceOptions, KafkaSourceStats, KafkaSourceEvent> {
  readonly system = 'kafka';

  /** The topics consumed, joined by `,`. */
  get destinationName(): string {
    return this.options.topics.join(',');
  }
  private options: ResolvedKafkaSourceOptions;
  /** True when the caller set `claimBatchSize` (the default fits the claimer: {@link KafkaSource.fitClaimer}). */
  private readonly claimBatchSizeGiven: boolean;
  private readonly client: KafkaClient;
  private readonly logger: Logger;
  private readonly counters: KafkaSourceStats = {
    batches: 0,
    records: 0,
    settled: 0,
    preclaimed: 0,
    preclaimReleased: 0,
    requeuedInPlace: 0,
    repeatedSettlesIgnored: 0,
    chunkRollbacks: 0,
    commits: 0,
    commitFailures: 0,
    groupJoins: 0,
    deadLettered: 0,
    deadLetterFailures: 0,
    pauses: 0,
    resumes: 0,
  };
  private readonly events: AdapterEvents<KafkaSourceEvent>;
  private lifecycle: KafkaSourceState = 'created';
  private consumer: GroupConsumer | undefined;
  private producer: RecordProducer | undefined;
  private host: WorkerHost | undefined;
  private sink: DeliverySink | undefined;
  private generation: Generation | undefined;
  private epochCounter = 0;
  /** Workers of the current generation. */
  private readonly workers = new Map<string, PartitionWorker>();
  /** The last worker of each partition, of any generation: a new worker waits for it, then skips what it settled. */
  private readonly tails = new Map<string, PartitionWorker>();
  private inFlight = 0;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private readonly committer: OffsetCommitter;
  private readonly deadLetters: DeadLetterWriter;
  private clientCrashed = false;
  private stopDeadline = Infinity;
  private readonly unsubscribe: Array<() => void> = [];
  /** Rate limit of the lines logged per record (waits for another owner's lease). */
  private readonly waitLog: LogLimiter;
  /** The consumer's lease length, ms, when it told it at start: the longest wait for a lease left by a crashed owner. */
  private leaseTtlMs: number | undefined;

  /**
   * @param dependencies the client: `{ kafka }` (a kafkajs `Kafka`) or `{ client }` (a {@link KafkaClient})
   * @param options see {@link KafkaSourceOptions}
   * @throws ConfigurationError for an invalid option, naming the field and the value
   */
  constructor(dependencies: KafkaSourceDependencies, options: KafkaSourceOptions) {
    if (!dependencies || typeof dependencies !== 'object') throw new ConfigurationError('dependencies are required: { kafka } or { client }');
    checkKnownOptions('KafkaSource dependencies', dependencies, ['kafka', 'client'] satisfies ('kafka' | 'client')[]);
    if ('client' in dependencies && dependencies.client) this.client = dependencies.client;
    else if ('kafka' in dependencies && dependencies.kafka && typeof dependencies.kafka.consumer === 'function') this.client = kafkajsClient(dependencies.kafka);
    else throw new ConfigurationError('dependencies.kafka must be a kafkajs Kafka instance (or pass dependencies.client)');
    this.options = resolveKafkaSourceOptions(options);
    this.claimBatchSizeGiven = options.claimBatchSize !== undefined;
    this.logger = this.options.logger;
    checkPeerVersion('kafkajs', SUPPORTED_RANGE, this.logger);
    this.events = new AdapterEvents('twophase/kafka', this.logger);
    this.waitLog = new LogLimiter(this.logger, { groupId: this.options.groupId });
    this.committer = new OffsetCommitter({
      logger: this.logger,
      groupId: this.options.groupId,
      mayCommit: () => this.lifecycle !== 'crashed' && this.lifecycle !== 'closed' && this.lifecycle !== 'created',
      generation: () => this.generation,
      workers: () => this.workers,
      committed: (offsets) => {
        this.counters.commits++;
        this.emit({ type: 'committed', offsets });
      },
      commitFailed: (offsets, error) => {
        this.counters.commitFailures++;
        this.emit({ type: 'commit_failed', offsets, error });
      },
    }, 5 * this.options.commitIntervalMs);
    this.deadLetters = new DeadLetterWriter(this.options, {
      logger: this.logger,
      producer: () => this.producer,
      crashed: () => this.lifecycle === 'crashed',
      stopDeadline: () => (this.lifecycle === 'stopping' ? this.stopDeadline : undefined),
      written: (worker, record, deadLetterTopic, info) => {
        this.counters.deadLettered++;
        this.emit({ type: 'dead_lettered', topic: worker.topic, partition: worker.partition, offset: record.offset, deadLetterTopic, reason: info.reason });
      },
      failed: () => {
        this.counters.deadLetterFailures++;
      },
    });
  }

  /** The options in force, defaults applied. */
  get settings(): ResolvedKafkaSourceOptions {
    return this.options;
  }

  /** True: each partition's records are claimed ahead of dispatch, `claimBatchSize` at a time. */
  readonly claimsAhead = true;

  /**
   * True: a chunk claimed into one shared transaction (PostgresClaimer `transactionBatch:
   * 'per-chunk'`) is adopted by the partition worker (its acks wait for the chunk's COMMIT).
   */
  readonly adoptsSharedTransactions = true;

  /**
   * Fits `claimBatchSize` to the consumer's claimer (called by the consumer at construction). A
   * claimer that opens one transaction per claim (PostgresClaimer `mode: 'transactional'` with
   * per-record transactions) gets no claim ahead: records of a partition run one after the other,
   * so each record claimed ahead would hold an open transaction, and a pool client, idle while the
   * records before it run, until PostgreSQL ends it at `idle_in_transaction_session_timeout`.
   * @throws ConfigurationError when `claimBatchSize` above 1 was set with such a claimer, naming both fixes
   */
  fitClaimer(claimer: Claimer): void {
    if (claimer.transactional !== true || claimer.sharesTransactions === true) return;
    if (this.claimBatchSizeGiven && this.options.claimBatchSize > 1) {
      throw new ConfigurationError(
        `claimBatchSize ${this.options.claimBatchSize} with a claimer that opens one transaction per record: every record claimed ahead would hold an open ` +
          'transaction idle while the records before it run (PostgreSQL ends it at idle_in_transaction_session_timeout). ' +
          "Leave claimBatchSize unset (or 1), or share one transaction per chunk with the claimer's transactionBatch: 'per-chunk'",
      );
    }
    this.options = { ...this.options, claimBatchSize: 1 };
  }

  /** A snapshot of the counters. */
  get stats(): Readonly<KafkaSourceStats> {
    return { ...this.counters };
  }

  /** The lifecycle state. */
  get state(): KafkaSourceState {
    return this.lifecycle;
  }

  /** Partitions this member owns in the current generation (empty before the first join). */
  get assignment(): readonly TopicPartition[] {
    return this.generation?.partitions ?? [];
  }

  /** Partitions paused at the client right now (for tests and diagnostics). */
  paused(): readonly TopicPartition[] {
    return (this.consumer?.paused() ?? []).flatMap(({ topic, partitions }) => partitions.map((partition) => ({ topic, partition })));
  }

  /** Adds a listener of adapter events; returns a function removing it. A throwing listener is logged and ignored. */
  on(listener: (event: KafkaSourceEvent) => void): () => void {
    return this.events.on(listener);
  }

  /**
   * Checks (or creates) the dead-letter topics (and, with `fromBeginning: false`, logs the
   * partitions whose records the group would skip: start-checks.ts), connects the dead-letter
   * producer and the consumer, subscribes, and starts the fetch loop. Resolves once the member joined the group.
   * Called by `ConsumerBase.start()`. The consumer's `leaseTtlMs` caps `preclaimMaxAgeMs` at a
   * third of it; with `heartbeatWhileProcessing` off, a handler timeout above `sessionTimeout`
   * (or none) is warned about.
   * @throws ConfigurationError when a source topic is missing (unless `deadLetterTopicCheck` is
   *   `none`; nothing is created then), when a dead-letter topic is missing and
   *   `deadLetterTopicCheck` is `exists`, or when called twice
   * @throws the client's error when the broker cannot be reached
   * @throws KafkaGroupProtocolError on @platformatic/kafka with the classic protocol when the broker
   *   refuses the join with INCONSISTENT_GROUP_PROTOCOL (a kafkajs member is in the group)
   * @throws ShutdownError when `close()` was called before it finished (everything it connected is disconnected)
   */
  async start(sink: DeliverySink, startOptions: SourceStartOptions): Promise<void> {
    if (this.lifecycle !== 'created') throw new ConfigurationError(`start() called on a Kafka source that is ${this.lifecycle}`);
    this.lifecycle = 'starting';
    // One bound on handlers: the consumer's. The source adds its own only when partitionConcurrency is lower.
    const concurrency = Math.max(1, Math.min(this.options.partitionConcurrency ?? startOptions.concurrency, startOptions.concurrency));
    const slots = concurrency < startOptions.concurrency ? new Semaphore(concurrency) : undefined;
    // When the consumer tells its lease length, a claim made ahead never waits more than a third of it.
    const lease = startOptions.leaseTtlMs;
    this.leaseTtlMs = typeof lease === 'number' && lease > 0 ? lease : undefined;
    const preclaimMaxAgeMs = typeof lease === 'number' && lease > 0 ? Math.max(1, Math.min(this.options.preclaimMaxAgeMs, Math.floor(lease / 3))) : this.options.preclaimMaxAgeMs;
    this.host = this.makeHost(sink, slots, preclaimMaxAgeMs);
    this.sink = sink;
    this.warnAboutSession(startOptions.handlerTimeoutMs);
    // close() may come while this runs (a stop during startup): after every step, stop there and
    // disconnect what was connected, so nothing joins the group after the source was closed.
    const stillStarting = (running = false) => {
      if (this.lifecycle !== (running ? 'running' : 'starting')) throw new ShutdownError('the Kafka source was closed while starting');
    };
    let producer: RecordProducer | undefined;
    let consumer: GroupConsumer | undefined;
    try {
      await runStartChecks(this.client, this.options, this.logger);
      stillStarting();
      producer = this.client.producer(this.options.producer);
      this.producer = producer;
      await producer.connect();
      stillStarting();
      consumer = this.client.consumer(this.options.consumer);
      this.consumer = consumer;
      const member = consumer;
      this.unsubscribe.push(
        member.onGroupJoin((event) => this.onGroupJoin(event)),
        member.onRebalancing(() => this.onRebalancing()),
        member.onCrash((error, restart) => this.onClientCrash(error, restart)),
      );
      this.logger.info(
        { groupId: this.options.groupId, topics: this.options.topics },
        `twophase/kafka: joining consumer group ${this.options.groupId} for ${this.options.topics.join(', ')} (waits for the group coordinator and for members that left without leaving the group to time out)`,
      );
      await consumer.connect();
      stillStarting();
      await consumer.subscribe({ topics: this.options.topics, fromBeginning: this.options.fromBeginning });
      stillStarting();
      this.lifecycle = 'running';
      await consumer.run((batch) => this.onBatch(batch));
      if (this.clientCrashed) throw new ConfigurationError('the Kafka consumer crashed while starting; see the logged error');
      stillStarting(true);
    } catch (error) {
      this.lifecycle = 'closed';
      await this.disconnectClients();
      // close() may have taken the fields first, while these were still connecting.
      await Promise.all([consumer?.disconnect().catch(() => undefined), producer?.disconnect().catch(() => undefined)]);
      throw asUnavailable(error) ?? error;
    }
    this.committer.startInterval(this.options.commitIntervalMs);
    if (this.options.heartbeatWhileProcessing) {
      this.heartbeatTimer = setInterval(() => this.heartbeatIfBusy(), this.options.heartbeatIntervalMs);
      this.heartbeatTimer.unref();
    }
  }

  /**
   * Graceful shutdown, step 1 (called by `ConsumerBase.stop()`): pauses every partition so
   * nothing more is fetched, and stops every worker after its in-flight dispatch and claim
   * commits; queued records
   * are dropped (their early claims released) and stay uncommitted. The group membership stays,
   * so the in-flight records' offsets can still be committed. Safe to repeat.
   */
  async stopIntake(): Promise<void> {
    if (this.lifecycle !== 'running' && this.lifecycle !== 'starting') return;
    this.lifecycle = 'stopping';
    this.stopDeadline = Date.now() + this.options.finalCommitTimeoutMs;
    if (this.consumer && this.generation) this.pauseAll(this.generation.partitions);
    for (const worker of this.workers.values()) worker.stop('stopping');
  }

  /**
   * Graceful shutdown, step 2 (after in-flight deliveries settled): commits the settled offsets
   * (retrying until `finalCommitTimeoutMs`), leaves the group and disconnects. Safe to repeat.
   */
  async close(): Promise<void> {
    if (this.lifecycle === 'closed' || this.lifecycle === 'crashed') return;
    if (this.lifecycle === 'running' || this.lifecycle === 'starting') await this.stopIntake();
    this.committer.stopInterval();
    await Promise.all([...this.workers.values()].map((w) => w.done));
    await this.committer.finalCommit(this.options.finalCommitTimeoutMs);
    this.lifecycle = 'closed';
    this.stopTimers();
    this.waitLog.flush();
    await this.disconnectClients();
  }

  /**
   * Simulates the death of this consumer's process, for tests and demos: nothing more is
   * dispatched or committed, queued records are dropped without releasing their early claims
   * (their leases end at the TTL, as after a real crash), later settles of in-flight records are
   * ignored (no offset, no dead letter), and the client disconnects at once. Records not
   * committed are delivered again to the partition's next owner.
   *
   * kafkajs sends LeaveGroup on disconnect, so the group rebalances at once; a process that
   * really dies is evicted only after `sessionTimeout` (test/integration/kafka kills a child
   * process with SIGKILL for that). Safe to repeat.
   */
  async crash(): Promise<void> {
    if (this.lifecycle === 'crashed' || this.lifecycle === 'closed') return;
    this.lifecycle = 'crashed';
    this.stopTimers();
    for (const worker of this.workers.values()) worker.stop('crashed');
    this.generation = undefined;
    await this.disconnectClients();
  }

  /** True while subscribed, a group member, and not stopping (readiness). */
  isConsuming(): boolean {
    return this.lifecycle === 'running' && this.generation !== undefined && !this.clientCrashed;
  }

  // ---------------------------------------------------------------------------------------

  private makeHost(sink: DeliverySink, slots: Semaphore | undefined, preclaimMaxAgeMs: number): WorkerHost {
    const o = this.options;
    return {
      sink,
      slots,
      logger: this.logger,
      groupId: o.groupId,
      claimBatchSize: o.claimBatchSize,
      preclaimMaxAgeMs,
      maxBufferedBytes: o.maxBufferedBytesPerPartition,
      unavailableBackoff: o.unavailableBackoff,
      setPaused: (worker, paused) => this.setPaused(worker, paused),
      deadLetter: (worker, record, info) => this.deadLetters.write(worker, record, info),
      dispatchStarted: () => {
        this.inFlight++;
      },
      dispatchEnded: () => {
        this.inFlight--;
      },
      waitingForLease: (worker, record, delayMs) => this.logLeaseWait(worker, record, delayMs),
      failed: (worker, error) => this.onWorkerFailed(worker, error),
      count: (counter) => {
        this.counters[counter]++;
      },
    };
  }

  private onBatch(batch: FetchedBatch): Promise<void> {
    if (this.lifecycle !== 'running' || !batch.isRunning() || batch.isStale()) return Promise.resolve();
    const generation = this.generation;
    const key = tp(batch.topic, batch.partition);
    if (!generation || !generation.owned.has(key) || batch.messages.length === 0) return Promise.resolve();
    generation.controls = batch;
    let worker = this.workers.get(key);
    if (worker?.stopped) {
      // Only a worker that failed on a bug stops while its generation runs. Never move the fetch
      // position past records nobody will process: pause the partition; it stays uncommitted
      // and the next generation (or the partition's next owner) starts it again.
      this.consumer?.pause([{ topic: batch.topic, partition: batch.partition }]);
      return Promise.resolve();
    }
    if (!worker) {
      worker = new PartitionWorker(this.host!, batch.topic, batch.partition, generation.epoch, this.tails.get(key));
      this.workers.set(key, worker);
      this.tails.set(key, worker);
    }
    this.counters.batches++;
    this.counters.records += worker.enqueue(batch.messages);
    batch.resolveOffset(batch.messages[batch.messages.length - 1]!.offset);
    return Promise.resolve();
  }

  private onGroupJoin(event: GroupAssignment): void {
    const partitions: TopicPartition[] = [];
    for (const topic of this.options.topics) for (const partition of event.assignment[topic] ?? []) partitions.push({ topic, partition });
    const epoch = ++this.epochCounter;
    // Every worker of the previous generation stops, also for partitions that stay ours: the
    // client fetches them again from the committed offset, and their new workers start after
    // the old ones' in-flight dispatch ended.
    for (const worker of this.workers.values()) worker.stop('revoked');
    this.workers.clear();
    this.generation = { epoch, memberId: event.memberId, owned: new Set(partitions.map((p) => tp(p.topic, p.partition))), partitions, controls: undefined };
    this.counters.groupJoins++;
    if (this.lifecycle === 'running') {
      // kafkajs keeps pause state across generations: start every assigned partition unpaused.
      this.consumer?.resume(partitions);
    } else if (this.lifecycle === 'stopping') {
      this.pauseAll(partitions);
    }
    this.logger.info(
      { groupId: this.options.groupId, generation: epoch, partitions: partitions.length, memberId: event.memberId, assignment: event.assignment },
      `twophase/kafka: joined consumer group ${this.options.groupId}: ${partitions.length} partition${partitions.length === 1 ? '' : 's'} assigned (generation ${epoch} of this source)`,
    );
    this.emit({ type: 'group_join', epoch, memberId: event.memberId, assignment: event.assignment });
  }

  /**
   * One line (rate-limited: {@link LogLimiter}) when a record waits for a lease held by an earlier
   * owner, so a restart after a crash says what it waits for instead of nothing.
   */
  private logLeaseWait(worker: PartitionWorker, record: KafkaRecord, delayMs: number): void {
    if (!this.waitLog.admit('waiting_for_lease')) return;
    const lease = this.leaseTtlMs;
    this.logger.info(
      {
        groupId: this.options.groupId,
        reason: 'waiting_for_lease',
        topic: worker.topic,
        partition: worker.partition,
        offset: record.offset,
        recordKey: record.key === null ? undefined : record.key.toString('utf8'),
        retryInMs: delayMs,
        leaseTtlMs: lease,
      },
      `twophase/kafka: key busy under a lease held by an earlier owner (another member, or a process that stopped without releasing it); ` +
        `the partition waits until that owner commits or its lease expires (${lease === undefined ? 'up to the lease TTL' : `at most ${lease} ms`}), checking every ${delayMs} ms`,
    );
  }

  private onRebalancing(): void {
    this.emit({ type: 'rebalancing' });
    // The coordinator still accepts commits of the current generation while it prepares the
    // rebalance (Kafka's Java consumer commits in onPartitionsRevoked at this point): commit what
    // settled, so the partitions' next owners re-check fewer records.
    void this.committer.flush();
  }

  /**
   * A partition worker stopped on a bug (in the adapter, or a sink that broke its contract). Its
   * partition stays paused with its records uncommitted, and nothing in a stable group would
   * start it again: the consumer is reported not live, so a deployment's liveness probe restarts
   * it and the partition's records are delivered again from the committed offset.
   */
  private onWorkerFailed(worker: PartitionWorker, error: Error): void {
    if (this.workers.get(tp(worker.topic, worker.partition)) !== worker || this.lifecycle !== 'running') {
      this.logger.error({ err: error, topic: worker.topic, partition: worker.partition }, 'twophase/kafka: a partition worker failed; its records stay uncommitted');
      return;
    }
    this.consumer?.pause([{ topic: worker.topic, partition: worker.partition }]);
    this.logger.error(
      { err: error, groupId: this.options.groupId, topic: worker.topic, partition: worker.partition },
      `twophase/kafka: the worker of ${worker.topic} partition ${worker.partition} failed; the partition stays paused and its records uncommitted until the group rebalances or this consumer restarts (it now reports not live)`,
    );
    this.sink?.fail?.(error);
  }

  private onClientCrash(error: Error, restart: boolean): void {
    this.logger.error({ err: error, groupId: this.options.groupId, restart }, 'twophase/kafka: the Kafka consumer crashed');
    this.emit({ type: 'crash', error, restart });
    for (const worker of this.workers.values()) worker.stop('revoked');
    this.workers.clear();
    this.generation = undefined;
    if (!restart) {
      // kafkajs gave up (a non-retriable error, or restartOnFailure said no): this source will
      // not consume again. Tell the consumer, so it reports not live and gets restarted.
      this.clientCrashed = true;
      this.sink?.fail?.(error);
    }
  }

  /**
   * S09 config check: with adapter heartbeats off, a handler that blocks the event loop longer
   * than sessionTimeout gets the member evicted.
   */
  private warnAboutSession(handlerTimeoutMs: number | undefined): void {
    if (this.options.heartbeatWhileProcessing) return;
    const sessionTimeout = this.options.consumer.sessionTimeout ?? KAFKAJS_CONSUMER_DEFAULTS.sessionTimeout;
    if (handlerTimeoutMs !== undefined && handlerTimeoutMs <= sessionTimeout) return;
    this.logger.warn(
      { groupId: this.options.groupId, sessionTimeout, handlerTimeoutMs: handlerTimeoutMs ?? null },
      `heartbeatWhileProcessing is off and the handler timeout (${handlerTimeoutMs ?? 'none'}) exceeds sessionTimeout (${sessionTimeout} ms): ` +
        'a handler that blocks the event loop that long gets this member evicted (its record is then delivered again and skipped as a duplicate)',
    );
  }

  private setPaused(worker: PartitionWorker, paused: boolean): void {
    if (this.workers.get(tp(worker.topic, worker.partition)) !== worker || !this.consumer) return;
    if (this.lifecycle !== 'running') return;
    const target = [{ topic: worker.topic, partition: worker.partition }];
    if (paused) {
      this.consumer.pause(target);
      this.counters.pauses++;
    } else {
      this.consumer.resume(target);
      this.counters.resumes++;
    }
    this.emit({ type: paused ? 'paused' : 'resumed', topic: worker.topic, partition: worker.partition });
  }

  private pauseAll(partitions: readonly TopicPartition[]): void {
    if (partitions.length === 0 || !this.consumer) return;
    this.consumer.pause(partitions);
    this.counters.pauses++;
  }

  private heartbeatIfBusy(): void {
    if (this.inFlight === 0 || this.lifecycle === 'crashed' || this.lifecycle === 'closed') return;
    const controls = this.generation?.controls;
    if (!controls) return;
    controls.heartbeat().catch((error: unknown) => {
      // The fetch loop sees the same error on its next heartbeat and rejoins.
      this.logger.debug({ err: error, groupId: this.options.groupId }, 'twophase/kafka: heartbeat during processing failed');
    });
  }

  private stopTimers(): void {
    this.committer.stopInterval();
    clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
  }

  private async disconnectClients(): Promise<void> {
    for (const off of this.unsubscribe.splice(0)) off();
    const consumer = this.consumer;
    const producer = this.producer;
    this.consumer = undefined;
    this.producer = undefined;
    await Promise.all([
      consumer?.disconnect().catch((error: unknown) => this.logger.warn({ err: error }, 'twophase/kafka: consumer disconnect failed')),
      producer?.disconnect().catch((error: unknown) => this.logger.warn({ err: error }, 'twophase/kafka: producer disconnect failed')),
    ]);
  }

  private emit(event: KafkaSourceEvent): void {
    this.events.emit(event);
  }
}
