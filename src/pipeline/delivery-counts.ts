/**
 * What a consumer did since construction, counted from each delivery's final result, for
 * `health()`: a probe or a person sees the consumer working without an OpenTelemetry SDK.
 */
import type { DeliveryResult } from '../ports/observer';

/** Counts of final delivery results since the consumer was constructed. */
export interface DeliveryCounts {
  /** Deliveries whose claim was committed (the effect recorded as done) and acked. */
  readonly commits: number;
  /** Deliveries of a key already done: acked without running the handler. */
  readonly duplicatesSkipped: number;
  /** Deliveries requeued because another worker held the key's lease (the handler did not run). */
  readonly busyRequeues: number;
  /** Deliveries requeued for a retry: the handler threw or asked for a requeue. */
  readonly retries: number;
}

/** Mutable counters behind {@link DeliveryCounts}. */
export class DeliveryCounter {
  private commits = 0;
  private duplicatesSkipped = 0;
  private busyRequeues = 0;
  private retries = 0;

  /** Counts one final result. */
  record(result: DeliveryResult): void {
    if (result.outcome === 'committed') this.commits++;
    else if (result.outcome === 'done_duplicate') this.duplicatesSkipped++;
    else if (result.outcome === 'busy') this.busyRequeues++;
    else if (result.action === 'requeue' && result.reason === 'retry') this.retries++;
  }

  /** A copy of the counts. */
  snapshot(): DeliveryCounts {
    return { commits: this.commits, duplicatesSkipped: this.duplicatesSkipped, busyRequeues: this.busyRequeues, retries: this.retries };
  }
}
