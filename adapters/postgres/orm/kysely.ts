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
 * const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new Pool({ connectionString: process.env.DATABASE_URL }) }) });
 * const transactions = kyselyTransactions(db);
 * ```
 *
 * Kysely has no transaction timer of its own: the port ignores `limits`, and the server's
 * `idle_in_transaction_session_timeout`, which twophase sets per transaction, ends a transaction
 * whose owner stopped.
 */
// First: a missing client library is named before any module that needs it loads.
import { SUPPORTED_RANGE } from './kysely-peer';
import { CompiledQuery, type Kysely, type Transaction } from 'kysely';
import { ConfigurationError, consoleWarnLogger, type Logger } from '../../../src';
import { checkKnownOptions, checkPeerVersion } from '../../../src/adapter-kit';
import type { SqlRow, TransactionLimits, TransactionPort } from '../transaction-port';

export { SUPPORTED_RANGE };

/** Options of {@link kyselyTransactions}. */
export interface KyselyTransactionsOptions {
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
export function kyselyTransactions<DB>(db: Kysely<DB>, options: KyselyTransactionsOptions = {}): TransactionPort<Transaction<DB>> {
  const host = db as unknown as { transaction?: unknown; executeQuery?: unknown } | null;
  if (typeof host?.transaction !== 'function' || typeof host.executeQuery !== 'function') {
    throw new ConfigurationError('kyselyTransactions(db): db must be a Kysely instance (it has no transaction / executeQuery)');
  }
  checkKnownOptions('kyselyTransactions options', options, ['logger']);
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
