/**
 * What `twophase dlq replay` needs from a broker. One implementation per broker
 * (backends/rabbitmq.ts today; a Kafka backend plugs in the same way and registers in
 * backends/index.ts).
 *
 * The replay loop calls, per message: `next` → (`republish` → `remove`) or `release`.
 * Safety rule every backend keeps: `remove` is called only after `republish` resolved, and
 * `republish` resolves only once the broker confirmed the copy. A crash at any point therefore
 * leaves each message in the dead-letter source, at its destination, or (between the two calls)
 * in both, never in neither. A copy in both is harmless: the consumer's claim turns the second
 * one into a duplicate.
 */

/** Where a replayed message goes, as shown to the user. */
export interface ReplayDestination {
  /** Human-readable, for example `exchange "orders" routing key "order.created"`. */
  readonly description: string;
}

/** One dead-lettered message, as the replay loop sees it. */
export interface ReplayItem {
  /** The message id, when the producer set one. */
  readonly messageId?: string;
  /** The idempotency key, derived as the consumer derives it, when it has a usable one. */
  readonly key?: string;
  /** Why the consumer cannot derive a key (`invalid_key: …`, `missing_key: …`); the copy would be dead-lettered again. */
  readonly keyError?: string;
  /** The dead-letter reason recorded by twophase (`retry_exhausted`, …), or the broker's. */
  readonly reason?: string;
  /** Attempts recorded when it was dead-lettered. */
  readonly attempts?: number;
  /** The error message recorded when it was dead-lettered. */
  readonly errorMessage?: string;
  /** Where `republish` would send it; undefined when the message carries no route. */
  readonly destination?: ReplayDestination;
  /**
   * The route the message records (headers a publisher can write) when it points elsewhere than
   * `destination` and was therefore not followed, with the reason, for example
   * `exchange "audit" routing key "x": it was dead-lettered from queue "a", not from "orders"`.
   */
  readonly refusedRoute?: string;
}

/**
 * A per-message problem: the loop leaves the message in place and records it, as `skipped` (and
 * goes on), or as `failed` when `stopsRun` is set (the destination refuses messages for now, so
 * the next ones would fare alike: the run stops, as after any other error).
 */
export class ReplayItemError extends Error {
  /** True when the run should stop after this message (for example the destination queue is full). */
  readonly stopsRun: boolean;
  constructor(message: string, options?: { cause?: unknown; stopsRun?: boolean }) {
    super(message, options);
    this.name = 'ReplayItemError';
    this.stopsRun = options?.stopsRun ?? false;
  }
}

/** Something the user should know that is not about one message (shown as a warning line). */
export interface ReplayNotice {
  readonly level: 'info' | 'warn';
  readonly text: string;
}

/** What `open` may use while it runs. */
export interface ReplayOpenContext {
  /** Reports a notice at once (for example while waiting on the broker). */
  readonly notice: (notice: ReplayNotice) => void;
  /** The run examines at most this many messages (a backend may take fewer ahead). */
  readonly limit?: number;
}

/** A broker's side of the replay. */
export interface ReplayBackend<TItem extends ReplayItem = ReplayItem> {
  /** Backend name, as given to `--broker`. */
  readonly name: string;
  /**
   * Connects and opens the dead-letter source (a queue, a topic). Resolves with how many
   * messages it holds now; the loop never examines more than that, so messages that fail again
   * during the run (and come back) are not replayed twice in one run.
   * @throws Error when the broker is unreachable or the source does not exist
   */
  open(source: string, context?: ReplayOpenContext): Promise<{ readonly available: number }>;
  /**
   * Takes the next message without removing it. Undefined when the source is empty.
   * A message taken and not yet removed must return to the source if the process dies.
   */
  next(): Promise<TItem | undefined>;
  /**
   * Publishes a copy to the item's original destination and resolves once the broker confirmed it.
   * The loop may call it again before an earlier call resolved (up to its `window`); each call
   * settles on its own message's confirm.
   * @throws ReplayItemError when this message cannot be replayed (no route, unroutable, refused)
   * @throws Error for anything else (the loop stops)
   */
  republish(item: TItem): Promise<ReplayDestination>;
  /** Removes the item from the dead-letter source. Only after `republish` resolved. */
  remove(item: TItem): Promise<void>;
  /**
   * Leaves the item in the dead-letter source. A backend may hold it until `close` so that
   * `next` does not return it again in this run.
   */
  release(item: TItem): Promise<void>;
  /** Returns held items to the source and disconnects. Safe to repeat. */
  close(): Promise<void>;
}

/**
 * Creates a backend from the CLI's options, at once or (loading the broker's client library on
 * first use) asynchronously.
 * @throws MissingPeerError (or rejects with it) when the broker's client library is not installed
 */
export type ReplayBackendFactory = (options: {
  readonly url?: string;
  readonly toExchange?: string;
  readonly toRoutingKey?: string;
  readonly toQueue?: string;
  /** The work queue the dead-letter source belongs to (`--queue`). */
  readonly workQueue?: string;
  /** Follow the route each message records (`--trust-recorded-route`). */
  readonly trustRecordedRoute?: boolean;
  /** `--client`: the Kafka client library, `kafkajs` (default) or `platformatic` (@platformatic/kafka). */
  readonly client?: string;
}) => ReplayBackend | Promise<ReplayBackend>;
