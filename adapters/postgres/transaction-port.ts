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
 */

/** One row as the library returns it: column name → value. */
export type SqlRow = Readonly<Record<string, unknown>>;

/** The time bounds twophase asks of one transaction (see {@link TransactionPort.transaction}). */
export interface TransactionLimits {
  /** The longest the transaction may stay open, ms: the claim's lease (`leaseTtlMs`) plus a margin. */
  readonly timeoutMs: number;
  /** The longest to wait for a connection before the transaction begins, ms (`operationTimeoutMs`). */
  readonly maxWaitMs: number;
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
}
