/**
 * The broker side of a consumer: what an adapter implements so {@link ConsumerBase} can consume.
 */
import type { Claimer, ClaimResult } from '../claim/claimer';
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
   * Runs the pipeline for one delivery like {@link DeliverySink.dispatch}, and reports its two
   * moments separately (see {@link Submission}): an in-order source (Kafka) dispatches the next
   * record of a partition once `handled` resolves `true`, while this one's commit is in flight,
   * and moves its committable offset only when `settled` resolves. Never throws.
   */
  submit(delivery: Delivery, preclaimed?: PreparedClaim): Submission;
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

/**
 * The submission of a sink whose `handled` moment comes only with `settled` (it never frees a
 * delivery early): for a sink written around `dispatch` alone, e.g. a test double.
 * `submit: (delivery, preclaimed) => settledSubmission(dispatch(delivery, preclaimed))`.
 */
export function settledSubmission(settled: Promise<DeliveryResult>): Submission {
  return { handled: settled.then(NOT_EARLY, NOT_EARLY), settled };
}

const NOT_EARLY = (): boolean => false;

/**
 * The two moments of one delivery, as {@link DeliverySink.submit} reports them.
 *
 * Order: `handled` always resolves no later than `settled`. When it resolves `true`, `settled`
 * follows with an `ack` result (the effect is applied; the ack waits for the commit's end,
 * whatever its outcome). When it resolves `false`, `settled` has already resolved.
 */
export interface Submission {
  /**
   * Resolves `true` as soon as the handler acked and the delivery is bound to end in an ack: its
   * claim commit was issued (a receipt without a transaction), or its transactional commit
   * succeeded (a receipt with `transaction`; for a shared chunk transaction the member's commit
   * was recorded and its ack then waits for the chunk's COMMIT). The handler's concurrency slot
   * is free from then on. Resolves `false` when the delivery settled without that moment (a
   * requeue, a dead-letter, a duplicate, a busy key, a failed transactional commit). Never rejects.
   */
  readonly handled: Promise<boolean>;
  /** The delivery's result once it is settled through `delivery.settler`. Never rejects. */
  readonly settled: Promise<DeliveryResult>;
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
  /** What it consumes, for the consumer's start line: the queue, or the topics joined by `,`. */
  readonly destinationName?: string;
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
  /**
   * Optional: true when the source dispatches every delivery of one batch claim at once, never
   * more than its prefetch (RabbitMQ's claim window). Members of a shared transaction then run
   * together and each commit waits for the COMMIT of all, so such a source may claim ahead with a
   * claimer that {@link Claimer.sharesTransactions} without adopting the transaction.
   */
  readonly dispatchesBatchesTogether?: boolean;
  /**
   * Optional: called once by the consumer at construction with its claimer, so the source can
   * fit its defaults to it (the Kafka source claims no record ahead with a claimer that opens one
   * transaction per claim) or refuse a combination that cannot perform.
   * @throws ConfigurationError naming the option to change
   */
  fitClaimer?(claimer: Claimer): void;
}
