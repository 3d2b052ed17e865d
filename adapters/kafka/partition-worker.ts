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
 */
import { performance } from 'node:perf_hooks';
import {
  backoffDelay,
  type BackoffPolicy,
  type Delivery,
  type DeliveryResult,
  type DeliverySink,
  type Logger,
  type PreparedClaim,
  type RejectInfo,
  type RequeueCause,
  sleep,
  type Semaphore,
} from '../../src';
import type { KafkaRecord } from './client';
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
  count(counter: 'preclaimed' | 'preclaimReleased' | 'settled' | 'requeuedInPlace'): void;
}

/** How the pipeline settled one dispatch, recorded by the delivery's settler. */
type Settlement =
  | { readonly kind: 'ack' }
  | { readonly kind: 'reject' }
  | { readonly kind: 'requeue'; readonly delayMs: number; readonly cause: RequeueCause };

interface SettleHolder {
  settlement?: Settlement;
}

interface Prepared {
  readonly claim: PreparedClaim;
  readonly delivery: Delivery;
  readonly holder: SettleHolder;
  /** performance.now() when the claim was made. */
  readonly at: number;
}

interface QueuedRecord {
  readonly record: KafkaRecord;
  readonly bytes: number;
  prepared?: Prepared;
}

/** True when decimal offset `a` is above `b` (Kafka offsets: non-negative, no leading zeros). */
export function offsetAbove(a: string, b: string): boolean {
  return a.length !== b.length ? a.length > b.length : a > b;
}

/** Wait before dispatching again a record whose settle failed while its partition stayed ours, ms. */
const UNSETTLED_RETRY_MS = 1000;

const ACK: Settlement = { kind: 'ack' };
const REJECT: Settlement = { kind: 'reject' };
const EMPTY_BODY = Buffer.alloc(0);
const NO_HEADERS: Readonly<Record<string, unknown>> = Object.freeze({});

/** Sequential pipeline of one partition in one group generation. */
export class PartitionWorker {
  /** Offset of the last record of the contiguous settled prefix; undefined before the first settle. */
  lastSettled: string | undefined;
  /** The last offset committed for this worker. */
  committed: string | undefined;
  /** Resolves when the worker stopped and its in-flight dispatch (if any) ended. Never rejects. */
  readonly done: Promise<void>;

  private readonly queue: QueuedRecord[] = [];
  private head = 0;
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
   * Stops the worker: no further dispatch, waits aborted, queued records dropped (their claims
   * made ahead of dispatch are released, except after a crash, where leases end at their TTL as
   * after a real one). The dispatch in flight, if any, runs to its end. Safe to repeat.
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
    for (let i = this.head; i < this.queue.length; i++) this.dropPrepared(this.queue[i]!, reason !== 'crashed');
    this.queue.length = 0;
    this.head = 0;
    this.bufferedBytes = 0;
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
        if (!item) return;
        await this.process(item);
      }
    } catch (error) {
      // A bug here must not leave the partition silently stuck: log it loudly. The records stay
      // unsettled (no offset moves past them) and come again after the next rebalance.
      this.host.logger.error({ err: error, topic: this.topic, partition: this.partition }, 'twophase/kafka: partition worker failed; its records stay uncommitted');
      this.stop('revoked');
    }
  }

  private async next(): Promise<QueuedRecord | undefined> {
    for (;;) {
      if (this.stopped) return undefined;
      if (this.head < this.queue.length) return this.queue[this.head];
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }

  private async process(item: QueuedRecord): Promise<void> {
    let retries = 0;
    for (let dispatchNo = 0; ; dispatchNo++) {
      if (this.stopped) return;
      if (dispatchNo === 0 && !item.prepared) await this.preclaim();
      if (this.stopped) return;
      const prepared = this.takePrepared(item);
      const holder: SettleHolder = prepared?.holder ?? {};
      const delivery = prepared?.delivery ?? this.toDelivery(item.record, holder, dispatchNo > 0, retries);
      if (!this.host.slots.tryAcquire()) await this.host.slots.acquire();
      let result: DeliveryResult;
      this.host.dispatchStarted();
      try {
        if (this.stopped) {
          if (prepared) this.releaseClaim(prepared.claim);
          return;
        }
        result = await this.host.sink.dispatch(delivery, prepared?.claim);
      } finally {
        this.host.dispatchEnded();
        this.host.slots.release();
      }
      this.observe(result.durationMs);
      const settlement = holder.settlement;
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
        this.settled(item);
        return;
      }
      if (settlement.cause === 'shutdown' || this.stopped) return;
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
    for (let i = this.head; i < this.queue.length && items.length < size; i++) {
      const item = this.queue[i]!;
      if (item.prepared) break;
      items.push(item);
    }
    if (items.length === 0) return;
    this.lastChunk = items.length;
    const holders = items.map((): SettleHolder => ({}));
    const deliveries = items.map((item, i) => this.toDelivery(item.record, holders[i]!, false, 0));
    const claims = await this.host.sink.claimBatch(deliveries);
    const at = performance.now();
    const acquiredKeys = new Set<string>();
    items.forEach((item, i) => {
      let claim = claims[i] ?? { kind: 'skipped' };
      if (claim.kind === 'claimed') {
        if (claim.result.state === 'acquired') acquiredKeys.add(claim.key);
        // A repeat of a key acquired earlier in this chunk answers busy (held by this very
        // worker): claim it again at dispatch, when the earlier record is done.
        else if (claim.result.state === 'busy' && acquiredKeys.has(claim.key)) claim = { kind: 'skipped' };
      }
      item.prepared = { claim, delivery: deliveries[i]!, holder: holders[i]!, at };
      this.host.count('preclaimed');
    });
    if (this.stopped) for (const item of items) this.dropPrepared(item, this.stopReason !== 'crashed');
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

  private settled(item: QueuedRecord): void {
    this.lastSettled = item.record.offset;
    this.host.count('settled');
    if (this.stopped) return; // the queue was dropped; only the committable offset matters now
    this.head++;
    this.bufferedBytes -= item.bytes;
    if (this.head >= 1024 && this.head * 2 >= this.queue.length) {
      this.queue.splice(0, this.head);
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

  private toDelivery(record: KafkaRecord, holder: SettleHolder, redelivered: boolean, retries: number): Delivery {
    const host = this.host;
    return {
      body: record.value ?? EMPTY_BODY,
      headers: (record.headers as Readonly<Record<string, unknown>> | undefined) ?? NO_HEADERS,
      messageId: messageIdOf(this.topic, this.partition, record.offset),
      metadata: {
        system: 'kafka',
        destination: this.topic,
        redelivered,
        priorAttempts: retries > 0 ? retries : undefined,
        consumerGroup: host.groupId,
        attributes: { partition: this.partition, offset: record.offset, key: record.key === null ? undefined : record.key.toString('utf8') },
      },
      settler: {
        ack: async () => {
          holder.settlement = ACK;
        },
        requeue: async (delayMs, info) => {
          holder.settlement = { kind: 'requeue', delayMs, cause: info.cause };
        },
        reject: async (info) => {
          await host.deadLetter(this, record, info);
          holder.settlement = REJECT;
        },
      },
    };
  }
}
