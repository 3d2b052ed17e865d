/**
 * What a broker adapter hands to the consumer pipeline, and what the handler sees.
 */
import type { Outbox } from '../outbox/staging-outbox';
import type { Settler } from './settler';

/** Broker facts about one delivery. Adapters fill what their broker knows. */
export interface DeliveryMetadata {
  /** Messaging system, as in OpenTelemetry `messaging.system`: `rabbitmq`, `kafka`, `memory`. */
  readonly system: string;
  /** Queue or topic the delivery came from. */
  readonly destination: string;
  /** True when the broker flags this as a redelivery. */
  readonly redelivered: boolean;
  /**
   * Attempts already made on this message as counted by the adapter (retry headers, quorum
   * `x-delivery-count`), or undefined. Used only for attempt accounting, never for dedup.
   */
  readonly priorAttempts?: number;
  /** Consumer group (Kafka) or consumer tag group name, when there is one. */
  readonly consumerGroup?: string;
  /** Broker-specific facts for logs and telemetry (partition, offset, routing key, tag, …). */
  readonly attributes?: Readonly<Record<string, string | number | boolean | undefined>>;
}

/** One delivery, as an adapter presents it to {@link ConsumerBase.dispatch}. */
export interface Delivery {
  /** Raw body bytes. */
  readonly body: Buffer;
  /** Message headers. Values keep the broker's types (Kafka: Buffer). */
  readonly headers: Readonly<Record<string, unknown>>;
  /** The broker's message id, when the producer set one. */
  readonly messageId?: string;
  readonly metadata: DeliveryMetadata;
  /** How to ack, requeue or reject this delivery on its broker. */
  readonly settler: Settler;
}

/** The decoded message the handler receives. */
export interface Message<TBody> {
  /** The idempotency key, namespaced with the consumer's name. */
  readonly key: string;
  readonly body: TBody;
  readonly raw: Buffer;
  readonly headers: Readonly<Record<string, unknown>>;
  readonly messageId?: string;
  readonly metadata: DeliveryMetadata;
}

/**
 * What the handler gets beside the message.
 * @typeParam TTransaction - the type of {@link HandlerContext.transaction}: the resource of a
 *   transactional claimer (e.g. a `pg` PoolClient); `undefined` for other claimers.
 */
export interface HandlerContext<TTransaction = undefined> {
  /**
   * Aborted when the lease is lost (reason: LeaseLostError), at the handler timeout, or when a
   * shutdown passes its deadline (reason: ShutdownError). Pass it to I/O that accepts a signal.
   */
  readonly signal: AbortSignal;
  /** Strictly increasing per key: hand it to downstream stores so they refuse older owners. */
  readonly fencingToken: number;
  /** 1 on the first attempt; counts acquisitions of the key across redeliveries and retries. */
  readonly attempt: number;
  readonly metadata: DeliveryMetadata;
  /**
   * The claim's transaction when the claimer is transactional (the PostgreSQL claimer's inbox
   * mode: a `pg` client inside the transaction that holds the claim). Write the effect through it
   * so it commits with the claim or not at all; never COMMIT, ROLLBACK or release it yourself.
   * Undefined with other claimers, and on the `failOpen` path (no claim, no transaction).
   */
  readonly transaction: TTransaction;
  /**
   * Stages messages in the claim's transaction (transactional claimers): an `OutboxRelay`
   * publishes them once the transaction committed, never if it rolled back. Each message's id is
   * derived from the message key and its position among this run's staged messages, so a run
   * that rolled back and runs again stages the same ids. With other claimers (and on the
   * `failOpen` path) every call rejects with `OutboxNotAvailableError`.
   */
  readonly outbox: Outbox;
}
