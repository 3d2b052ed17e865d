/**
 * The offset committer of a {@link KafkaSource}: commits, for each partition of the current
 * group generation, the end of its contiguous settled prefix (a {@link PartitionWorker}'s
 * `committable` offset), every `commitIntervalMs`, on demand (a rebalance starting) and once more
 * at shutdown.
 *
 * Ownership rule (the reason this is its own unit): Kafka's classic group protocol checks the
 * generation of an OffsetCommit but not which member owns the partition (kafkajs issue #1046). So
 * only workers of the current generation, for partitions in the current assignment, are
 * committed, the check and the commit call run in one synchronous step, and the commit is sent
 * once (the kafkajs binding never retries it with a newer generation; @platformatic/kafka does, see
 * below). One commit is in flight at a time; a flush asked for during one runs once more after it.
 *
 * A settled offset that did not move is committed again once `recommitAfterMs` passed since its
 * last commit. A former owner's commit can still land after the current owner's: @platformatic/kafka
 * sends a commit that met a rejoin error (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS) again, after
 * rejoining, under the newer generation, and the broker takes it. The group's offset then moves
 * back; without the repeat, an owner with nothing new to commit would leave it there for good (the
 * partition's lag never reaches zero; a restart would deliver the settled records again, as done
 * duplicates).
 */
import { performance } from 'node:perf_hooks';
import type { Logger } from '../../src';
import { retry } from '../../src/adapter-kit';
import type { FetchedBatch, TopicPartitionOffset } from './client';
import type { PartitionWorker } from './partition-worker';
import { offsetAbove } from './record-queue';

/** What the committer reads of the source's current group generation. */
export interface CommitGeneration {
  readonly epoch: number;
  /** `topic\0partition` of every partition assigned in this generation. */
  readonly owned: ReadonlySet<string>;
  /** The latest fetched batch of this generation: its `commit` goes to the group coordinator. */
  readonly controls: FetchedBatch | undefined;
}

/** What the committer needs from its source: a narrow interface, so the rule is testable alone. */
export interface CommitterHost {
  readonly logger: Logger;
  readonly groupId: string;
  /** False before start and once the source crashed or closed: nothing is committed then. */
  mayCommit(): boolean;
  /** The current generation, or undefined between generations. */
  generation(): CommitGeneration | undefined;
  /** The workers of the current generation, by `topic\0partition`. */
  workers(): ReadonlyMap<string, PartitionWorker>;
  /** A commit succeeded (for counters and events). */
  committed(offsets: readonly TopicPartitionOffset[]): void;
  /** A commit failed (rebalance, unknown member, broker error); already logged. */
  commitFailed(offsets: readonly TopicPartitionOffset[], error: unknown): void;
  /** Milliseconds of a monotonic clock (default `performance.now`). */
  now?(): number;
}

export class OffsetCommitter {
  private flushing: Promise<boolean> | undefined;
  private flushAgain: Promise<boolean> | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** When each worker's offset was last committed (host clock, ms). */
  private readonly committedAt = new WeakMap<PartitionWorker, number>();
  private readonly now: () => number;

  /**
   * @param recommitAfterMs an offset that did not move is committed again this long (ms) after
   *   its last commit (the source passes 5 × `commitIntervalMs`)
   */
  constructor(
    private readonly host: CommitterHost,
    private readonly recommitAfterMs = 5_000,
  ) {
    this.now = host.now ? () => host.now!() : () => performance.now();
  }

  /** Starts committing every `intervalMs` ms (an unref'd timer). Safe to repeat: one timer at most. */
  startInterval(intervalMs: number): void {
    this.stopInterval();
    this.timer = setInterval(() => void this.flush(), intervalMs);
    this.timer.unref();
  }

  /** Stops the periodic commits. Safe to repeat. */
  stopInterval(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Commits each current-generation partition's settled prefix, if it moved. Resolves true when
   * nothing was due or the commit succeeded, false when it failed (never rejects).
   */
  flush(): Promise<boolean> {
    if (this.flushing) {
      this.flushAgain ??= this.flushing.then(() => {
        this.flushAgain = undefined;
        return this.flush();
      });
      return this.flushAgain;
    }
    this.flushing = this.flushOnce().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  /** Flushes until a commit succeeds or `timeoutMs` ms passed, waiting 200 ms × retry between tries. */
  async finalCommit(timeoutMs: number): Promise<void> {
    const until = Date.now() + timeoutMs;
    // The last pause is cut to the deadline, so one flush still runs at it.
    await retry(() => this.flush(), {
      backoff: (n) => Math.min(200 * n, Math.max(0, until - Date.now())),
      deadlineMs: timeoutMs,
      startedAt: until - timeoutMs,
      retryIf: () => false,
      pending: (ok) => !ok,
    });
  }

  private async flushOnce(): Promise<boolean> {
    if (!this.host.mayCommit()) return true;
    const generation = this.host.generation();
    const controls = generation?.controls;
    if (!generation || !controls) return true;
    const due: Array<{ worker: PartitionWorker; offset: TopicPartitionOffset }> = [];
    const now = this.now();
    for (const [key, worker] of this.host.workers()) {
      const offset = worker.committable;
      if (offset === undefined) continue;
      if (offset === worker.committed && now - (this.committedAt.get(worker) ?? -Infinity) < this.recommitAfterMs) continue;
      // Ownership is checked here, in the same synchronous step as the commit call below.
      if (worker.epoch !== generation.epoch || !generation.owned.has(key)) continue;
      due.push({ worker, offset: { topic: worker.topic, partition: worker.partition, offset } });
    }
    if (due.length === 0) return true;
    const offsets = due.map((d) => d.offset);
    try {
      await controls.commit(offsets);
    } catch (error) {
      this.host.logger.warn({ err: error, groupId: this.host.groupId, offsets }, 'twophase/kafka: offset commit failed; settled records are skipped as duplicates when delivered again');
      this.host.commitFailed(offsets, error);
      return false;
    }
    for (const { worker, offset } of due) {
      if (worker.committed === undefined || offsetAbove(offset.offset, worker.committed)) worker.committed = offset.offset;
      this.committedAt.set(worker, now);
    }
    this.host.committed(offsets);
    return true;
  }
}
