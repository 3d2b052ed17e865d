/**
 * The settlement table (README.md, "Settlement") as one pure function: given what happened to a
 * delivery, {@link decide} says what to do with its claim receipt and with the broker message,
 * and which outcome and events to report.
 *
 * No I/O, no timers, no claimer: the pipeline (delivery-pipeline.ts) gathers the facts, asks
 * here, and carries the answer out (apply-decision.ts). The guarded path (with a claim) and the
 * fail-open path (`failOpen`, no claim) ask the same function, so they cannot drift apart.
 */
import type { JsonValue } from '../claim/claimer';
import { type Disposition, isDisposition } from '../ports/disposition';
import {
  ConfigurationError,
  InvalidDispositionError,
  InvalidKeyError,
  InvalidMessageError,
  KeyConflictError,
  RetryableError,
  ShutdownError,
  TimeoutError,
} from '../util/errors';
import type { AuxiliaryEvent, Outcome } from '../ports/observer';
import { type BackoffPolicy, backoffDelay } from '../util/retry';
import type { CommitOutcome } from '../claim/settlement';
import type { RequeueCause } from '../ports/settler';

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
   * Returned something that is not a disposition, or threw the InvalidDispositionError of a
   * disposition factory given a bad argument: a programming error, never retried (whatever
   * `isPermanent` says).
   */
  | { readonly kind: 'invalid_disposition'; readonly error: InvalidDispositionError }
  /** Threw; `permanent` is the consumer's `isPermanent(error)`. */
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

/** Ack the message (`duplicate`: a done duplicate, the handler did not run). */
export interface AckAction {
  readonly kind: 'ack';
  readonly duplicate: boolean;
}

/** Requeue it; `attempt` is set for `retry` after a handler attempt (it goes into RequeueInfo). */
export interface RequeueAction {
  readonly kind: 'requeue';
  readonly cause: RequeueCause;
  readonly delayMs: number;
  readonly attempt?: number;
}

/** Dead-letter it; `attempts`: handler attempts made (0 when it never ran). */
export interface DeadLetterAction {
  readonly kind: 'dead_letter';
  readonly reason: string;
  readonly attempts: number;
}

/** What to tell the broker. */
export type BrokerAction = AckAction | RequeueAction | DeadLetterAction;

/**
 * What to do with the claim receipt: nothing, release it, release it with this attempt taken
 * off the count (a shutdown stopped the handler: the attempt does not count, so deploys never
 * use up `maxAttempts`), or release it with the attempt count reset (after a dead-letter, and
 * only when the dead-letter settle succeeded, so a DLQ replay starts at attempt 1 while a
 * refused dead-letter comes straight back to the dead-letter path). A commit is its own
 * decision ({@link Decision} `commit`).
 */
export type ReceiptAction = 'none' | 'release' | 'release_uncounted' | 'release_reset';

/** An event to report (each goes to the observers with the delivery's key, attempt and token). */
export type ReportedEvent = Outcome | AuxiliaryEvent;

/**
 * The broker actions each receipt step goes with: a release (counted or not) is followed by a
 * requeue (the key runs again), a release with the count reset by a dead-letter; without a
 * receipt step, any.
 * No other pair is decided, and the type admits no other.
 */
interface BrokerFor {
  readonly none: BrokerAction;
  readonly release: RequeueAction;
  readonly release_uncounted: RequeueAction;
  readonly release_reset: DeadLetterAction;
}

/** The end of a delivery: receipt step, then broker step (dead-letter: broker first, then receipt). */
export type Settlement = { readonly [R in ReceiptAction]: SettlementOf<R> }[ReceiptAction];

/** A {@link Settlement} whose receipt step is `R`. */
export interface SettlementOf<R extends ReceiptAction> {
  readonly kind: 'settle';
  readonly receipt: R;
  readonly broker: BrokerFor[R];
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
const ACK_NEW: AckAction = Object.freeze({ kind: 'ack', duplicate: false });
const ACK_DUPLICATE: AckAction = Object.freeze({ kind: 'ack', duplicate: true });
const SHUTDOWN_REQUEUE: RequeueAction = Object.freeze({ kind: 'requeue', cause: 'shutdown', delayMs: 0 });
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
 *   except a transactional receipt whose commit failed: release and requeue with backoff; at
 *   `maxAttempts` dead-letter `retry_exhausted` with the commit's error.
 * - handler threw a retryable error, returned `requeue()`, or passed `handlerTimeoutMs` → release
 *   and requeue with backoff (the asked delay for `requeue`); at `maxAttempts` dead-letter
 *   `retry_exhausted` instead.
 * - handler threw a permanent error or returned `reject(reason)` → dead-letter with the reason,
 *   then release with the count reset.
 * - handler returned something that is not a disposition (or a disposition factory refused its
 *   argument) → dead-letter `invalid_disposition` at once, whatever `isPermanent` says.
 * - shutdown during the handler or a backoff → release with the attempt uncounted, requeue without
 *   delay, never dead-letter (so shutdowns never use up `maxAttempts`).
 * - lease lost while the handler ran (and it did not ack) → release, requeue after `busyRequeueDelayMs`.
 * - fail-open (no claim): the same rows, with no receipt step; an ack reports `claim_failed`
 *   (nothing was committed), and so does a requeue.
 */
export function decide(event: SettlementEvent & { readonly kind: SettleNowKind }, rules: SettlementRules): Settlement;
export function decide(event: SettlementEvent & { readonly kind: 'acquired' | 'claim_failed' | SettleNowKind }, rules: SettlementRules): Settlement | HandleDecision;
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
      // A transactional commit that failed rolled the effect back with the claim: try again, or,
      // at maxAttempts, dead-letter with the COMMIT's error (the next delivery would be
      // dead-lettered at its claim, with no error to show).
      if (event.transactional) {
        if (event.attempt >= rules.maxAttempts) {
          return settle('release_reset', deadLetter('retry_exhausted', event.attempt), 'retry_exhausted', ['commit_failed', 'retry_exhausted', 'rejected'], true, commit.error);
        }
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
  const release = guarded ? 'release' : 'none';
  const releaseUncounted = guarded ? 'release_uncounted' : 'none';
  const releaseReset = guarded ? 'release_reset' : 'none';
  // Nothing was claimed on the fail-open path, so a requeue there reports the failed claim.
  const requeued: Outcome = guarded ? 'released' : 'claim_failed';
  switch (end.kind) {
    case 'ack':
      if (guarded) return end.result === undefined ? COMMIT_WITHOUT_RESULT : { kind: 'commit', result: end.result };
      return settle('none', ACK_NEW, 'claim_failed', NO_EVENTS, true);
    case 'aborted':
      if (end.cause === 'shutdown') return settle(releaseUncounted, SHUTDOWN_REQUEUE, requeued, NO_EVENTS, true);
      if (end.cause === 'lease_lost') return settle(release, requeue('lease_lost', rules.busyRequeueDelayMs), 'lease_lost', ['lease_lost'], true, end.error);
      return retry(end.error, undefined, guarded, attempt, rules); // timeout: a retryable failure
    case 'reject':
      return settle(releaseReset, deadLetter(end.reason || 'handler_rejected', attempt), 'rejected', ['rejected'], true);
    case 'invalid_disposition':
      return settle(releaseReset, deadLetter('invalid_disposition', attempt), 'rejected', ['rejected'], true, end.error);
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
  if (error instanceof InvalidMessageError) return error.reason;
  return 'permanent_error';
}

function settle<R extends ReceiptAction>(receipt: R, broker: BrokerFor[R], outcome: Outcome, events: readonly ReportedEvent[], handled: boolean, error?: unknown): Settlement {
  return { kind: 'settle', receipt, broker, outcome, events, handled, error } as SettlementOf<R> as Settlement;
}

function requeue(cause: RequeueCause, delayMs: number, attempt?: number): RequeueAction {
  return attempt === undefined ? { kind: 'requeue', cause, delayMs } : { kind: 'requeue', cause, delayMs, attempt };
}

function deadLetter(reason: string, attempts: number): DeadLetterAction {
  return { kind: 'dead_letter', reason, attempts };
}

// ---------------------------------------------------------------------------------------------
// The facts the table reads, each derived in one place from what the pipeline saw.
// ---------------------------------------------------------------------------------------------

const ACK_END: HandlerEnd = Object.freeze({ kind: 'ack' });

/**
 * How the handler ended, from what its promise gave and what the run saw meanwhile. Precedence:
 * an ack wins (its effect is done); then a shutdown abort; then a lease lost while it ran; then
 * what it returned (a requeue, a reject, or anything else: `invalid_disposition`); then what it
 * threw (the handler timeout's own abort reason: `timeout`; a disposition factory's
 * InvalidDispositionError: `invalid_disposition`; anything else is judged by `isPermanent`).
 *
 * @param returned - true when the handler's promise resolved (`value` is what it gave), false when it rejected (`value` is the error)
 * @param abortReason - the run signal's abort reason, if it was aborted
 * @param lost - the LeaseLostError keep-alive saw, if the lease was taken over
 */
export function handlerEnd(returned: boolean, value: unknown, abortReason: unknown, lost: unknown, isPermanent: (error: unknown) => boolean): HandlerEnd {
  const disposition: Disposition | undefined = returned && isDisposition(value) ? value : undefined;
  if (disposition?.type === 'ack') return disposition.result === undefined ? ACK_END : { kind: 'ack', result: disposition.result };
  if (abortReason instanceof ShutdownError) return { kind: 'aborted', cause: 'shutdown', error: abortReason };
  if (lost) return { kind: 'aborted', cause: 'lease_lost', error: lost };
  if (disposition) return disposition.type === 'reject' ? { kind: 'reject', reason: disposition.reason } : { kind: 'requeue', delayMs: disposition.delayMs };
  if (returned) return { kind: 'invalid_disposition', error: new InvalidDispositionError(value) };
  if (value instanceof TimeoutError && value === abortReason) return { kind: 'aborted', cause: 'timeout', error: value };
  if (value instanceof InvalidDispositionError) return { kind: 'invalid_disposition', error: value };
  // `throw undefined` (or null) must not read as a requeue request: give it an error object.
  const thrown = value ?? new RetryableError(`the handler threw ${String(value)} (no error object)`);
  return { kind: 'threw', error: thrown, permanent: isPermanent(thrown) };
}

/**
 * The event of a claim that failed with `error` (after the claim step's own retries): a key
 * conflict; an invalid key (or claim options the claimer refused); a shutdown during the claim
 * backoff; otherwise the claim store stayed unavailable.
 */
export function claimFailure(error: unknown, failOpen: boolean): SettlementEvent & { readonly kind: 'key_conflict' | 'invalid' | 'stopping' | 'claim_failed' } {
  if (error instanceof KeyConflictError) return { kind: 'key_conflict', error };
  if (error instanceof InvalidKeyError || error instanceof ConfigurationError) return { kind: 'invalid', reason: 'invalid_key', error };
  if (error instanceof ShutdownError) return { kind: 'stopping', during: 'claim', error };
  return { kind: 'claim_failed', error, failOpen };
}

/**
 * The attempt number of a handler run: the claimer's acquisition count, but never below one past
 * the attempts the broker copy says were made before (`priorAttempts`, e.g. RabbitMQ's
 * `twophase-attempts` header after a requeue through a delay queue, where the claim may have
 * expired). Without a claim (fail-open), one past the prior attempts.
 */
export function attemptOf(claimAttempt: number | undefined, priorAttempts: number | undefined): number {
  const next = (priorAttempts ?? 0) + 1;
  return claimAttempt === undefined || claimAttempt < next ? next : claimAttempt;
}

/**
 * The attempts a requeued copy carries to its next delivery (its `priorAttempts` there): only a
 * `retry` counts (a busy key, an unavailable claim store, a lost lease or a shutdown are not the
 * handler's failures, and counting them would push a message into the dead-letter path).
 *
 * @param attempt - the attempt that failed (RequeueInfo.attempt), if the requeue follows one
 * @param prior - the attempts the delivered copy carried
 */
export function attemptsAfterRequeue(cause: RequeueCause, attempt: number | undefined, prior: number): number {
  if (cause !== 'retry') return prior;
  return Math.max(attempt ?? 0, prior + 1);
}

/**
 * When an acked delivery counts as handled (its handler slot freed, the source told it may move
 * on): without a transaction, once its commit is issued (the effect is done, whatever the commit's
 * outcome, and the delivery ends in an ack); with the receipt's transaction, only once that
 * commit succeeded (a failed one rolled the effect back and the delivery is requeued).
 */
export function handledOnCommitIssued(transactional: boolean): boolean {
  return !transactional;
}

// ---------------------------------------------------------------------------------------------
// Rows for a source that requeues in place: an ordered log (the Kafka source) cannot put a copy
// back behind later records, so it keeps the record, holds back the records after it, and
// dispatches it again. What it does with each requeue the table decided is decided here.
// ---------------------------------------------------------------------------------------------

/** Wait before dispatching again a record whose settle failed (a dead letter not written), ms. */
export const UNSETTLED_RETRY_MS = 1000;

/** What an in-place source does next with a record its dispatch did not settle. */
export type InPlaceStep =
  /** Leave it unsettled (a shutdown requeue): it comes again after the restart or the rebalance. */
  | { readonly kind: 'leave' }
  /** Busy while this source's own commits are in flight: wait for them, then dispatch it again at once. */
  | { readonly kind: 'after_own_commits' }
  /** Wait `delayMs` (fetching of the partition paused), then dispatch it again. */
  | { readonly kind: 'wait'; readonly delayMs: number };

const LEAVE: InPlaceStep = Object.freeze({ kind: 'leave' });
const AFTER_OWN_COMMITS: InPlaceStep = Object.freeze({ kind: 'after_own_commits' });
const RETRY_UNSETTLED: InPlaceStep = Object.freeze({ kind: 'wait', delayMs: UNSETTLED_RETRY_MS });

/**
 * The in-place rows, for a dispatch that ended in a requeue (`requeue`) or whose settle failed
 * (`requeue` undefined: the record stays unsettled):
 * - settle failed → dispatch again after {@link UNSETTLED_RETRY_MS}.
 * - shutdown → leave it.
 * - busy while the source's own commits are in flight → the key is most likely held by an
 *   earlier record of the same partition whose commit has not ended: wait for those commits and
 *   claim again at once, not after `busyRequeueDelayMs`.
 * - claimer unavailable → the table's `unavailableRequeueDelayMs`, doubled for each unavailable
 *   answer in a row (`unavailableStreak`, 1 for the first) up to `backoff.maxDelayMs`, with
 *   `backoff.jitter`: the partition holds its place, so a store outage must not spin it.
 * - any other requeue → the table's delay.
 */
export function requeueInPlace(
  requeue: { readonly cause: RequeueCause; readonly delayMs: number } | undefined,
  ownCommitsInFlight: boolean,
  unavailableStreak: number,
  backoff: Readonly<Pick<BackoffPolicy, 'maxDelayMs' | 'jitter'>>,
): InPlaceStep {
  if (requeue === undefined) return RETRY_UNSETTLED;
  const { cause, delayMs } = requeue;
  if (cause === 'shutdown') return LEAVE;
  if (cause === 'busy' && ownCommitsInFlight) return AFTER_OWN_COMMITS;
  if (cause !== 'claimer_unavailable') return { kind: 'wait', delayMs };
  const policy = { initialDelayMs: delayMs, maxDelayMs: Math.max(backoff.maxDelayMs, delayMs), multiplier: 2, jitter: backoff.jitter };
  return { kind: 'wait', delayMs: backoffDelay(policy, unavailableStreak) };
}
