/**
 * The broker side of settlement: what an adapter must supply for each delivery.
 */

/** Why a delivery is requeued. `busy` and `shutdown` never count as a failed attempt. */
export type RequeueCause = 'busy' | 'retry' | 'claimer_unavailable' | 'shutdown' | 'lease_lost';

/** Reason codes written to the dead-letter path. */
export type RejectReason =
  | 'missing_key'
  | 'invalid_key'
  | 'invalid_body'
  | 'key_conflict'
  | 'retry_exhausted'
  | 'handler_rejected'
  | 'permanent_error'
  | 'invalid_disposition'
  | (string & {});

export interface AckInfo {
  /** True when the key was already done and the handler did not run. */
  readonly duplicate: boolean;
}

export interface RequeueInfo {
  readonly cause: RequeueCause;
  /** Attempt number of the failed try (1-based), when the cause is `retry`. */
  readonly attempt?: number;
}

export interface RejectInfo {
  readonly reason: RejectReason;
  /** Attempts made, 0 when the handler never ran. */
  readonly attempts: number;
  /** The error's message, truncated to 1024 characters, when an error caused the reject. */
  readonly errorMessage?: string;
  /** The error class name, when an error caused the reject. */
  readonly errorType?: string;
}

/**
 * A settle a source left undone on purpose, so that the delivery runs again as the source
 * intends (on Kafka: a chunk's shared transaction rolled back, or the partition was revoked). A
 * settler rejects with an error that has `intendedRedelivery: true`; the pipeline logs it at
 * debug (the cause was logged where it happened) instead of warning that the broker failed, and
 * still reports `ack_failed` to observers.
 */
export interface IntendedRedelivery {
  readonly intendedRedelivery: true;
}

/** True when `error` is an {@link IntendedRedelivery}. */
export function isIntendedRedelivery(error: unknown): error is IntendedRedelivery {
  return typeof error === 'object' && error !== null && (error as { intendedRedelivery?: unknown }).intendedRedelivery === true;
}

/**
 * Settles one delivery on its broker. The consumer calls exactly one of these, exactly once.
 * A rejection of the returned promise is reported as `ack_failed` and never retried on another
 * channel or connection (a rejection that is an {@link IntendedRedelivery} is logged at debug).
 */
export interface Settler {
  /** Acknowledge: the message is done (processed now, or a duplicate). */
  ack(info: AckInfo): Promise<void>;
  /** Make the message come back after about `delayMs` ms without counting toward dead-letter limits. */
  requeue(delayMs: number, info: RequeueInfo): Promise<void>;
  /**
   * Optional. The delay, ms, a requeue of `delayMs` will actually wait, for a settler that can
   * only approximate it (RabbitMQ's delay tiers). The delivery's result and its log line carry
   * this delay. Pure; must not throw. Absent: the delay asked.
   */
  requeueDelay?(delayMs: number, info: RequeueInfo): number;
  /** Dead-letter the message with the reason. Never a silent drop. */
  reject(info: RejectInfo): Promise<void>;
  /**
   * Optional. Called at most once, when the handler returned `ack` and the claim's commit has
   * been started (issued to the claimer, or handed to an observer's `commit` step) but not yet
   * confirmed; `ack` follows once the commit ended (whatever its outcome: the effect is applied
   * either way). A source that keeps order may
   * start the next message of the same partition or queue now instead of waiting a commit round
   * trip. The pipeline never calls it for a requeue or a reject. Must not throw (a throw is
   * logged and ignored).
   * @deprecated Use `DeliverySink.submit`, whose `handled` promise reports the same moment
   *   without a hook on the settler (and also for a transactional receipt, once its commit
   *   succeeded). Still called by `dispatch` and `submit` in 0.x; to be removed before 1.0.
   */
  handled?(): void;
}
