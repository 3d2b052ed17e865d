/**
 * The commit after a handler acked with a claim, and the moment the delivery counts as handled
 * (settlement-table.ts `handledOnCommitIssued`).
 */
import type { JsonValue } from '../claim/claimer';
import type { CommitBatcher } from '../claim/commit-batcher';
import type { DeliveryRun } from './delivery-run';
import type { Logger } from '../util/logger';
import { type CommitOutcome, commitWithin } from '../claim/settlement';
import { handledOnCommitIssued } from './settlement-table';

/** What the commit step needs of its consumer. */
export interface CommitContext {
  /** Time for the commit and its retries, ms. */
  readonly commitDeadlineMs: number;
  readonly logger: Logger;
  /** Gathers commits without a transaction into commitMany calls (options.batchCommits), if on. */
  readonly batcher: CommitBatcher | undefined;
}

/**
 * Commits after an ack (never throws; see commitWithin). Without a transaction the effect is
 * done once the commit is issued: the handler slot is freed and the source may move on
 * (submit's `handled`). Such a commit goes through the batcher when there is one (one
 * commitMany call per event-loop turn; the outcome stays this delivery's own). A receipt
 * carrying the handler's transaction commits the effect with the claim, alone: the delivery
 * counts as handled only once that commit succeeded (see Receipt.transaction).
 */
export function commitAfterAck(ctx: CommitContext, run: DeliveryRun, value: JsonValue | undefined): Promise<CommitOutcome> {
  const receipt = run.receipt!;
  const deadlineMs = ctx.commitDeadlineMs;
  const batch = receipt.transaction === undefined ? ctx.batcher?.commit : undefined;
  // No closure on the per-message path unless an observer wraps the step (as for claim, handle, settle).
  const committing = run.trace.wrapsSteps
    ? run.trace.step('commit', () => commitWithin(receipt, value, deadlineMs, ctx.logger, batch))
    : commitWithin(receipt, value, deadlineMs, ctx.logger, batch);
  if (handledOnCommitIssued(receipt.transaction !== undefined)) {
    markHandled(run, true, ctx.logger);
    return committing;
  }
  // A failed one is logged with the delivery's result (FailureLog: transaction_rolled_back).
  return committing.then((commit) => {
    if (commit.outcome === 'committed') markHandled(run, false, ctx.logger);
    return commit;
  });
}

/**
 * The handler's effect is done and the delivery ends in an ack: free its slot, tell the source
 * (`onHandled`, the `handled` moment of DeliverySink.submit), and (`signal`: no transaction)
 * the settler's deprecated `handled` hook.
 */
export function markHandled(run: DeliveryRun, signal: boolean, logger: Logger): void {
  run.releasePermit();
  run.handled = true;
  const onHandled = run.onHandled;
  if (onHandled !== undefined) {
    run.onHandled = undefined;
    onHandled(true);
  }
  const settler = run.delivery.settler;
  if (!signal || !settler.handled) return;
  try {
    settler.handled();
  } catch (error) {
    logger.warn({ err: error, key: run.key }, "the settler's handled hook threw; ignored");
  }
}
