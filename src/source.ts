/**
 * The broker side of a consumer: what an adapter implements so {@link ConsumerBase} can consume.
 */
import type { ClaimResult } from './claimer';
import type { Delivery } from './delivery';
import type { DeliveryResult } from './observer';

/** What the consumer gives a source to push deliveries into. */
export interface DeliverySink {
  /**
   * Runs the whole pipeline for one delivery and settles it through `delivery.settler`.
   * Never rejects: every failure ends in a settle and a {@link DeliveryResult}.
   * `preclaimed` is the result of {@link DeliverySink.claimBatch} for this delivery, if any.
   */
  dispatch(delivery: Delivery, preclaimed?: PreparedClaim): Promise<DeliveryResult>;
  /**
   * Derives the keys of a batch and claims them in one store round trip when the claimer
   * supports `claimMany`. Entries come back in order; pass each to `dispatch`.
   */
  claimBatch(deliveries: readonly Delivery[]): Promise<PreparedClaim[]>;
  /**
   * Reports that the source stopped for good (for example its queue was deleted and it is
   * configured to stop): the consumer becomes not live, so a deployment's probe restarts it.
   */
  fail?(error: Error): void;
}

/** What the consumer tells a source at start. */
export interface SourceStartOptions {
  /** Messages in flight at once: the prefetch. */
  readonly concurrency: number;
  /** The consumer's lease length, ms (to warn when a broker's ack timeout is shorter). */
  readonly leaseTtlMs?: number;
  /** The consumer's handler timeout, ms, when one is set. */
  readonly handlerTimeoutMs?: number;
}

/** A claim made ahead of dispatch by {@link DeliverySink.claimBatch}. */
export type PreparedClaim =
  | { readonly kind: 'claimed'; readonly key: string; readonly result: ClaimResult }
  | { readonly kind: 'failed'; readonly key: string; readonly error: Error }
  | { readonly kind: 'skipped' };

/** A broker adapter as seen by the consumer. */
export interface MessageSource {
  /** Messaging system name (`rabbitmq`, `kafka`, `memory`). */
  readonly system: string;
  /**
   * Starts consuming: sets up topology, subscribes with `concurrency` as prefetch, and calls
   * `sink.dispatch` for each delivery. Resolves once consuming has begun.
   */
  start(sink: DeliverySink, options: SourceStartOptions): Promise<void>;
  /** Stops intake (no new deliveries) while keeping what is needed to settle in-flight ones. */
  stopIntake(): Promise<void>;
  /** Releases connections. Called after in-flight deliveries settled. */
  close(): Promise<void>;
  /** True while the source is subscribed and able to deliver (for readiness probes). */
  isConsuming?(): boolean;
  /**
   * Optional: true when the source claims keys ahead of dispatch through
   * {@link DeliverySink.claimBatch} (RabbitMQ `batchClaims`, Kafka `claimBatchSize` > 1).
   */
  readonly claimsAhead?: boolean;
  /**
   * Optional: true when the source adopts a batch claim's shared transaction
   * (`SharedTransaction.adopt`): it runs the batch's handlers one after the other, holds each
   * member's ack until the transaction's outcome, and runs the members again on a rollback. Only
   * such a source may claim ahead with a claimer that {@link Claimer.sharesTransactions}.
   */
  readonly adoptsSharedTransactions?: boolean;
}
