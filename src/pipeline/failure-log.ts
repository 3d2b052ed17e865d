/**
 * Makes every failure of a delivery visible with the default logger: one line (warn or error)
 * with the key, the reason and where the message went, through a {@link LogLimiter} so floods
 * become periodic summaries; and the count of dead-letters by reason that `health()` reports.
 *
 * What is logged, from a delivery's final {@link DeliveryResult}:
 * - dead-letter (`reject`), any reason: `missing_key`, `invalid_key`, `invalid_body`,
 *   `key_conflict`, `invalid_disposition`, `permanent_error`, `retry_exhausted`, the handler's own
 *   reason. Error level for the handler's failures (`retry_exhausted`, `permanent_error`,
 *   `invalid_disposition`), warn for the others;
 * - a retry (`requeue` with cause `retry`: the handler threw or asked for a requeue): warn;
 * - a transactional commit that failed (`transaction_rolled_back`: the effect rolled back with the
 *   claim, the message is requeued): error;
 * - a requeue because the claim store is unavailable, or the lease was lost during the handler: warn;
 * - an ack whose commit failed (`commit_failed`, `lease_lost`: the effect may repeat): error.
 * Not failures, not logged: commits, duplicates, busy requeues, shutdown requeues.
 */
import type { Delivery } from '../ports/delivery';
import type { Logger } from '../util/logger';
import type { LogLimiter } from '../util/log-limiter';
import type { DeliveryResult } from '../ports/observer';

/** Dead-letter reasons that come from the handler failing (logged at error). */
const HANDLER_FAILURES: ReadonlySet<string> = new Set(['retry_exhausted', 'permanent_error', 'invalid_disposition']);
/** Distinct reasons counted; further ones are counted as `other`. */
const MAX_COUNTED_REASONS = 100;

export class FailureLog {
  private readonly deadLetterCounts = new Map<string, number>();

  constructor(
    private readonly consumer: string,
    private readonly logger: Logger,
    private readonly limiter: LogLimiter,
    private readonly maxAttempts: number,
  ) {}

  /**
   * Logs and counts `result` if it is a failure; returns at once for the rest. Dead-letter lines
   * also name the delivery (its message id, queue or topic, and the broker's attributes such as
   * partition and offset), so a message without a usable key can still be found.
   */
  record(result: DeliveryResult, delivery?: Pick<Delivery, 'messageId' | 'metadata'>): void {
    const action = result.action;
    if (action === 'ack') {
      if (result.outcome === 'commit_failed' || result.outcome === 'lease_lost') this.commitFailed(result);
      return;
    }
    if (action === 'reject') {
      this.deadLettered(result, delivery);
      return;
    }
    const cause = result.reason;
    if (cause === 'retry' && result.outcome === 'commit_failed') {
      // A transactional commit that failed: the effect rolled back with the claim.
      if (!this.limiter.admit('transaction_rolled_back')) return;
      this.logger.error(
        { consumer: this.consumer, key: result.key, reason: 'transaction_rolled_back', attempt: result.attempt, destination: 'requeue', delayMs: result.delayMs, err: result.error },
        'twophase: the transaction holding the claim and the effect did not commit; the effect was rolled back, message requeued',
      );
    } else if (cause === 'retry') {
      const threw = result.error !== undefined;
      // Counted under the reason the line names, so the summary of lines not logged names it too.
      const reason = threw ? 'handler_error' : 'requeue_requested';
      if (!this.limiter.admit(reason)) return;
      this.logger.warn(
        { consumer: this.consumer, key: result.key, reason, attempt: result.attempt, maxAttempts: this.maxAttempts, destination: 'requeue', delayMs: result.delayMs, err: result.error },
        threw ? 'twophase: handler failed; message requeued for a retry' : 'twophase: handler asked for a requeue; message requeued for a retry',
      );
    } else if (cause === 'claimer_unavailable') {
      if (!this.limiter.admit('claimer_unavailable')) return;
      this.logger.warn(
        { consumer: this.consumer, key: result.key, reason: 'claimer_unavailable', destination: 'requeue', delayMs: result.delayMs, err: result.error },
        'twophase: claim store unavailable; message requeued without running the handler',
      );
    } else if (cause === 'lease_lost') {
      if (!this.limiter.admit('lease_lost')) return;
      this.logger.warn(
        { consumer: this.consumer, key: result.key, reason: 'lease_lost', attempt: result.attempt, destination: 'requeue', delayMs: result.delayMs, err: result.error },
        'twophase: lease lost while the handler ran (another worker took the key); message requeued',
      );
    }
  }

  /** Dead-letters issued since construction, by reason (a copy). */
  deadLetters(): Record<string, number> {
    return Object.fromEntries(this.deadLetterCounts);
  }

  private deadLettered(result: DeliveryResult, delivery: Pick<Delivery, 'messageId' | 'metadata'> | undefined): void {
    let reason = result.reason ?? 'unknown';
    if (!this.deadLetterCounts.has(reason) && this.deadLetterCounts.size >= MAX_COUNTED_REASONS) reason = 'other';
    this.deadLetterCounts.set(reason, (this.deadLetterCounts.get(reason) ?? 0) + 1);
    if (!this.limiter.admit(reason)) return;
    const fields = {
      consumer: this.consumer,
      key: result.key,
      messageId: delivery?.messageId,
      source: delivery?.metadata.destination,
      attributes: delivery?.metadata.attributes,
      reason,
      attempt: result.attempt,
      destination: 'dead-letter',
      err: result.error,
    };
    if (HANDLER_FAILURES.has(reason)) this.logger.error(fields, `twophase: message dead-lettered (${reason})`);
    else this.logger.warn(fields, `twophase: message dead-lettered (${reason})`);
  }

  private commitFailed(result: DeliveryResult): void {
    if (!this.limiter.admit(result.outcome)) return;
    this.logger.error(
      { consumer: this.consumer, key: result.key, reason: result.outcome, attempt: result.attempt, fencingToken: result.fencingToken, destination: 'ack', err: result.error },
      `twophase: effect applied but ${result.outcome === 'lease_lost' ? 'the lease was lost before the commit' : 'the commit failed'}; message acked, a redelivery after the lease ends may repeat the effect`,
    );
  }
}
