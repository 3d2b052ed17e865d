/**
 * Carries out a {@link Settlement} for one delivery, the one place that does: report the
 * decision's events, then the receipt step (release, or release with the attempt count reset)
 * and the broker call through the delivery's settler, and build the {@link DeliveryResult}.
 *
 * Order: for a dead-letter, the broker first and then the release (the count is reset only when
 * the dead-letter copy is in place, so a refused dead-letter comes back to the dead-letter path
 * without running the handler again); for a requeue, the release first, then the broker.
 */
import type { DeliveryRun } from './delivery-run';
import type { LogLimiter } from '../util/log-limiter';
import type { Logger } from '../util/logger';
import type { DeliveryResult } from '../ports/observer';
import { errorType, releaseWithin, truncateErrorMessage } from '../claim/settlement';
import type { ReleaseOptions } from '../claim/claimer';
import type { BrokerAction, DeadLetterAction, ReportedEvent, RequeueAction, Settlement, SettlementOf } from './settlement-table';
import { type AckInfo, isIntendedRedelivery, type RejectInfo, type Settler } from '../ports/settler';

/** What applying a settlement needs of its consumer. */
export interface ApplyContext {
  readonly name: string;
  readonly logger: Logger;
  readonly logLimiter: LogLimiter;
  /** Time for a release and its retries, ms. */
  readonly releaseDeadlineMs: number;
}

const ACK_NEW: AckInfo = Object.freeze({ duplicate: false });
const ACK_DUPLICATE: AckInfo = Object.freeze({ duplicate: true });
const RESET_ATTEMPTS = Object.freeze({ resetAttempts: true });
const UNCOUNT_ATTEMPT = Object.freeze({ uncountAttempt: true });

/** Reports the events of a decision, in order, with its error (and the dead-letter reason on `rejected`). */
export function reportEvents(run: DeliveryRun, events: readonly ReportedEvent[], error: unknown, broker?: BrokerAction): void {
  if (!run.trace.observed) return;
  for (const type of events) {
    const reason = type === 'rejected' && broker?.kind === 'dead_letter' ? broker.reason : undefined;
    run.emit(type, carriesError(type) ? error : undefined, reason);
  }
}

/** Events reported with the decision's error. */
function carriesError(type: string): boolean {
  return type !== 'acquired' && type !== 'done_duplicate' && type !== 'busy' && type !== 'fail_open' && type !== 'committed';
}

/**
 * Applies `s` to the run (events, receipt, broker) and returns the delivery's result (durationMs
 * still 0). Never rejects: a failed broker call is reported as `ack_failed`.
 */
export function applySettlement(ctx: ApplyContext, run: DeliveryRun, s: Settlement, report = true): Promise<DeliveryResult> {
  if (report) reportEvents(run, s.events, s.error, s.broker);
  if (s.receipt === 'release' || s.receipt === 'release_uncounted') return releaseThenRequeue(ctx, run, s);
  const broker = s.broker;
  if (broker.kind === 'dead_letter') return deadLetter(ctx, run, s, broker);
  // The per-message path (an ack after a commit): the broker call alone, without an async frame.
  const result = broker.kind === 'ack' ? resultOf(run, s, 'ack', undefined, undefined) : resultOf(run, s, 'requeue', broker.cause, delayUsed(run, broker));
  return brokerCall(run, broker, undefined).then(
    () => result,
    (failure: unknown) => {
      settleFailed(ctx, run, failure);
      return result;
    },
  );
}

/** Dead-letter first; then (`release_reset`) release, with the count reset only when the dead letter is in place. */
async function deadLetter(ctx: ApplyContext, run: DeliveryRun, s: Settlement, broker: DeadLetterAction): Promise<DeliveryResult> {
  const settled = await settleOn(ctx, run, broker, s.error);
  if (s.receipt === 'release_reset') await release(ctx, run, settled ? RESET_ATTEMPTS : undefined);
  return resultOf(run, s, 'reject', broker.reason, undefined);
}

/** Release first (the key may run again at once; `release_uncounted`: this attempt off the count), then requeue. */
async function releaseThenRequeue(ctx: ApplyContext, run: DeliveryRun, s: SettlementOf<'release' | 'release_uncounted'>): Promise<DeliveryResult> {
  await release(ctx, run, s.receipt === 'release_uncounted' ? UNCOUNT_ATTEMPT : undefined);
  const broker = s.broker;
  await settleOn(ctx, run, broker);
  return resultOf(run, s, 'requeue', broker.cause, delayUsed(run, broker));
}

/** The delay a requeue waits: the settler's own figure where it approximates (`requeueDelay`), else the one asked. */
function delayUsed(run: DeliveryRun, broker: RequeueAction): number {
  const settler = run.delivery.settler;
  if (!settler.requeueDelay) return broker.delayMs;
  const used = settler.requeueDelay(broker.delayMs, broker.attempt === undefined ? { cause: broker.cause } : { cause: broker.cause, attempt: broker.attempt });
  return Number.isFinite(used) && used >= 0 ? used : broker.delayMs;
}

/**
 * The result: every field present, always in the same order, so all results share one object
 * shape (this is on the per-message path).
 */
function resultOf(run: DeliveryRun, s: Settlement, action: DeliveryResult['action'], reason: string | undefined, delayMs: number | undefined): DeliveryResult {
  return {
    action,
    outcome: s.outcome,
    key: run.key,
    claimState: run.claimState,
    attempt: run.attempt,
    fencingToken: run.fencingToken,
    reason,
    delayMs,
    error: s.error,
    handled: s.handled,
    durationMs: 0,
  };
}

/** Releases the run's receipt with `options` (the attempt count reset, or this attempt uncounted); reports `released`. */
async function release(ctx: ApplyContext, run: DeliveryRun, options: ReleaseOptions | undefined): Promise<void> {
  const receipt = run.receipt;
  if (!receipt) return;
  const released = await run.trace.step('release', () => releaseWithin(receipt, ctx.releaseDeadlineMs, ctx.logger, options));
  if (released) run.emit('released');
}

/**
 * Calls the broker; a failure is reported as `ack_failed` (logged, rate-limited) and never
 * retried elsewhere: the broker redelivers and the claim decides. Resolves true when the settle
 * succeeded; never rejects.
 */
function settleOn(ctx: ApplyContext, run: DeliveryRun, broker: BrokerAction, error?: unknown): Promise<boolean> {
  return brokerCall(run, broker, error).then(SETTLED, (failure: unknown) => {
    settleFailed(ctx, run, failure);
    return false;
  });
}

/** The settler call in the observers' `settle` step; a settler that throws becomes a rejection. */
function brokerCall(run: DeliveryRun, broker: BrokerAction, error: unknown): Promise<void> {
  const settler = run.delivery.settler;
  try {
    return run.trace.wrapsSteps ? run.trace.step('settle', () => callSettler(settler, broker, error)) : callSettler(settler, broker, error);
  } catch (thrown) {
    return Promise.reject(thrown);
  }
}

const SETTLED = (): boolean => true;

/** The settler call of a broker action; a dead-letter carries the error's message and class. */
function callSettler(settler: Settler, broker: BrokerAction, error: unknown): Promise<void> {
  if (broker.kind === 'ack') return settler.ack(broker.duplicate ? ACK_DUPLICATE : ACK_NEW);
  if (broker.kind === 'requeue') {
    return settler.requeue(broker.delayMs, broker.attempt === undefined ? { cause: broker.cause } : { cause: broker.cause, attempt: broker.attempt });
  }
  const info: RejectInfo = { reason: broker.reason, attempts: broker.attempts, errorMessage: truncateErrorMessage(error), errorType: errorType(error) };
  return settler.reject(info);
}

/**
 * A broker call failed: logged (rate-limited) and reported as `ack_failed`. A settle the source
 * left undone on purpose (`isIntendedRedelivery`, ports/settler.ts) is a debug line: its cause was logged
 * where it happened.
 */
function settleFailed(ctx: ApplyContext, run: DeliveryRun, error: unknown): void {
  if (isIntendedRedelivery(error)) ctx.logger.debug({ err: error, consumer: ctx.name, key: run.key }, `twophase: ${(error as Partial<Error>).message ?? 'settle left undone by the source'}`);
  else if (ctx.logLimiter.admit('ack_failed')) ctx.logger.warn({ err: error, consumer: ctx.name, key: run.key }, 'twophase: broker settle failed; the broker will redeliver and the claim decides');
  run.emit('ack_failed', error);
}
