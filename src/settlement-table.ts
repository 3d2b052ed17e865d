/**
 * The settlement table (README.md, "Settlement") as one pure function: given what happened to a
 * delivery, {@link decide} says what to do with its claim receipt and with the broker message,
 * and which outcome and events to report.
 *
 * No I/O, no timers, no claimer: the pipeline (delivery-pipeline.ts) gathers the facts, asks
 * here, and carries the answer out (apply-decision.ts). The guarded path (with a claim) and the
 * fail-open path (`failOpen`, no claim) ask the same function, so they cannot drift apart.
 */
import type { JsonValue } from './claimer';
import { InvalidDispositionError, InvalidMessageError } from './errors';
import type { AuxiliaryEvent, Outcome } from './observer';
import type { CommitOutcome } from './settlement';
import type { RequeueCause } from './settler';

/** The consumer options the table reads. */
export interface SettlementRules {
  /** Acquisitions of a key before a retryable failure is dead-lettered as `retry_exhausted`. */
  readonly maxAttempts: number;
  /** Requeue delay when another worker holds the lease, ms. */
  readonly busyRequeueDelayMs: number;
  /** Requeue delay after the claim store stayed unavailable, ms. */
  readonly unavailableRequeueDelayMs: number;
  /** Requeue delay after failed attempt `attempt` (1-based), ms: the consumer's `retryBackoff`. */
  retryDelayMs(attempt: number): number;
}

/** How the handler ended, as the pipeline saw it. */
export type HandlerEnd =
  /** Returned `ack(result?)`. */
  | { readonly kind: 'ack'; readonly result?: JsonValue }
  /** Returned `requeue({ delayMs? })`. */
  | { readonly kind: 'requeue'; readonly delayMs?: number }
  /** Returned `reject(reason)`. */
  | { readonly kind: 'reject'; readonly reason: string }
  /**
   * Threw (or returned something that is not a disposition: an InvalidDispositionError);
   * `permanent` is the consumer's `isPermanent(error)`.
   */
  | { readonly kind: 'threw'; readonly error: unknown; readonly permanent: boolean }
  /**
   * Its signal was aborted before it returned: at the shutdown deadline, at `handlerTimeoutMs`, or
   * because keep-alive found the lease taken over (`error` is the abort reason).
   */
  | { readonly kind: 'aborted'; readonly cause: 'shutdown' | 'timeout' | 'lease_lost'; readonly error: unknown };

/** What happened to a delivery: the input of {@link decide}. */
export type SettlementEvent =
  /** The consumer is stopping: the delivery arrived after `stop()` (`intake`) or during a claim backoff (`claim`). */
  | { readonly kind: 'stopping'; readonly during: 'intake' | 'claim'; readonly error?: unknown }
  /** The message cannot be processed: `invalid_body`, `missing_key` or `invalid_key` (no claim). */
  | { readonly kind: 'invalid'; readonly reason: string; readonly error: unknown }
  /** The key is known with another fingerprint. */
  | { readonly kind: 'key_conflict'; readonly error: unknown }
  /** The claim store stayed unavailable through the local retries. */
  | { readonly kind: 'claim_failed'; readonly error: unknown; readonly failOpen: boolean }
  /** The key is done: a duplicate. */
  | { readonly kind: 'done' }
  /** Another worker holds the lease. */
  | { readonly kind: 'busy' }
  /** The lease is ours, for acquisition number `attempt`. */
  | { readonly kind: 'acquired'; readonly attempt: number }
  /** The handler ended; `guarded` is false on the fail-open path (no claim). */
  | { readonly kind: 'handler_end'; readonly guarded: boolean; readonly attempt: number; readonly end: HandlerEnd }
  /** The commit after an ack ended; `transactional` when the receipt carries the effect's transaction. */
  | { readonly kind: 'commit_ended'; readonly attempt: number; readonly commit: CommitOutcome; readonly transactional: boolean }
  /** A bug in the pipeline or a subclass hook; `handled` once the handler acked and its commit started. */
  | { readonly kind: 'unexpected'; readonly error: unknown; readonly handled: boolean };

/** What to tell the broker. */
export type BrokerAction =
  | { readonly kind: 'ack'; readonly duplicate: boolean }
  /** `attempt` is set for `retry` after a handler attempt (it goes into RequeueInfo). */
  | { readonly kind: 'requeue'; readonly cause: RequeueCause; readonly delayMs: number; readonly attempt?: number }
  /** `attempts`: handler attempts made (0 when it never ran). */
  | { readonly kind: 'dead_letter'; readonly reason: string; readonly attempts: number };

/**
 * What to do with the claim receipt: nothing, release it, or release it with the attempt count
 * reset (after a dead-letter, and only when the dead-letter settle succeeded, so a DLQ replay
 * starts at attempt 1 while a refused dead-letter comes straight back to the dead-letter path).
 * A commit is its own decision ({@link Decision} `commit`).
 */
export type ReceiptAction = 'none' | 'release' | 'release_reset';

/** An event to report (each goes to the observers with the delivery's key, attempt and token). */
export type ReportedEvent = Outcome | AuxiliaryEvent;

/** The end of a delivery: receipt step, then broker step (dead-letter: broker first, then receipt). */
export interface Settlement {
  readonly kind: 'settle';
  readonly receipt: ReceiptAction;
  readonly broker: BrokerAction;
  /** The delivery's outcome, in its DeliveryResult. */
  readonly outcome: Outcome;
  /** Reported in order before the receipt and broker steps (`released` and `ack_failed` follow from those steps). */
  readonly events: readonly ReportedEvent[];
  /** True when the handler ran. */
  readonly handled: boolean;
  /** The error reported with the outcome (and with the events that carry one), if any. */
  readonly error: unknown;
}

/** Run the handler: with the claim (`guarded`) or without one (fail-open). `error` goes with the events. */
export interface HandleDecision {
  readonly kind: 'handle';
  readonly guarded: boolean;
  readonly events: readonly ReportedEvent[];
  readonly error: unknown;
}

/** Commit the receipt with the handler's result, then `decide` a `commit_ended`. */
export interface CommitDecision {
  readonly kind: 'commit';
  readonly result: JsonValue | undefined;
}

/** The decision: settle now, run the handler, or commit and ask again with the commit's outcome. */
export type Decision = Settlement | HandleDecision | CommitDecision;

/** Events whose decision is always to settle at once. */
type SettleNowKind = 'stopping' | 'invalid' | 'key_conflict' | 'done' | 'busy' | 'commit_ended' | 'unexpected';

const NO_EVENTS: readonly ReportedEvent[] = Object.freeze([]);
const ACK_NEW: BrokerAction = Object.freeze({ kind: 'ack', duplicate: false });
const ACK_DUPLICATE: BrokerAction = Object.freeze({ kind: 'ack', duplicate: true });
const SHUTDOWN_REQUEUE: BrokerAction = Object.freeze({ kind: 'requeue', cause: 'shutdown', delayMs: 0 });
const HANDLE_GUARDED: Decision = Object.freeze({ kind: 'handle', guarded: true, events: Object.freeze(['acquired'] as const), error: undefined });
const COMMIT_WITHOUT_RESULT: Decision = Object.freeze({ kind: 'commit', result: undefined });
const COMMITTED: Settlement = settle('none', ACK_NEW, 'committed', Object.freeze(['committed'] as const), true);
const DUPLICATE: Settlement = settle('none', ACK_DUPLICATE, 'done_duplicate', Object.freeze(['done_duplicate'] as const), false);
const SHUTDOWN_AT_INTAKE: Settlement = settle('none', SHUTDOWN_REQUEUE, 'released', NO_EVENTS, false);

/**
 * The settlement table. Pure: the same input and rules give the same decision.
 *
 * Rows (README.md "Settlement"; docs/guarantees.md for why):
 * - done → ack as duplicate, handler not run. busy → requeue after `busyRequeueDelayMs`.
 * - claimer unavailable → requeue after `unavailableRequeueDelayMs`; with `failOpen`, run the
 *   handler without a claim instead.
 * - key conflict → dead-letter `key_conflict`. Invalid message → dead-letter with its reason, no claim.
 * - acquired past `maxAttempts` → dead-letter `retry_exhausted`, release with the count reset.
 * - handler acked → commit; then ack whatever the commit's outcome (reported as the outcome),
 *   except a transactional receipt whose commit failed: release and requeue with backoff.
 * - handler threw a retryable error, returned `requeue()`, or passed `handlerTimeoutMs` → release
 *   and requeue with backoff (the asked delay for `requeue`); at `maxAttempts` dead-letter
 *   `retry_exhausted` instead.
 * - handler threw a permanent error or returned `reject(reason)` → dead-letter with the reason
 *   (`invalid_disposition` for a return value that is not a disposition), then release with the
 *   count reset.
 * - shutdown during the handler or a backoff → release, requeue without delay, never dead-letter.
 * - lease lost while the handler ran (and it did not ack) → release, requeue after `busyRequeueDelayMs`.
 * - fail-open (no claim): the same rows, with no receipt step; an ack reports `claim_failed`
 *   (nothing was committed), and so does a requeue.
 */
export function decide(event: SettlementEvent & { readonly kind: SettleNowKind }, rules: SettlementRules): Settlement;
export function decide(event: SettlementEvent & { readonly kind: 'acquired' | 'claim_failed' }, rules: SettlementRules): Settlement | HandleDecision;
export function decide(event: SettlementEvent & { readonly kind: 'handler_end' }, rules: SettlementRules): Settlement | CommitDecision;
export function decide(event: SettlementEvent, rules: SettlementRules): Decision;
export function decide(event: SettlementEvent, rules: SettlementRules): Decision {
  switch (event.kind) {
    case 'stopping':
      return event.during === 'intake' ? SHUTDOWN_AT_INTAKE : settle('none', SHUTDOWN_REQUEUE, 'claim_failed', NO_EVENTS, false, event.error);
    case 'invalid':
      return settle('none', deadLetter(event.reason, 0), 'rejected', ['rejected'], false, event.error);
    case 'key_conflict':
      return settle('none', deadLetter('key_conflict', 0), 'key_conflict', ['key_conflict', 'rejected'], false, event.error);
    case 'claim_failed':
      if (event.failOpen) return { kind: 'handle', guarded: false, events: ['claim_failed', 'fail_open'], error: event.error };
      return settle('none', requeue('claimer_unavailable', rules.unavailableRequeueDelayMs), 'claim_failed', ['claim_failed'], false, event.error);
    case 'done':
      return DUPLICATE;
    case 'busy':
      return settle('none', requeue('busy', rules.busyRequeueDelayMs), 'busy', ['busy'], false);
    case 'acquired':
      // Redelivered more often than allowed (for example a handler that crashes its process).
      if (event.attempt > rules.maxAttempts) {
        return settle('release_reset', deadLetter('retry_exhausted', event.attempt - 1), 'retry_exhausted', ['acquired', 'retry_exhausted', 'rejected'], false);
      }
      return HANDLE_GUARDED;
    case 'handler_end':
      return afterHandler(event.end, event.guarded, event.attempt, rules);
    case 'commit_ended': {
      const commit = event.commit;
      if (commit.outcome === 'committed') return COMMITTED;
      // A transactional commit that failed rolled the effect back with the claim: try again.
      if (event.transactional) {
        return settle('release', requeue('retry', rules.retryDelayMs(event.attempt), event.attempt), 'commit_failed', ['commit_failed'], true, commit.error);
      }
      // The effect is applied: ack, and report that the commit did not land (the effect may repeat).
      return settle('none', ACK_NEW, commit.outcome, [commit.outcome], true, commit.error);
    }
    case 'unexpected':
      // After the handler acked and its commit started, the source may have moved on: ack. Before
      // that, never lose the message: requeue.
      if (event.handled) return settle('none', ACK_NEW, 'commit_failed', NO_EVENTS, true, event.error);
      return settle('none', requeue('retry', rules.busyRequeueDelayMs), 'claim_failed', NO_EVENTS, false, event.error);
  }
}

function afterHandler(end: HandlerEnd, guarded: boolean, attempt: number, rules: SettlementRules): Decision {
  const release: ReceiptAction = guarded ? 'release' : 'none';
  const releaseReset: ReceiptAction = guarded ? 'release_reset' : 'none';
  // Nothing was claimed on the fail-open path, so a requeue there reports the failed claim.
  const requeued: Outcome = guarded ? 'released' : 'claim_failed';
  switch (end.kind) {
    case 'ack':
      if (guarded) return end.result === undefined ? COMMIT_WITHOUT_RESULT : { kind: 'commit', result: end.result };
      return settle('none', ACK_NEW, 'claim_failed', NO_EVENTS, true);
    case 'aborted':
      if (end.cause === 'shutdown') return settle(release, SHUTDOWN_REQUEUE, requeued, NO_EVENTS, true);
      if (end.cause === 'lease_lost') return settle(release, requeue('lease_lost', rules.busyRequeueDelayMs), 'lease_lost', ['lease_lost'], true, end.error);
      return retry(end.error, undefined, guarded, attempt, rules); // timeout: a retryable failure
    case 'reject':
      return settle(releaseReset, deadLetter(end.reason || 'handler_rejected', attempt), 'rejected', ['rejected'], true);
    case 'threw':
      if (end.permanent) return settle(releaseReset, deadLetter(permanentReason(end.error), attempt), 'rejected', ['rejected'], true, end.error);
      return retry(end.error, undefined, guarded, attempt, rules);
    case 'requeue':
      return retry(undefined, end.delayMs, guarded, attempt, rules);
  }
}

/** A retryable failure: requeue with backoff (or the asked delay), or dead-letter at `maxAttempts`. */
function retry(error: unknown, askedDelayMs: number | undefined, guarded: boolean, attempt: number, rules: SettlementRules): Settlement {
  if (attempt >= rules.maxAttempts) {
    return settle(guarded ? 'release_reset' : 'none', deadLetter('retry_exhausted', attempt), 'retry_exhausted', ['retry_exhausted', 'rejected'], true, error);
  }
  const delayMs = askedDelayMs ?? rules.retryDelayMs(attempt);
  return settle(guarded ? 'release' : 'none', requeue('retry', delayMs, attempt), guarded ? 'released' : 'claim_failed', NO_EVENTS, true, error);
}

/** The dead-letter reason of a permanent failure. */
function permanentReason(error: unknown): string {
  if (error instanceof InvalidDispositionError) return 'invalid_disposition';
  if (error instanceof InvalidMessageError) return error.reason;
  return 'permanent_error';
}

function settle(receipt: ReceiptAction, broker: BrokerAction, outcome: Outcome, events: readonly ReportedEvent[], handled: boolean, error?: unknown): Settlement {
  return { kind: 'settle', receipt, broker, outcome, events, handled, error };
}

function requeue(cause: RequeueCause, delayMs: number, attempt?: number): BrokerAction {
  return attempt === undefined ? { kind: 'requeue', cause, delayMs } : { kind: 'requeue', cause, delayMs, attempt };
}

function deadLetter(reason: string, attempts: number): BrokerAction {
  return { kind: 'dead_letter', reason, attempts };
}
