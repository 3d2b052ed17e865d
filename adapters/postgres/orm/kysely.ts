/**
 * `twophase/kysely`: the transaction port on Kysely 0.29 (its `PostgresDialect` on a `pg` Pool).
 * The claimer's transactional mode then runs each delivery in one `db.transaction()` of the
 * application's own `Kysely` instance, and the handler writes its effect with Kysely's query
 * builder on `ctx.transaction` (a `Transaction<DB>`):
 *
 * ```ts
 * import { Kysely, PostgresDialect } from 'kysely';
 * import { Pool } from 'pg';
 * import { kyselyTransactions } from 'twophase/kysely';
 * const pool = new Pool({ connectionString: process.env.DATABASE_URL });
 * const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
 * const transactions = kyselyTransactions(db, { pool });
 * ```
 *
 * Kysely has no transaction timer of its own: the port ignores `limits`, and the server's
 * `idle_in_transaction_session_timeout`, which twophase sets per transaction, ends a transaction
 * whose owner stopped.
 */
// First: a missing client library is named before any module that needs it loads.
import { SUPPORTED_RANGE } from './kysely-peer';
import { CompiledQuery } from 'kysely';
// Kysely ships ES modules only: the types are imported as from ESM, so the CommonJS declaration
// file of this entry point compiles under node16 resolution too.
import type { Kysely, Transaction } from 'kysely' with { 'resolution-mode': 'import' };
import { ConfigurationError, consoleWarnLogger, type Logger } from '../../../src';
import { checkKnownOptions, checkPeerVersion } from '../../../src/adapter-kit';
import type { SqlRow, TransactionLimits, TransactionPort } from '../transaction-port';
import { ignoreClientErrors } from './pool-client-errors';

export { SUPPORTED_RANGE };

/** Options of {@link kyselyTransactions}. */
export interface KyselyTransactionsOptions {
  /**
   * Required: the `pg` Pool given to Kysely's `PostgresDialect`. The port adds a listener that
   * ignores `error` to each client it hands out: when the server ends a claim's transaction (a
   * handler past its lease), node-postgres emits `error` on the client Kysely holds, and with no
   * listener that ends the process; with it, the transaction's next statement or COMMIT rejects.
   */
  readonly pool: import('pg').Pool;
  /** Where a version warning goes (`kysely` outside ^0.29). Default: the core's `consoleWarnLogger`. */
  readonly logger?: Pick<Logger, 'warn'>;
}

/**
 * The transaction port on a `Kysely<DB>` instance.
 * - `transaction(work)` is `db.transaction().execute((trx) => work(trx))`: Kysely commits when
 *   `work` resolves and rolls back when it rejects; a failed COMMIT rejects with the driver's
 *   error (`pg`'s `DatabaseError`).
 * - `query(trx, text, values)` is `trx.executeQuery(CompiledQuery.raw(text, values))`: `$1`…
 *   placeholders bound by `pg`; the rows as `pg` decodes them.
 * @param db the application's Kysely instance on PostgreSQL
 * @param options see {@link KyselyTransactionsOptions}
 * @throws ConfigurationError on an unknown option, or when `db` is not a Kysely instance (no `transaction` / `executeQuery`)
 */
export function kyselyTransactions<DB>(db: Kysely<DB>, options: KyselyTransactionsOptions): TransactionPort<Transaction<DB>> {
  const host = db as unknown as { transaction?: unknown; executeQuery?: unknown } | null;
  if (typeof host?.transaction !== 'function' || typeof host.executeQuery !== 'function') {
    throw new ConfigurationError('kyselyTransactions(db): db must be a Kysely instance (it has no transaction / executeQuery)');
  }
  checkKnownOptions('kyselyTransactions options', options, ['pool', 'logger']);
  const pool = (options as Partial<KyselyTransactionsOptions> | undefined)?.pool as { on?: unknown } | undefined;
  if (typeof pool?.on !== 'function') {
    throw new ConfigurationError("kyselyTransactions(db, { pool }): pool, the pg Pool given to Kysely's PostgresDialect, is required (the port keeps a client whose transaction the server ended from crashing the process)");
  }
  ignoreClientErrors(options.pool);
  checkPeerVersion('kysely', SUPPORTED_RANGE, options.logger ?? consoleWarnLogger);
  return new KyselyTransactionPort(db);
}

class KyselyTransactionPort<DB> implements TransactionPort<Transaction<DB>> {
  readonly name = 'kysely';

  constructor(private readonly db: Kysely<DB>) {}

  transaction<T>(work: (tx: Transaction<DB>) => Promise<T>, _limits: TransactionLimits): Promise<T> {
    return this.db.transaction().execute((trx) => work(trx));
  }

  async query(tx: Transaction<DB>, text: string, values: readonly unknown[]): Promise<readonly SqlRow[]> {
    const result = await tx.executeQuery<SqlRow>(CompiledQuery.raw(text, [...values]));
    return result.rows;
  }
}
