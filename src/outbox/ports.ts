/**
 * The outbox's ports: what the relay needs of a store (`OutboxStore`, `OutboxNotifier`) and of a
 * broker (`OutboxPublisher`), and what staging needs of a transaction (`OutboxWriter`). The
 * PostgreSQL adapter implements the store side; the RabbitMQ and Kafka adapters the publishers.
 *
 * Lease rules every store keeps:
 * - a claim leases rows to one owner under one fencing token (strictly increasing across claims)
 *   until `leaseMs` from the store's clock; a row whose lease expired can be claimed again, under
 *   a newer token;
 * - of one (system, ordering key), a claim hands out only the oldest row and the rows after it,
 *   in staging order, and none while a row of that key is under a live lease, or an older row is
 *   waiting for a retry or dead under `deadKeyPolicy: 'hold'`: a key is held by one lease at a time;
 * - `extend`, `complete`, `fail` and `release` act only on rows still leased under the caller's
 *   token: a relay whose lease was taken over changes nothing; `extend` also refuses a lease that
 *   already ran out (a later claim may hold an older row of the same key), so the relay stops
 *   publishing those rows.
 */
import type { OutboxEnvelope, OutboxSystem } from './outbox-message';

/** A claimed outbox row, as a publisher receives it. */
export interface OutboxRecord extends OutboxEnvelope {
  /** Staging order (a store sequence, decimal string): the order of commits within an ordering key. */
  readonly sequence: string;
  /** Failed publishes of this message so far (0 on the first try). */
  readonly attempts: number;
  /** When it was staged (the store's clock). */
  readonly createdAt: Date;
}

/** Who holds a claim. */
export interface OutboxLease {
  /** The relay's owner id (unique per relay instance). */
  readonly owner: string;
  /** The claim's fencing token: strictly increasing across claims of one store. */
  readonly fencingToken: number;
}

/** What the relay asks a claim for. */
export interface OutboxClaimRequest {
  readonly owner: string;
  /** Most rows to lease. */
  readonly limit: number;
  /** Lease length, ms. */
  readonly leaseMs: number;
  /** The brokers the relay can publish to: rows for others are left alone. */
  readonly systems: readonly OutboxSystem[];
  /** Whether a dead message holds the later messages of its ordering key (`'hold'`) or not (`'continue'`). */
  readonly deadKeyPolicy: DeadKeyPolicy;
}

/**
 * What later messages of an ordering key do once a message of that key is dead:
 * - `'hold'` (default): they wait, unpublished, until an operator requeues or purges the dead
 *   one (`twophase outbox requeue | purge`): the key's order is never broken;
 * - `'continue'`: they are published; the dead message is out of order if it is requeued later.
 */
export type DeadKeyPolicy = 'hold' | 'continue';

/** A claim: rows in staging order, all leased under one token. */
export interface OutboxClaim {
  readonly lease: OutboxLease;
  readonly records: readonly OutboxRecord[];
}

/** A failed publish to record. */
export interface OutboxFailure {
  readonly sequence: string;
  /** Short class of the failure for counts and the CLI (`unroutable`, `publish_failed`, `too_large`, …). */
  readonly reason: string;
  /** The error's message (stored truncated). */
  readonly error: string;
  /** Retry this long from now, ms; `undefined` = the message is dead. */
  readonly retryInMs: number | undefined;
}

/** Counts for health and the CLI. */
export interface OutboxStats {
  /** Messages waiting to be published (leased or not, in backoff included; dead excluded). */
  readonly pending: number;
  /** Age of the oldest pending message, ms (0 when none): the relay's lag. */
  readonly oldestPendingAgeMs: number;
  /** Pending messages currently leased by a relay. */
  readonly leased: number;
  /** Dead messages by reason. */
  readonly dead: Readonly<Record<string, number>>;
}

/** The store side of the relay. */
export interface OutboxStore {
  /**
   * Checks that the store is migrated for this version (a relay older or newer than the table is
   * refused).
   * @throws an error naming the missing or newer migration
   */
  ready?(): Promise<void>;
  /**
   * Optional: what the store says about itself on the relay's start line, as flat fields
   * (`PostgresOutboxStore`: `{ store: 'postgresql', schema, table }`). Called once per relay
   * start; must not throw or touch the store.
   */
  describe?(): Readonly<Record<string, string | number | boolean>>;
  /** Leases up to `limit` publishable rows. An empty `records` when there are none. */
  claim(request: OutboxClaimRequest): Promise<OutboxClaim>;
  /**
   * Pushes the lease of `sequences` to `leaseMs` from now. Returns the sequences still held (a row
   * whose lease was taken over, or that is gone, is missing from the answer).
   */
  extend(lease: OutboxLease, sequences: readonly string[], leaseMs: number): Promise<readonly string[]>;
  /** Removes published rows still held under `lease`. Returns how many were removed. Safe to repeat. */
  complete(lease: OutboxLease, sequences: readonly string[]): Promise<number>;
  /** Records failed publishes (backoff or dead) and ends their lease. Returns how many rows were still held. */
  fail(lease: OutboxLease, failures: readonly OutboxFailure[]): Promise<number>;
  /** Gives rows back unpublished, attempts unchanged. Returns how many were still held. */
  release(lease: OutboxLease, sequences: readonly string[]): Promise<number>;
  stats(): Promise<OutboxStats>;
}

/** A wake-up signal: the store tells the relay that something was staged. */
export interface OutboxNotifier {
  /**
   * Starts listening; `onNotify` runs after a staging transaction committed (it may run
   * spuriously). `onError` reports a lost subscription: the relay keeps polling, and the notifier
   * reconnects on its own or a later `listen` call does.
   */
  listen(onNotify: () => void, onError: (error: unknown) => void): Promise<OutboxSubscription>;
}

/** A running {@link OutboxNotifier} subscription. */
export interface OutboxSubscription {
  close(): Promise<void>;
}

/** How the relay should treat a publish failure. */
export interface PublishFailureClass {
  /** Short reason for counts (`unroutable`, `too_large`, `publish_failed`, …). */
  readonly reason: string;
  /** True when publishing the same message again cannot succeed: it is dead at once. */
  readonly permanent: boolean;
}

/** The broker side of the relay. */
export interface OutboxPublisher {
  /** The broker it publishes to: rows of this system are claimed for it. */
  readonly system: OutboxSystem;
  /** Connects; called by the relay's `start()`. */
  start?(): Promise<void>;
  /** Disconnects; called by the relay's `stop()` once nothing is in flight. */
  close?(): Promise<void>;
  /**
   * Publishes `record` (its bytes and headers as staged, its id as the broker message id and the
   * `idempotency-key` header) and resolves only once the broker confirmed it.
   * @throws when the broker refused, did not confirm in time, or could not route it
   */
  publish(record: OutboxRecord): Promise<void>;
  /** Classifies a publish error; default: reason `publish_failed`, not permanent. */
  classify?(error: unknown): PublishFailureClass;
}

/**
 * Wraps each publish of the relay, for tracing (`createOutboxRelayTracer` from `twophase/otel`).
 * `tracePublish` must call `publish` once, with `record` or a copy of it whose headers carry more
 * (a trace context), and settle as it settles: its resolution is the broker's confirm, its
 * rejection the publish failure the relay records.
 */
export interface OutboxPublishTracer {
  tracePublish(record: OutboxRecord, publish: (record: OutboxRecord) => Promise<void>): Promise<void>;
}

/** Staging rows into the caller's open transaction: what `ctx.outbox` writes through. */
export interface OutboxWriter {
  /**
   * Inserts `envelopes` in order, in the transaction.
   * @throws OutboxTransactionError when the transaction already ended
   * @throws OutboxIdConflictError when an id is already staged
   */
  stage(envelopes: readonly OutboxEnvelope[]): Promise<void>;
}
