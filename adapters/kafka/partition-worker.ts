/**
 * One partition of one group generation, processed strictly in offset order.
 *
 * Records fetched for the partition are queued here; the worker claims a chunk of them in one
 * claimer round trip (`sink.claimBatch`), then dispatches them one at a time. A record is
 * settled when the pipeline acked it (claim committed, or a done duplicate) or dead-lettered it
 * (written to the dead-letter topic); only then does the partition's committable offset move
 * past it, so the committable offset is always the end of the contiguous settled prefix.
 *
 * A requeue (busy key, retryable failure, claim store unavailable, lease lost) is handled in
 * place: the partition's fetching is paused, the worker waits the delay, and dispatches the same
 * record again. Nothing after it is dispatched meanwhile, so order holds.
 *
 * Commits are pipelined, through the sink's explicit contract (`sink.submit`): once a record's
 * `handled` moment came (its handler acked and its claim commit was issued), the next record is
 * dispatched while that commit is in flight, and the record settles when `settled` resolves. So a
 * partition does not wait one claim-store round trip per record. Handlers still run one at a time
 * in offset order; only the commit confirmations overlap (at most MAX_PIPELINED per partition),
 * and they may end out of order, which is why settling tracks the contiguous prefix.
 *
 * Chunks sharing one transaction (a transactional claimer whose `claimMany` gives receipts a
 * `sharedTransaction`, e.g. PostgresClaimer `transactionBatch: 'per-chunk'`): the worker adopts
 * the chunk's transaction, so a member's commit resolves once recorded, its handler slot frees and
 * its `handled` moment comes; the member's ack then waits for the chunk's COMMIT
 * (RecordSettler.ack) while the worker runs the next member — the COMMIT needs every member, so waiting for each member's
 * ack in turn would deadlock. No record after the chunk is dispatched before the chunk ended
 * (endChunk). When it rolled back (a member failed, was rejected or dropped, or COMMIT failed),
 * its members not settled yet run again from the first, one by one, each claimed on its own
 * (its own transaction), so a poison record cannot block the chunk forever.
 */
import { performance } from 'node:perf_hooks';
import {
  type BackoffPolicy,
  type Delivery,
  type DeliveryResult,
  type Logger,
  type RejectInfo,
  type RequeueCause,
  type RequeueInfo,
  type Settler,
  type SharedTransaction,
} from '../../src';
import {
  backoffDelay,
  type DeliverySink,
  type PreparedClaim,
  sleep,
  type Semaphore,
  type Submission,
} from '../../src/adapter-kit';
import type { KafkaRecord } from './client';
import { ChunkRolledBackError } from './errors';
import { messageIdOf } from './headers';

/** Why a worker stopped. `revoked`: a new group generation began (the partition may or may not stay ours). */
export type StopReason = 'revoked' | 'stopping' | 'crashed';

/** What a worker needs from its source. */
export interface WorkerHost {
  readonly sink: DeliverySink;
  readonly slots: Semaphore;
  readonly logger: Logger;
  readonly groupId: string;
  readonly claimBatchSize: number;
  readonly preclaimMaxAgeMs: number;
  readonly maxBufferedBytes: number;
  readonly unavailableBackoff: Readonly<Pick<BackoffPolicy, 'maxDelayMs' | 'jitter'>>;
  /** Pauses (true) or resumes (false) fetching of the worker's partition, if the worker is still current. */
  setPaused(worker: PartitionWorker, paused: boolean): void;
  /** Writes the dead letter; resolves once the broker acknowledged it. */
  deadLetter(worker: PartitionWorker, record: KafkaRecord, info: RejectInfo): Promise<void>;
  /** Called around each dispatch (for heartbeats while work is in flight). */
  dispatchStarted(): void;
  dispatchEnded(): void;
  /** Counters. */
  count(counter: 'preclaimed' | 'preclaimReleased' | 'settled' | 'requeuedInPlace' | 'repeatedSettlesIgnored' | 'chunkRollbacks'): void;
}

/** How the pipeline settled one dispatch, recorded by the delivery's settler. */
type Settlement =
  | { readonly kind: 'ack' }
  | { readonly kind: 'reject' }
  | { readonly kind: 'requeue'; readonly delayMs: number; readonly cause: RequeueCause };

/**
 * The settler of one dispatch of one record: records how the pipeline settled it (a dead letter
 * is written first). When the worker moves on is told by the submission, not by this settler.
 */
class RecordSettler implements Settler {
  settlement: Settlement | undefined;
  /** Set when the record's claim shares its chunk's transaction: the ack waits for its COMMIT. */
  shared: SharedTransaction | undefined;
  /** True once a settle was called: a repeat is ignored (it would write a second dead letter). */
  private called = false;

  constructor(
    private readonly worker: PartitionWorker,
    private readonly host: WorkerHost,
    private readonly record: KafkaRecord,
  ) {}

  ack(): Promise<void> {
    if (this.repeated()) return RESOLVED;
    const shared = this.shared;
    if (!shared) {
      this.settlement = ACK;
      return RESOLVED;
    }
    // The effect is durable only with the chunk's COMMIT, which waits for the later members (the
    // worker runs them already: this member's `handled` moment came with its recorded commit):
    // count the ack made only once the chunk committed.
    return shared.outcome.then((committed) => {
      if (!committed) throw new ChunkRolledBackError(this.worker.topic, this.worker.partition, this.record.offset);
      this.settlement = ACK;
    });
  }

  requeue(delayMs: number, info: RequeueInfo): Promise<void> {
    if (this.repeated()) return RESOLVED;
    this.settlement = { kind: 'requeue', delayMs, cause: info.cause };
    return RESOLVED;
  }

  async reject(info: RejectInfo): Promise<void> {
    if (this.repeated()) return;
    await this.host.deadLetter(this.worker, this.record, info);
    this.settlement = REJECT;
  }

  private repeated(): boolean {
    if (!this.called) {
      this.called = true;
      return false;
    }
    this.host.count('repeatedSettlesIgnored');
    return true;
  }
}

interface Prepared {
  readonly claim: PreparedClaim;
  readonly delivery: Delivery;
  readonly settler: RecordSettler;
  /** performance.now() when the claim was made. */
  readonly at: number;
}

interface QueuedRecord {
  readonly record: KafkaRecord;
  readonly bytes: number;
  prepared?: Prepared;
  /** True once acked or dead-lettered (possibly before an earlier record's commit ended). */
  settled?: boolean;
  /** The shared transaction of the chunk whose member this record's claim is, until the chunk ended. */
  chunk?: SharedTransaction;
  /** Dispatched without a claim made ahead: a member of a chunk that rolled back runs on its own. */
  single?: boolean;
}

/** `sink.submit`, or for a sink with only `dispatch`, a submission whose `handled` comes with `settled`. */
function submit(sink: DeliverySink, delivery: Delivery, preclaimed: PreparedClaim | undefined): Submission {
  if (sink.submit) return sink.submit(delivery, preclaimed);
  const settled = sink.dispatch(delivery, preclaimed);
  return { handled: settled.then(NOT_EARLY, NOT_EARLY), settled };
}

const NOT_EARLY = (): boolean => false;

/** True when decimal offset `a` is above `b` (Kafka offsets: non-negative, no leading zeros). */
export function offsetAbove(a: string, b: string): boolean {
  return a.length !== b.length ? a.length > b.length : a > b;
}

/** Wait before dispatching again a record whose settle failed while its partition stayed ours, ms. */
const UNSETTLED_RETRY_MS = 1000;

/** Records per partition whose commit is in flight while later records run. */
const MAX_PIPELINED = 256;

const RESOLVED: Promise<void> = Promise.resolve();
const ACK: Settlement = { kind: 'ack' };
const REJECT: Settlement = { kind: 'reject' };
const EMPTY_BODY = Buffer.alloc(0);
const NO_HEADERS: Readonly<Record<string, unknown>> = Object.freeze({});

/**
 * Where the claims of one preclaim stop being used: at the first claim whose key repeats a key
 * acquired earlier in the batch into a shared transaction (`sharedTransaction`). That repeat is a
 * duplicate only once the chunk COMMITs, and the COMMIT needs every member first, so the records
 * from there on are left unclaimed and claimed again after the chunk ended. `claims.length` when
 * there is no such repeat.
 */
export function sharedChunkEnd(claims: readonly PreparedClaim[]): number {
  const shared = new Set<string>();
  for (let i = 0; i < claims.length; i++) {
    const claim = claims[i]!;
    if (claim.kind !== 'claimed') continue;
    if (claim.result.state !== 'acquired') {
      if (shared.has(claim.key)) return i;
    } else if (claim.result.receipt.sharedTransaction) shared.add(claim.key);
  }
  return claims.length;
}

/** Sequential pipeline of one partition in one group generation. */
export class PartitionWorker {
  /** Offset of the last record of the contiguous settled prefix; undefined before the first settle. */
  lastSettled: string | undefined;
  /** The last offset committed for this worker. */
  committed: string | undefined;
  /** Resolves when the worker stopped and its in-flight dispatch and claim commits (if any) ended. Never rejects. */
  readonly done: Promise<void>;

  private readonly queue: QueuedRecord[] = [];
  /** Index of the first record not settled yet. */
  private head = 0;
  /** Index of the next record to dispatch (records in [head, cursor) are settled or committing). */
  private cursor = 0;
  /** The record being dispatched now (not pipelined), if any. */
  private current: QueuedRecord | undefined;
  /** Dispatches that woke the worker early and have not ended yet. */
  private pipelined = 0;
  private pipelineWaiter: (() => void) | undefined;
  private bufferedBytes = 0;
  /** The highest offset queued; records at or below it are not queued again. */
  private lastQueued: string | undefined;
  private stopReason: StopReason | undefined;
  private readonly stopController = new AbortController();
  private readonly revokeController = new AbortController();
  private wake: (() => void) | undefined;
  private readonly pauseReasons = new Set<'buffer' | 'wait'>();
  /** EWMA of one dispatch's duration, ms; undefined until the first dispatch. */
  private dispatchMs: number | undefined;
  private lastChunk = 1;
  private unavailableStreak = 0;
  /** The shared transaction of the chunk being dispatched, until it ended (endChunk). */
  private chunk: SharedTransaction | undefined;
  /** Set when that chunk's transaction rolled back while no dispatch of it was running. */
  private chunkRolledBack = false;

  constructor(
    private readonly host: WorkerHost,
    readonly topic: string,
    readonly partition: number,
    readonly epoch: number,
    previous: Promise<void> | undefined,
  ) {
    this.done = this.run(previous);
  }

  /** True once stopped for any reason. */
  get stopped(): boolean {
    return this.stopReason !== undefined;
  }

  /** Why it stopped, if it did. */
  get reason(): StopReason | undefined {
    return this.stopReason;
  }

  /** Aborted when the partition is revoked or the source crashed (not at a graceful stop). */
  get revokedSignal(): AbortSignal {
    return this.revokeController.signal;
  }

  /** True while fetching of this partition should stay paused. */
  get wantsPause(): boolean {
    return this.pauseReasons.size > 0;
  }

  /**
   * Queues fetched records (those below the highest offset already queued are ignored, so a
   * re-fetch never queues a record twice). Returns how many were queued.
   */
  enqueue(records: readonly KafkaRecord[]): number {
    if (this.stopped) return 0;
    let queued = 0;
    for (const record of records) {
      if (this.lastQueued !== undefined && !offsetAbove(record.offset, this.lastQueued)) continue;
      this.lastQueued = record.offset;
      const bytes = (record.value?.length ?? 0) + (record.key?.length ?? 0);
      this.queue.push({ record, bytes });
      this.bufferedBytes += bytes;
      queued++;
    }
    if (queued > 0) {
      if (this.bufferedBytes >= this.host.maxBufferedBytes) this.setPauseReason('buffer', true);
      const wake = this.wake;
      this.wake = undefined;
      wake?.();
    }
    return queued;
  }

  /**
   * Stops the worker: no further dispatch, waits aborted, records not dispatched yet dropped
   * (their claims made ahead of dispatch are released, except after a crash, where leases end at
   * their TTL as after a real one). Dispatches in flight, and commits in flight, run to their end
   * and still settle their records. Safe to repeat.
   */
  stop(reason: StopReason): void {
    if (this.stopReason !== undefined) {
      if (reason === 'crashed' || (reason === 'revoked' && this.stopReason === 'stopping')) this.stopReason = reason;
      if (reason !== 'stopping') this.revokeController.abort();
      return;
    }
    this.stopReason = reason;
    this.stopController.abort();
    if (reason !== 'stopping') this.revokeController.abort();
    // Keep what was dispatched (its settle moves the committable offset); drop the rest.
    const keep = this.current === this.queue[this.cursor] && this.current !== undefined ? this.cursor + 1 : this.cursor;
    for (let i = keep; i < this.queue.length; i++) {
      const item = this.queue[i]!;
      this.bufferedBytes -= item.bytes;
      this.dropPrepared(item, reason !== 'crashed');
    }
    this.queue.length = keep;
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private async run(previous: Promise<void> | undefined): Promise<void> {
    // The same partition's worker of the previous generation may still be dispatching: wait, so
    // two dispatches of one partition never overlap and order holds across rebalances.
    if (previous) await previous;
    try {
      for (;;) {
        const item = await this.next();
        if (!item) break;
        await this.process(item);
      }
    } catch (error) {
      // A bug here must not leave the partition silently stuck: log it loudly. The records stay
      // unsettled (no offset moves past them) and come again after the next rebalance.
      this.host.logger.error({ err: error, topic: this.topic, partition: this.partition }, 'twophase/kafka: partition worker failed; its records stay uncommitted');
      this.stop('revoked');
    }
    // Done means every commit in flight ended too, so the final committable offset is known.
    while (this.pipelined > 0) await this.pipelineDrained();
  }

  private pipelineDrained(): Promise<void> {
    return new Promise((resolve) => {
      this.pipelineWaiter = resolve;
    });
  }

  private async next(): Promise<QueuedRecord | undefined> {
    for (;;) {
      if (this.stopped) return undefined;
      // A chunk rolled back after its last member was dispatched: run its records again first.
      if (this.chunk && this.chunkRolledBack) await this.endChunk(0);
      if (this.stopped) return undefined;
      if (this.cursor < this.queue.length) return this.queue[this.cursor];
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }

  private async process(item: QueuedRecord): Promise<void> {
    if (item.settled) {
      // dead-lettered or acked on an earlier pass (a chunk rolled back and the cursor moved back)
      this.cursor++;
      this.advanceHead();
      return;
    }
    // Nothing after a chunk runs before the chunk ended; a rolled-back chunk moves the cursor back.
    if (this.chunk && !item.prepared && (await this.endChunk(0))) return;
    let retries = 0;
    for (let dispatchNo = 0; ; dispatchNo++) {
      if (this.stopped) return;
      if (dispatchNo === 0 && !item.prepared && !item.single) await this.preclaim();
      if (this.stopped) return;
      const prepared = this.takePrepared(item);
      if (item.chunk !== undefined && !prepared) {
        // A chunk member whose claim grew too old was released: that rolled the chunk back.
        await this.endChunk(0);
        return;
      }
      const settler = prepared?.settler ?? new RecordSettler(this, this.host, item.record);
      const delivery = prepared?.delivery ?? this.toDelivery(item.record, settler, dispatchNo > 0, retries);
      if (!this.host.slots.tryAcquire()) await this.host.slots.acquire();
      if (this.stopped) {
        this.host.slots.release();
        if (prepared) this.releaseClaim(prepared.claim);
        return;
      }
      this.host.dispatchStarted();
      this.current = item;
      const startedAt = performance.now();
      let result: DeliveryResult | undefined;
      let pipelined = false;
      try {
        const submission = submit(this.host.sink, delivery, prepared?.claim);
        if (await submission.handled) {
          // Handled and committing: move on; the commit's end settles the record later.
          pipelined = true;
          this.pipelined++;
          submission.settled.then(
            () => this.pipelineEnded(item, settler, undefined),
            (error: unknown) => this.pipelineEnded(item, settler, error),
          );
        } else {
          result = await submission.settled;
        }
      } finally {
        this.current = undefined;
        this.host.slots.release();
        if (!pipelined) this.host.dispatchEnded();
      }
      this.observe(performance.now() - startedAt);
      if (pipelined) {
        this.cursor++;
        this.unavailableStreak = 0;
        // Members of an open chunk end only with its COMMIT, which needs the next members.
        if (this.pipelined >= MAX_PIPELINED && !this.chunk) await this.pipelineDrained();
        return;
      }
      if (result === undefined) return; // not reached: settled resolved (or rejected, thrown above)
      const settlement = settler.settlement;
      if (item.chunk !== undefined && item.chunk === this.chunk) {
        // A member that did not ack: it was released (failed, rejected, shut down) or its commit
        // failed, so the whole chunk rolled back. Keep a dead letter; run the rest again.
        if (settlement?.kind === 'reject') {
          this.cursor++;
          this.settled(item);
        }
        if (this.stopped || (settlement?.kind === 'requeue' && settlement.cause === 'shutdown')) return;
        await this.endChunk(settlement?.kind === 'requeue' ? settlement.delayMs : settlement === undefined ? UNSETTLED_RETRY_MS : 0);
        return;
      }
      if (settlement === undefined) {
        // The settle failed: a dead letter not written before the partition was revoked or the
        // shutdown deadline passed. The record stays unsettled (its offset is not committed).
        if (this.stopped) return;
        this.host.logger.warn({ topic: this.topic, partition: this.partition, offset: item.record.offset }, 'twophase/kafka: a record was not settled; dispatching it again in place');
        await this.waitInPlace(UNSETTLED_RETRY_MS);
        continue;
      }
      if (settlement.kind !== 'requeue') {
        this.unavailableStreak = 0;
        this.cursor++;
        this.settled(item);
        return;
      }
      if (settlement.cause === 'shutdown' || this.stopped) return;
      if (settlement.cause === 'busy' && this.pipelined > 0) {
        // Most likely held by this very worker: an earlier record with the same key whose commit
        // is still in flight. Wait for those commits, then claim again at once (it is done now).
        // An open chunk holding the key commits only after its later members ran: end it first
        // (rolled back, its records run again one by one from the first).
        if (this.chunk && (await this.endChunk(0))) return;
        while (this.pipelined > 0) await this.pipelineDrained();
        if (this.stopped) return;
        this.host.count('requeuedInPlace');
        continue;
      }
      if (settlement.cause === 'retry') retries++;
      let delayMs = settlement.delayMs;
      if (settlement.cause === 'claimer_unavailable') {
        this.unavailableStreak++;
        const { maxDelayMs, jitter } = this.host.unavailableBackoff;
        delayMs = backoffDelay({ initialDelayMs: delayMs, maxDelayMs: Math.max(maxDelayMs, delayMs), multiplier: 2, jitter }, this.unavailableStreak);
      } else {
        this.unavailableStreak = 0;
      }
      this.host.count('requeuedInPlace');
      await this.waitInPlace(delayMs);
    }
  }

  /** The end of a dispatch that woke the worker early (its commit ended). */
  private pipelineEnded(item: QueuedRecord, settler: RecordSettler, error: unknown): void {
    try {
      this.pipelined--;
      this.host.dispatchEnded();
      if (error === undefined && settler.settlement === ACK) {
        this.settled(item);
      } else if (item.chunk !== undefined) {
        // Its chunk's transaction rolled back: the record stays unsettled and runs again (endChunk).
      } else {
        // Not reachable through ConsumerBase (a handled delivery always ends in an ack). Later
        // records already ran, so this one cannot be dispatched again in order: leave it
        // unsettled (no offset moves past it) and stop; it comes again after the next rebalance.
        this.host.logger.error(
          { err: error, topic: this.topic, partition: this.partition, offset: item.record.offset },
          'twophase/kafka: a record signalled handled but was not acked; its partition stops here',
        );
        this.stop('revoked');
      }
    } catch (bug) {
      this.host.logger.error({ err: bug, topic: this.topic, partition: this.partition }, 'twophase/kafka: settling a pipelined record failed; the partition stops here');
      this.stop('revoked');
    } finally {
      const waiter = this.pipelineWaiter;
      this.pipelineWaiter = undefined;
      waiter?.();
    }
  }

  /** Pauses the partition's fetching and waits `delayMs` (cut short by a stop). */
  private async waitInPlace(delayMs: number): Promise<void> {
    if (delayMs <= 0) return;
    this.setPauseReason('wait', true);
    try {
      await sleep(delayMs, this.stopController.signal);
    } catch {
      // stopped while waiting: process() returns on its next check
    } finally {
      this.setPauseReason('wait', false);
    }
  }

  /** Claims, in one round trip, the queued records from the head on that have no claim yet. */
  private async preclaim(): Promise<void> {
    const size = this.chunkSize();
    const items: QueuedRecord[] = [];
    for (let i = this.cursor; i < this.queue.length && items.length < size; i++) {
      const item = this.queue[i]!;
      if (item.prepared || item.single) break;
      items.push(item);
    }
    if (items.length === 0) return;
    this.lastChunk = items.length;
    const settlers = items.map((item) => new RecordSettler(this, this.host, item.record));
    const deliveries = items.map((item, i) => this.toDelivery(item.record, settlers[i]!, false, 0));
    const claims = await this.host.sink.claimBatch(deliveries);
    const at = performance.now();
    const acquiredKeys = new Set<string>();
    // A chunk sharing one transaction ends before its first repeated key: the rest is claimed later.
    const end = sharedChunkEnd(claims);
    for (const claim of claims.slice(end)) this.releaseClaim(claim);
    items.slice(0, end).forEach((item, i) => {
      let claim = claims[i] ?? { kind: 'skipped' };
      if (claim.kind === 'claimed') {
        if (claim.result.state === 'acquired') acquiredKeys.add(claim.key);
        // A repeat of a key acquired earlier in this chunk answers busy (held by this very
        // worker): claim it again at dispatch. If the earlier record's commit is still in
        // flight then, the dispatch answers busy and process() waits for the pipeline, not for
        // the busy delay.
        else if (claim.result.state === 'busy' && acquiredKeys.has(claim.key)) claim = { kind: 'skipped' };
      }
      const shared = claim.kind === 'claimed' && claim.result.state === 'acquired' ? claim.result.receipt.sharedTransaction : undefined;
      if (shared) this.joinChunk(item, settlers[i]!, shared);
      item.prepared = { claim, delivery: deliveries[i]!, settler: settlers[i]!, at };
      this.host.count('preclaimed');
    });
    if (this.stopped) for (const item of items) this.dropPrepared(item, this.stopReason !== 'crashed');
  }

  /** Makes `item` a member of the chunk sharing `shared`, and adopts that transaction. */
  private joinChunk(item: QueuedRecord, settler: RecordSettler, shared: SharedTransaction): void {
    if (this.chunk !== shared) {
      this.chunk = shared;
      this.chunkRolledBack = false;
      shared.adopt();
      void shared.outcome.then((committed) => {
        if (committed || this.chunk !== shared) return;
        this.chunkRolledBack = true;
        const wake = this.wake;
        this.wake = undefined;
        wake?.();
      });
    }
    item.chunk = shared;
    settler.shared = shared;
  }

  /**
   * Ends the open chunk: releases the claims of members not dispatched yet (which rolls the chunk
   * back if it is still open), waits for its outcome and its members' acks. Committed: nothing
   * more. Rolled back: every member not settled yet is made to run again on its own, from the
   * first (the cursor moves back to it), after `delayMs`. Returns true when the caller must
   * return to the run loop (the cursor moved, or time passed).
   */
  private async endChunk(delayMs: number): Promise<boolean> {
    const chunk = this.chunk;
    if (!chunk) return false;
    for (let i = this.cursor; i < this.queue.length; i++) {
      const item = this.queue[i]!;
      if (item.chunk === chunk) this.dropPrepared(item, true);
    }
    const committed = await chunk.outcome;
    while (this.pipelined > 0) await this.pipelineDrained();
    if (this.chunk === chunk) {
      this.chunk = undefined;
      this.chunkRolledBack = false;
    }
    let first: number | undefined;
    for (let i = this.head; i < this.queue.length; i++) {
      const item = this.queue[i]!;
      if (item.chunk !== chunk) continue;
      item.chunk = undefined;
      if (committed || item.settled) continue;
      item.single = true;
      this.dropPrepared(item, true);
      first ??= i;
    }
    if (committed) return false;
    this.host.count('chunkRollbacks');
    this.host.logger.warn(
      { topic: this.topic, partition: this.partition, offset: first === undefined ? undefined : this.queue[first]!.record.offset },
      'twophase/kafka: the transaction a chunk of records shared rolled back; its unacknowledged records run again one by one',
    );
    const moved = first !== undefined && first < this.cursor;
    if (moved) this.cursor = first!;
    await this.waitInPlace(delayMs);
    return true;
  }

  /**
   * How many records to claim ahead: as many as are expected to start within half of
   * `preclaimMaxAgeMs` at the measured dispatch time, growing at most twofold per chunk, and
   * one until a dispatch was measured.
   */
  private chunkSize(): number {
    if (this.dispatchMs === undefined) return 1;
    const fit = Math.floor(this.host.preclaimMaxAgeMs / 2 / Math.max(this.dispatchMs, 0.001));
    return Math.max(1, Math.min(this.host.claimBatchSize, fit, this.lastChunk * 2));
  }

  private observe(durationMs: number): void {
    this.dispatchMs = this.dispatchMs === undefined ? durationMs : this.dispatchMs * 0.8 + durationMs * 0.2;
  }

  /** The record's claim made ahead, if still young enough; an old one is released. */
  private takePrepared(item: QueuedRecord): Prepared | undefined {
    const prepared = item.prepared;
    item.prepared = undefined;
    if (!prepared) return undefined;
    if (performance.now() - prepared.at > this.host.preclaimMaxAgeMs) {
      this.releaseClaim(prepared.claim);
      return undefined;
    }
    return prepared;
  }

  private dropPrepared(item: QueuedRecord, release: boolean): void {
    const prepared = item.prepared;
    item.prepared = undefined;
    if (prepared && release) this.releaseClaim(prepared.claim);
  }

  private releaseClaim(claim: PreparedClaim): void {
    if (claim.kind !== 'claimed' || claim.result.state !== 'acquired') return;
    this.host.count('preclaimReleased');
    claim.result.receipt.release().catch((error: unknown) => {
      this.host.logger.debug({ err: error, key: claim.key }, 'twophase/kafka: releasing a claim made ahead of dispatch failed; it ends at its lease TTL');
    });
  }

  /** Offset to commit: one past the contiguous settled prefix; undefined before the first settle. */
  get committable(): string | undefined {
    return this.lastSettled === undefined ? undefined : (BigInt(this.lastSettled) + 1n).toString();
  }

  /** Marks `item` settled and moves the contiguous settled prefix as far as it now reaches. */
  private settled(item: QueuedRecord): void {
    item.settled = true;
    this.host.count('settled');
    this.advanceHead();
  }

  /** Moves the contiguous settled prefix as far as it reaches. */
  private advanceHead(): void {
    const queue = this.queue;
    while (this.head < this.cursor && queue[this.head]!.settled) {
      const first = queue[this.head++]!;
      this.lastSettled = first.record.offset;
      this.bufferedBytes -= first.bytes;
    }
    if (this.head >= 1024 && this.head * 2 >= queue.length) {
      queue.splice(0, this.head);
      this.cursor -= this.head;
      this.head = 0;
    }
    if (this.pauseReasons.has('buffer') && this.bufferedBytes < this.host.maxBufferedBytes / 2) this.setPauseReason('buffer', false);
  }

  private setPauseReason(reason: 'buffer' | 'wait', on: boolean): void {
    const before = this.pauseReasons.size > 0;
    if (on) this.pauseReasons.add(reason);
    else this.pauseReasons.delete(reason);
    const after = this.pauseReasons.size > 0;
    if (before !== after && !this.stopped) this.host.setPaused(this, after);
  }

  private toDelivery(record: KafkaRecord, settler: RecordSettler, redelivered: boolean, retries: number): Delivery {
    return {
      body: record.value ?? EMPTY_BODY,
      headers: (record.headers as Readonly<Record<string, unknown>> | undefined) ?? NO_HEADERS,
      messageId: messageIdOf(this.topic, this.partition, record.offset),
      metadata: {
        system: 'kafka',
        destination: this.topic,
        redelivered,
        priorAttempts: retries > 0 ? retries : undefined,
        consumerGroup: this.host.groupId,
        attributes: { partition: this.partition, offset: record.offset, key: record.key === null ? undefined : record.key.toString('utf8') },
      },
      settler,
    };
  }
}
