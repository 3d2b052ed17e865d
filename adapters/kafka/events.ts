/**
 * Events and counters of a {@link KafkaSource}. Consumer outcomes (acquired, committed, …) go
 * through the core observer; these are the broker-side facts underneath.
 */
import type { TopicPartitionOffset } from './client';

/** Counters since construction; read through {@link KafkaSource.stats}. */
export interface KafkaSourceStats {
  /** Batches queued from the fetch loop. */
  batches: number;
  /** Records queued (a record fetched again before it settled is queued once). */
  records: number;
  /** Records settled: acked or dead-lettered. */
  settled: number;
  /** Claims made ahead of dispatch, and those released unused (stale, or dropped at a stop or rebalance). */
  preclaimed: number;
  preclaimReleased: number;
  /** Requeues handled in place (pause, wait, dispatch again). */
  requeuedInPlace: number;
  /** Second settles of one dispatch that were ignored (only the first one counts). */
  repeatedSettlesIgnored: number;
  /**
   * Chunks whose shared transaction rolled back (a transactional claimer with per-chunk
   * transactions, e.g. PostgresClaimer `transactionBatch: 'per-chunk'`); their unacknowledged
   * records ran again one by one.
   */
  chunkRollbacks: number;
  /** Successful offset commits, and failed ones (rebalance, unknown member, broker errors). */
  commits: number;
  commitFailures: number;
  /** Group joins (the first one included). */
  groupJoins: number;
  /** Dead letters written, and failed writes (each retried until the record's partition is revoked). */
  deadLettered: number;
  deadLetterFailures: number;
  /** Pause and resume requests sent to the client. */
  pauses: number;
  resumes: number;
}

/** Adapter events, for tests and operational logging. */
export type KafkaSourceEvent =
  | { readonly type: 'group_join'; readonly epoch: number; readonly memberId: string; readonly assignment: Readonly<Record<string, readonly number[]>> }
  | { readonly type: 'rebalancing' }
  | { readonly type: 'committed'; readonly offsets: readonly TopicPartitionOffset[] }
  | { readonly type: 'commit_failed'; readonly offsets: readonly TopicPartitionOffset[]; readonly error: unknown }
  | { readonly type: 'paused' | 'resumed'; readonly topic: string; readonly partition: number }
  | { readonly type: 'dead_lettered'; readonly topic: string; readonly partition: number; readonly offset: string; readonly deadLetterTopic: string; readonly reason: string }
  | { readonly type: 'crash'; readonly error: Error; readonly restart: boolean };
