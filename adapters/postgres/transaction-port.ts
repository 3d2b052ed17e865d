/**
 * The transaction port: how twophase's PostgreSQL features run inside a transaction that a
 * database library opens in its own idiom (`prisma.$transaction(async (tx) => …)`, Drizzle's
 * `db.transaction`, Kysely's `db.transaction().execute`, TypeORM's `dataSource.transaction`).
 *
 * The port has two methods. `transaction` opens one transaction of the library and runs `work`
 * in it: the library commits when `work` resolves and rolls back when it rejects. `query` sends
 * one statement inside that transaction. The claimer's transactional mode, `runOnce` with that
 * claimer, and outbox staging (`ctx.outbox`) all go through these two methods, so supporting one
 * more library is one file that implements them.
 *
 * Rules an implementation keeps:
 * - `query` sends exactly one statement, with `$1`, `$2`… placeholders bound to `values` (never
 *   spliced into the text), on the transaction's own connection, and resolves with the rows.
 *   twophase casts every column it reads to `text`, `integer` or `boolean` in SQL, so the value
 *   decoding of the library (bigint as BigInt, bytea as Uint8Array) never reaches it.
 * - `transaction` uses the library's default isolation, READ COMMITTED on PostgreSQL, unless the
 *   library's own object was configured otherwise; the claim stays correct under stricter levels.
 * - `limits.timeoutMs` bounds how long the transaction may stay open: a library with its own
 *   timer (Prisma's `timeout`) is given at least that; `limits.maxWaitMs` bounds the wait for a
 *   connection (Prisma's `maxWait`). Libraries without such timers ignore both: the server's
 *   `idle_in_transaction_session_timeout`, which twophase sets per transaction, ends a transaction
 *   whose owner stopped.
 *
 * A library whose transaction object can be built over one `pg` client (Drizzle on
 * node-postgres) may also offer {@link TransactionPort.overPoolClient}. When its pool is the
 * claimer's own, the claimer then runs the transactional mode exactly as without a port (the same
 * statements, round trips and guarantees; docs/postgres.md) and hands the handler the library's
 * object over the claim's client instead of the client itself: the library's own BEGIN and COMMIT
 * round trips, and the claim's separate statements, are not sent.
 */
import type { PoolClient } from 'pg';

/** One row as the library returns it: column name → value. */
export type SqlRow = Readonly<Record<string, unknown>>;

/** The time bounds twophase asks of one transaction (see {@link TransactionPort.transaction}). */
export interface TransactionLimits {
  /** The longest the transaction may stay open, ms: the claim's lease (`leaseTtlMs`) plus a margin. */
  readonly timeoutMs: number;
  /** The longest to wait for a connection before the transaction begins, ms (`operationTimeoutMs`). */
  readonly maxWaitMs: number;
}

/** The limits of a claim's transaction: open at most the lease plus `operationTimeoutMs`, waiting at most `operationTimeoutMs` for a connection. */
export function claimLimits(leaseTtlMs: number, operationTimeoutMs: number): TransactionLimits {
  return { timeoutMs: leaseTtlMs + operationTimeoutMs, maxWaitMs: operationTimeoutMs };
}

/**
 * A database library's transaction, as twophase uses it.
 * @typeParam Tx - the library's transaction object, handed to the handler as `ctx.transaction`
 *   (Prisma's interactive-transaction client, Drizzle's `tx`, Kysely's `Transaction`, TypeORM's
 *   `EntityManager`).
 */
export interface TransactionPort<Tx> {
  /** The library's name for logs and errors, e.g. `prisma`. */
  readonly name: string;
  /**
   * Opens one transaction and runs `work` in it; commits when `work` resolves (then resolves with
   * its value), rolls back when it rejects (then rejects with the same error, or with the
   * library's own error when the COMMIT itself failed).
   */
  transaction<T>(work: (tx: Tx) => Promise<T>, limits: TransactionLimits): Promise<T>;
  /** Sends one statement (`$n` placeholders bound to `values`) inside `tx`; resolves with its rows. */
  query(tx: Tx, text: string, values: readonly unknown[]): Promise<readonly SqlRow[]>;
  /**
   * Optional: when `error` (thrown by `query` or `transaction`) shows that the library itself
   * ended the transaction without committing it (Prisma closing an interactive transaction whose
   * timer ran out), a short reason in twophase's words; `undefined` for any other error. A commit
   * that fails with such an error is reported as "nothing was applied", with this reason.
   */
  rolledBackBy?(error: unknown): string | undefined;
  /** Optional: the library's transaction object built over a `pg` client (see the file header). */
  readonly overPoolClient?: PoolClientTransactions<Tx>;
}

/**
 * How a library builds its transaction object over a `pg` client that twophase borrowed from the
 * claimer's pool and keeps in an open transaction (twophase sends BEGIN, COMMIT and ROLLBACK).
 * A library gives one of two shapes: `wrap` when its object can be built at once (Drizzle, Kysely,
 * TypeORM), `enter` when the object exists only inside the library's own transaction callback
 * (Prisma's interactive transaction).
 * @typeParam Tx - the library's transaction object (`ctx.transaction`)
 */
export type PoolClientTransactions<Tx> = WrappedPoolClient<Tx> | EnteredPoolClient<Tx>;

/** What both shapes of {@link PoolClientTransactions} share. */
interface OverPoolClient {
  /**
   * The `pg` Pool the library's database object sends through. The claimer takes this path only
   * when it is the claimer's own `pool` (the same object), so the handler's statements reach the
   * same database as the claim; otherwise it runs the port's `transaction` and `query`.
   */
  readonly pool: unknown;
}

/** A library whose transaction object is built over the client at once. */
export interface WrappedPoolClient<Tx> extends OverPoolClient {
  /**
   * The library's transaction object over `client`: every statement it sends goes through
   * `client.query`, and it neither begins, commits nor releases the client (twophase does; the
   * client refuses BEGIN, COMMIT, ROLLBACK and `release`, and allows savepoints).
   */
  wrap(client: PoolClient): Tx;
}

/** A library whose transaction object exists only inside its own transaction callback. */
export interface EnteredPoolClient<Tx> extends OverPoolClient {
  /**
   * Opens the library's transaction over `client` and resolves once its callback holds the
   * transaction object: the library sends every statement through `client.query` and sends no
   * BEGIN, COMMIT or ROLLBACK of its own. `limits` as for {@link TransactionPort.transaction}.
   * Rejects when the library did not take `client` (then nothing of the library is left open).
   */
  enter(client: PoolClient, limits: TransactionLimits): Promise<EnteredTransaction<Tx>>;
}

/** The library's transaction, entered over a claim's client (see {@link EnteredPoolClient}). */
export interface EnteredTransaction<Tx> {
  /** The library's transaction object, handed to the handler as `ctx.transaction`. */
  readonly tx: Tx;
  /**
   * Leaves the library's callback: resolved (`commit` true) or rejected. Resolves once the
   * library let go of the transaction, before twophase sends its COMMIT or ROLLBACK; with `commit`
   * true, rejects when the library had already ended the transaction itself (its own timer), in
   * which case twophase rolls back. Sends nothing.
   */
  leave(commit: boolean): Promise<void>;
}
