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
 * (RecordSettler.ack) while the worker runs the next member — the COMMIT needs every member, so
 * waiting for each member's ack in turn would deadlock. No record after the chunk is dispatched
 * before the chunk ended (endChunk). When it rolled back (a member failed, was rejected or dropped, or COMMIT failed),
 * its members not settled yet run again from the first, one by one, each claimed on its own
 * (its own transaction), so a poison record cannot block the chunk forever.
 *
 * The jobs live one a file: record-queue.ts (the queue and its settled prefix), claim-ahead.ts,
 * shared-chunk.ts, pipelined-commits.ts, record-settler.ts (a record's settler and fate),
 * record-dispatch.ts (one dispatch, its fate through one channel), record-delivery.ts (record →
 * Delivery). What to do with a requeue is decided by the core's in-place rows
 * (settlement-table.ts `requeueInPlace`).
 */
import { performance } from 'node:perf_hooks';
import type { BackoffPolicy, Delivery, Logger, RejectInfo } from '../../src';
import { type DeliverySink, requeueInPlace, type Semaphore, sleep, UNSETTLED_RETRY_MS } from '../../src/adapter-kit';
import { ClaimAhead, type ClaimAheadRecords } from './claim-ahead';
import type { KafkaRecord } from './client';
import { PipelinedCommits } from './pipelined-commits';
import { type DispatchOutcome, dispatchRecord } from './record-dispatch';
import { recordDelivery } from './record-delivery';
import { type QueuedRecord, RecordQueue } from './record-queue';
import { type RecordFate, RecordSettler, type RecordSettlerHost } from './record-settler';
import { SharedChunk } from './shared-chunk';

/** Why a worker stopped. `revoked`: a new group generation began (the partition may or may not stay ours). */
export type StopReason = 'revoked' | 'stopping' | 'crashed';

/** What a worker needs from its source. */
export interface WorkerHost {
  readonly sink: DeliverySink;
  /**
   * Bounds dispatches across the source's partitions when `partitionConcurrency` is below the
   * consumer's concurrency; undefined otherwise (the consumer's own bound is the one bound).
   */
  readonly slots: Semaphore | undefined;
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
  /**
   * Called when a record waits in place because its key is busy under a lease this worker does
   * not hold (an earlier owner: another member, or a process that crashed and whose lease has
   * not expired), before waiting `delayMs`. Logs through a limiter; nothing else per record.
   */
  waitingForLease(worker: PartitionWorker, record: KafkaRecord, delayMs: number): void;
  /**
   * Called once when the worker stopped on a bug (its partition then stays paused and uncommitted
   * until this member rejoins the group): the source logs it and reports the consumer not live.
   */
  failed(worker: PartitionWorker, error: Error): void;
  /** Counters. */
  count(counter: 'preclaimed' | 'preclaimReleased' | 'settled' | 'requeuedInPlace' | 'repeatedSettlesIgnored' | 'chunkRollbacks'): void;
}

/** Sequential pipeline of one partition in one group generation. */
export class PartitionWorker {
  /** The last offset committed for this worker. */
  committed: string | undefined;
  /** Resolves when the worker stopped and its in-flight dispatch and claim commits (if any) ended. Never rejects. */
  readonly done: Promise<void>;

  private readonly queue = new RecordQueue();
  private readonly claims: ClaimAhead;
  private readonly chunk: SharedChunk;
  private readonly settlerHost: RecordSettlerHost;
  private readonly records: ClaimAheadRecords;
  /** The record being dispatched now (not pipelined), if any. */
  private current: QueuedRecord | undefined;
  /** Dispatches that woke the worker early and whose commit has not ended yet. */
  private readonly commits = new PipelinedCommits();
  private stopReason: StopReason | undefined;
  private readonly stopController = new AbortController();
  private readonly revokeController = new AbortController();
  private wake: (() => void) | undefined;
  private readonly pauseReasons = new Set<'buffer' | 'wait'>();
  private unavailableStreak = 0;

  /**
   * @param previous the same partition's worker of an earlier generation on this member, if any:
   *   this one dispatches nothing before it is done, then skips the records it settled
   */
  constructor(
    private readonly host: WorkerHost,
    readonly topic: string,
    readonly partition: number,
    readonly epoch: number,
    previous: PartitionWorker | undefined,
  ) {
    this.claims = new ClaimAhead(host);
    this.chunk = new SharedChunk(() => this.wakeUp());
    this.settlerHost = {
      topic,
      partition,
      deadLetter: (record, info) => host.deadLetter(this, record, info),
      repeatedSettle: () => host.count('repeatedSettlesIgnored'),
    };
    this.records = {
      settlerOf: (item) => new RecordSettler(this.settlerHost, item.record),
      deliveryOf: (item, settler) => this.toDelivery(item.record, settler, false, 0),
      joinChunk: (item, settler, shared) => this.chunk.join(item, settler, shared),
    };
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

  /** Offset of the last record of the contiguous settled prefix; undefined before the first settle. */
  get lastSettled(): string | undefined {
    return this.queue.lastSettled;
  }

  /** Offset to commit: one past the contiguous settled prefix; undefined before the first settle. */
  get committable(): string | undefined {
    return this.queue.committable;
  }

  /**
   * Queues fetched records (those below the highest offset already queued are ignored, so a
   * re-fetch never queues a record twice). Returns how many were queued.
   */
  enqueue(records: readonly KafkaRecord[]): number {
    if (this.stopped) return 0;
    const queued = this.queue.enqueue(records);
    if (queued > 0) {
      if (this.queue.bufferedBytes >= this.host.maxBufferedBytes) this.setPauseReason('buffer', true);
      this.wakeUp();
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
    const queue = this.queue;
    const keep = this.current === queue.items[queue.cursor] && this.current !== undefined ? queue.cursor + 1 : queue.cursor;
    queue.truncate(keep, (item) => this.claims.drop(item, reason !== 'crashed'));
    this.wakeUp();
  }

  private wakeUp(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private async run(previous: PartitionWorker | undefined): Promise<void> {
    // The same partition's worker of the previous generation may still be dispatching: wait, so
    // two dispatches of one partition never overlap and order holds across rebalances.
    if (previous) {
      await previous.done;
      // The client starts a kept (or returning) partition again at its committed offset, which may
      // be behind what the previous worker settled (records that settled after the last commit, or
      // that were in flight at the group join). This member settled them: acked after their claim
      // committed, or written to the dead-letter topic. Dispatching them again would only find a
      // done claim, or write a second dead letter; skip them, and commit past them.
      const settled = previous.committable;
      if (settled !== undefined) this.queue.settledBelow(settled);
    }
    try {
      for (;;) {
        // A queued record is taken at once; only an empty queue (or a chunk to end) waits.
        const item = this.ready() ?? (await this.next());
        if (!item) break;
        await this.process(item);
      }
    } catch (error) {
      // A bug here must not leave the partition silently stuck. The records stay unsettled (no
      // offset moves past them) and come again when the group rebalances or this member restarts.
      this.failOnBug(error instanceof Error ? error : new Error(String(error)), 'the partition worker failed');
    }
    // Done means every commit in flight ended too, so the final committable offset is known.
    await this.commits.drained();
  }

  /** The next queued record when one can run at once (no stop, no rolled-back chunk to end first). */
  private ready(): QueuedRecord | undefined {
    if (this.stopped || (this.chunk.current && this.chunk.rolledBack)) return undefined;
    return this.queue.next;
  }

  private async next(): Promise<QueuedRecord | undefined> {
    for (;;) {
      if (this.stopped) return undefined;
      // A chunk rolled back after its last member was dispatched: run its records again first.
      if (this.chunk.current && this.chunk.rolledBack) await this.endChunk(0);
      if (this.stopped) return undefined;
      const next = this.queue.next;
      if (next) return next;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }

  private async process(item: QueuedRecord): Promise<void> {
    const queue = this.queue;
    if (item.settled) {
      // dead-lettered or acked on an earlier pass (a chunk rolled back and the cursor moved back)
      queue.cursor++;
      this.advanceHead();
      return;
    }
    // Nothing after a chunk runs before the chunk ended; a rolled-back chunk moves the cursor back.
    if (this.chunk.current && !item.prepared && (await this.endChunk(0))) return;
    let retries = 0;
    for (let dispatchNo = 0; ; dispatchNo++) {
      if (this.stopped) return;
      if (dispatchNo === 0 && !item.prepared && !item.single) await this.preclaim();
      if (this.stopped) return;
      const prepared = this.claims.take(item);
      if (item.chunk !== undefined && !prepared) {
        // A chunk member whose claim grew too old was released: that rolled the chunk back.
        await this.endChunk(0);
        return;
      }
      const settler = prepared?.settler ?? new RecordSettler(this.settlerHost, item.record);
      const delivery = prepared?.delivery ?? this.toDelivery(item.record, settler, dispatchNo > 0, retries);
      const slots = this.host.slots;
      if (slots && !slots.tryAcquire()) {
        await slots.acquire();
        if (this.stopped) {
          slots.release();
          if (prepared) this.claims.release(prepared.claim);
          return;
        }
      }
      this.host.dispatchStarted();
      this.current = item;
      const startedAt = performance.now();
      let outcome: DispatchOutcome | undefined;
      try {
        outcome = await dispatchRecord(this.host.sink, delivery, prepared?.claim, settler);
      } finally {
        this.current = undefined;
        slots?.release();
        if (!outcome?.pipelined) this.host.dispatchEnded();
      }
      this.claims.observe(performance.now() - startedAt);
      if (outcome.pipelined) {
        // Handled and committing: move on; the commit's end settles the record later.
        this.commits.started();
        void outcome.fate.then((fate) => this.pipelineEnded(item, fate));
        queue.cursor++;
        this.unavailableStreak = 0;
        // Members of an open chunk end only with its COMMIT, which needs the next members.
        if (this.commits.full && !this.chunk.current) await this.commits.nextEnd();
        return;
      }
      const fate = outcome.fate;
      if (item.chunk !== undefined && item.chunk === this.chunk.current) {
        // A member that did not ack: it was released (failed, rejected, shut down) or its commit
        // failed, so the whole chunk rolled back. Keep a dead letter; run the rest again.
        if (fate.kind === 'reject') {
          queue.cursor++;
          this.settled(item);
        }
        if (this.stopped || (fate.kind === 'requeue' && fate.cause === 'shutdown')) return;
        await this.endChunk(fate.kind === 'requeue' ? fate.delayMs : fate.kind === 'unsettled' ? UNSETTLED_RETRY_MS : 0);
        return;
      }
      if (fate.kind === 'ack' || fate.kind === 'reject') {
        this.unavailableStreak = 0;
        queue.cursor++;
        this.settled(item);
        return;
      }
      // Requeued, or not settled (a dead letter not written before the partition was revoked or
      // the shutdown deadline passed): the record stays unsettled and runs again in place.
      if (this.stopped) return;
      const requeue = fate.kind === 'requeue' ? fate : undefined;
      const streak = requeue?.cause === 'claimer_unavailable' ? this.unavailableStreak + 1 : 0;
      const step = requeueInPlace(requeue, this.commits.inFlight > 0, streak, this.host.unavailableBackoff);
      if (step.kind === 'leave') return;
      if (step.kind === 'after_own_commits') {
        // Most likely held by this very worker: an earlier record with the same key whose commit
        // is still in flight. An open chunk holding the key commits only after its later members
        // ran: end it first (rolled back, its records run again one by one from the first).
        if (this.chunk.current && (await this.endChunk(0))) return;
        await this.commits.drained();
        if (this.stopped) return;
        this.host.count('requeuedInPlace');
        continue;
      }
      if (requeue === undefined) {
        this.host.logger.warn({ topic: this.topic, partition: this.partition, offset: item.record.offset }, 'twophase/kafka: a record was not settled; dispatching it again in place');
      } else {
        if (requeue.cause === 'retry') retries++;
        else if (requeue.cause === 'busy') this.host.waitingForLease(this, item.record, step.delayMs);
        this.unavailableStreak = streak;
        this.host.count('requeuedInPlace');
      }
      await this.waitInPlace(step.delayMs);
    }
  }

  /** The end of a dispatch that woke the worker early (its commit ended). */
  private pipelineEnded(item: QueuedRecord, fate: RecordFate): void {
    try {
      this.host.dispatchEnded();
      if (fate.kind === 'ack') {
        this.settled(item);
      } else if (item.chunk !== undefined) {
        // Its chunk's transaction rolled back: the record stays unsettled and runs again (endChunk).
      } else {
        // Not reachable through ConsumerBase (a handled delivery always ends in an ack). Later
        // records already ran, so this one cannot be dispatched again in order: leave it
        // unsettled (no offset moves past it) and stop; it comes again after the next rebalance.
        this.failOnBug(new Error(`offset ${item.record.offset} signalled handled but ended ${fate.kind}, not acked`), 'a record signalled handled but was not acked');
      }
    } catch (bug) {
      this.failOnBug(bug instanceof Error ? bug : new Error(String(bug)), 'settling a pipelined record failed');
    } finally {
      this.commits.ended();
    }
  }

  /** Stops the worker after a bug in the adapter or the sink, and tells the source (once). */
  private failOnBug(error: Error, what: string): void {
    const first = this.stopReason === undefined;
    this.stop('revoked');
    if (first) this.host.failed(this, new Error(`${what}: ${error.message}`, { cause: error }));
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

  /** Claims, in one round trip, the queued records from the cursor on that have no claim yet. */
  private async preclaim(): Promise<void> {
    const size = this.claims.chunkSize();
    const queued = this.queue.items;
    const items: QueuedRecord[] = [];
    for (let i = this.queue.cursor; i < queued.length && items.length < size; i++) {
      const item = queued[i]!;
      if (item.prepared || item.single) break;
      items.push(item);
    }
    await this.claims.claim(items, this.records);
    if (this.stopped) for (const item of items) this.claims.drop(item, this.stopReason !== 'crashed');
  }

  /**
   * Ends the open chunk: releases the claims of members not dispatched yet (which rolls the chunk
   * back if it is still open), waits for its outcome and its members' acks. Committed: nothing
   * more. Rolled back: every member not settled yet is made to run again on its own, from the
   * first (the cursor moves back to it), after `delayMs`. Returns true when the caller must
   * return to the run loop (the cursor moved, or time passed).
   */
  private async endChunk(delayMs: number): Promise<boolean> {
    const chunk = this.chunk.current;
    if (!chunk) return false;
    const queue = this.queue;
    for (let i = queue.cursor; i < queue.items.length; i++) {
      const item = queue.items[i]!;
      if (item.chunk === chunk) this.claims.drop(item, true);
    }
    const committed = await chunk.outcome;
    await this.commits.drained();
    this.chunk.ended(chunk);
    let first: number | undefined;
    for (let i = queue.head; i < queue.items.length; i++) {
      const item = queue.items[i]!;
      if (item.chunk !== chunk) continue;
      item.chunk = undefined;
      if (committed || item.settled) continue;
      item.single = true;
      this.claims.drop(item, true);
      first ??= i;
    }
    if (committed) return false;
    this.host.count('chunkRollbacks');
    this.host.logger.warn(
      { topic: this.topic, partition: this.partition, offset: first === undefined ? undefined : queue.items[first]!.record.offset },
      'twophase/kafka: the transaction a chunk of records shared rolled back; its unacknowledged records run again one by one',
    );
    if (first !== undefined && first < queue.cursor) queue.cursor = first;
    await this.waitInPlace(delayMs);
    return true;
  }

  /** Marks `item` settled and moves the contiguous settled prefix as far as it now reaches. */
  private settled(item: QueuedRecord): void {
    this.queue.settle(item);
    this.host.count('settled');
    this.resumeIfDrained();
  }

  private advanceHead(): void {
    this.queue.advanceHead();
    this.resumeIfDrained();
  }

  /** Resumes fetching paused for the buffer once half of it drained. */
  private resumeIfDrained(): void {
    if (this.pauseReasons.has('buffer') && this.queue.bufferedBytes < this.host.maxBufferedBytes / 2) this.setPauseReason('buffer', false);
  }

  private setPauseReason(reason: 'buffer' | 'wait', on: boolean): void {
    const before = this.pauseReasons.size > 0;
    if (on) this.pauseReasons.add(reason);
    else this.pauseReasons.delete(reason);
    const after = this.pauseReasons.size > 0;
    if (before !== after && !this.stopped) this.host.setPaused(this, after);
  }

  private toDelivery(record: KafkaRecord, settler: RecordSettler, redelivered: boolean, retries: number): Delivery {
    return recordDelivery(this.topic, this.partition, this.host.groupId, record, settler, redelivered, retries);
  }
}
