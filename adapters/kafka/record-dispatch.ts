/**
 * One dispatch of one record through the consumer's sink, its fate returned through one channel:
 * either at once (the dispatch settled: acked, dead-lettered, requeued, or unsettled), or, when
 * the record's `handled` moment came first (its handler acked and its commit was issued), as a
 * promise of the fate the commit's end gives, so the partition can run the next record meanwhile.
 */
import type { Delivery } from '../../src';
import type { DeliverySink, PreparedClaim } from '../../src/adapter-kit';
import { type RecordFate, type RecordSettler, UNSETTLED } from './record-settler';

/** The outcome of {@link dispatchRecord}. */
export type DispatchOutcome =
  | { readonly pipelined: false; readonly fate: RecordFate }
  /** Handled and committing: `fate` resolves when the commit ended (never rejects). */
  | { readonly pipelined: true; readonly fate: Promise<RecordFate> };

/**
 * Submits `delivery` (whose settler is `settler`) and resolves once the worker may go on.
 * Never rejects for a settle failure (that is the `unsettled` fate); a sink that throws rejects.
 */
export function dispatchRecord(sink: DeliverySink, delivery: Delivery, preclaimed: PreparedClaim | undefined, settler: RecordSettler): Promise<DispatchOutcome> {
  const submission = sink.submit(delivery, preclaimed);
  return submission.handled.then((early): DispatchOutcome | Promise<DispatchOutcome> => {
    if (early) return { pipelined: true, fate: submission.settled.then(() => settler.fate, unsettled) };
    return submission.settled.then(() => ({ pipelined: false, fate: settler.fate }));
  });
}

/** A settle that failed (a submission's `settled` never rejects through ConsumerBase; a sink's own may). */
function unsettled(): RecordFate {
  return UNSETTLED;
}
