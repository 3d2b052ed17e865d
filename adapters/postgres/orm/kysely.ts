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
 *
 * When the claimer's `pool` is the `pool` given here (the one Kysely's dialect sends through), the
 * port's `overPoolClient` lets the claimer run the claim as without a port and hand the handler a
 * `Transaction<DB>` over the claim's own client (see {@link kyselyTransactions}).
 */
// First: a missing client library is named before any module that needs it loads.
import { SUPPORTED_RANGE } from './kysely-peer';
import { CompiledQuery, PostgresDialect, SingleConnectionProvider, Transaction as KyselyTransaction } from 'kysely';
// Kysely ships ES modules only: the types are imported as from ESM, so the CommonJS declaration
// file of this entry point compiles under node16 resolution too.
import type { DatabaseConnection, Driver, Kysely, QueryExecutor, QueryResult, Transaction } from 'kysely' with { 'resolution-mode': 'import' };
import type { PoolClient } from 'pg';
import { ConfigurationError, consoleWarnLogger, type Logger } from '../../../src';
import { checkKnownOptions, checkPeerVersion } from '../../../src/adapter-kit';
import { TransactionMisuseError } from '../errors';
import type { WrappedPoolClient, SqlRow, TransactionLimits, TransactionPort } from '../transaction-port';
import { ignoreClientErrors } from './pool-client-errors';

export { SUPPORTED_RANGE };

/** Options of {@link kyselyTransactions}. */
export interface KyselyTransactionsOptions {
  /**
   * Required: the `pg` Pool given to Kysely's `PostgresDialect`. The port adds a listener that
   * ignores `error` to each client it hands out: when the server ends a claim's transaction (a
   * handler past its lease), node-postgres emits `error` on the client Kysely holds, and with no
   * listener that ends the process; with it, the transaction's next statement or COMMIT rejects.
   * When it is also the claimer's `pool` (the same object), the claimer takes `overPoolClient`.
   * Kysely's dialect keeps its pool private, so the port cannot check that this is that pool.
   */
  readonly pool: import('pg').Pool;
  /**
   * Where a version warning goes (`kysely` outside ^0.29), and the one line saying that this Kysely
   * lacks what `overPoolClient` needs. Default: the core's `consoleWarnLogger`.
   */
  readonly logger?: Pick<Logger, 'warn'>;
}

/**
 * The transaction port on a `Kysely<DB>` instance.
 * - `transaction(work)` is `db.transaction().execute((trx) => work(trx))`: Kysely commits when
 *   `work` resolves and rolls back when it rejects; a failed COMMIT rejects with the driver's
 *   error (`pg`'s `DatabaseError`).
 * - `query(trx, text, values)` is `trx.executeQuery(CompiledQuery.raw(text, values))`: `$1`…
 *   placeholders bound by `pg`; the rows as `pg` decodes them.
 * - `overPoolClient`: a `Transaction<DB>` over a client twophase borrowed and began, built with
 *   Kysely's public API (`db.getExecutor().withConnectionProvider(new SingleConnectionProvider(…))`
 *   and `new Transaction(…)`, as Kysely's own `transaction().execute` builds its object). It keeps
 *   the instance's plugins and query compiler; its statements go through the client's `query`, and
 *   Kysely sends neither BEGIN nor COMMIT. A claimer whose `pool` is `options.pool` takes it: the
 *   claim then runs as without a port (three round trips a message instead of six). On that object
 *   `.stream()` is refused (no cursor), and Kysely's `log` option sees none of its statements (the
 *   log wraps only the connections Kysely's own driver hands out). A Kysely without `getExecutor`
 *   or `withConnectionProvider` gets no `overPoolClient` (one warning through `options.logger`),
 *   and each claim runs inside `db.transaction()`.
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
  const logger = options.logger ?? consoleWarnLogger;
  checkPeerVersion('kysely', SUPPORTED_RANGE, logger);
  return new KyselyTransactionPort(db, overPoolClient(db, options.pool, logger));
}

class KyselyTransactionPort<DB> implements TransactionPort<Transaction<DB>> {
  readonly name = 'kysely';

  constructor(
    private readonly db: Kysely<DB>,
    readonly overPoolClient: WrappedPoolClient<Transaction<DB>> | undefined,
  ) {}

  transaction<T>(work: (tx: Transaction<DB>) => Promise<T>, _limits: TransactionLimits): Promise<T> {
    return this.db.transaction().execute((trx) => work(trx));
  }

  async query(tx: Transaction<DB>, text: string, values: readonly unknown[]): Promise<readonly SqlRow[]> {
    const result = await tx.executeQuery<SqlRow>(CompiledQuery.raw(text, [...values]));
    return result.rows;
  }
}

/**
 * `overPoolClient` of `db` over `pool`, or undefined (after one warning) when this Kysely lacks
 * the public methods it is built from.
 */
function overPoolClient<DB>(db: Kysely<DB>, pool: import('pg').Pool, logger: Pick<Logger, 'warn'>): WrappedPoolClient<Transaction<DB>> | undefined {
  const executor = typeof (db as { getExecutor?: unknown }).getExecutor === 'function' ? (db.getExecutor() as QueryExecutor | undefined) : undefined;
  if (typeof executor?.withConnectionProvider !== 'function' || typeof SingleConnectionProvider !== 'function' || typeof KyselyTransaction !== 'function') {
    logger.warn(
      { peer: 'kysely' },
      "kyselyTransactions: this Kysely has no getExecutor().withConnectionProvider; each claim runs inside db.transaction() (6 round trips a message), even on the claimer's own pool",
    );
    return undefined;
  }
  // Introspection (`trx.introspection`) reads the dialect; the driver is never asked for a
  // connection or a transaction (the connection provider below hands out the one client).
  const dialect = new PostgresDialect({ pool });
  const props = { config: { dialect }, dialect, driver: REFUSING_DRIVER };
  return {
    pool,
    wrap: (client: PoolClient) =>
      new KyselyTransaction<DB>({ ...props, executor: executor.withConnectionProvider(new SingleConnectionProvider(new ClientConnection(client))) }) as unknown as Transaction<DB>,
  };
}

/** A Kysely connection over one `pg` client that twophase holds in its transaction. */
class ClientConnection implements DatabaseConnection {
  constructor(private readonly client: PoolClient) {}

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const result = await this.client.query(compiled.sql, [...compiled.parameters]);
    const { command, rowCount } = result;
    const counted = command === 'INSERT' || command === 'UPDATE' || command === 'DELETE' || command === 'MERGE';
    return { rows: (result.rows ?? []) as R[], ...(counted ? { numAffectedRows: BigInt(rowCount ?? 0) } : {}) };
  }

  // eslint-disable-next-line require-yield -- refuses before the first row
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new ConfigurationError("stream() is not available on ctx.transaction over the claimer's client (twophase/kysely); read the rows with execute()");
  }
}

/** The `driver` of the transaction object: nothing of it is used; every call is refused. */
const REFUSING_DRIVER: Driver = {
  init: async () => undefined,
  acquireConnection: () => Promise.reject(new ConfigurationError("a connection was asked of ctx.transaction's driver (twophase/kysely): the transaction has only the claim's client")),
  beginTransaction: () => Promise.reject(new TransactionMisuseError('BEGIN')),
  commitTransaction: () => Promise.reject(new TransactionMisuseError('COMMIT')),
  rollbackTransaction: () => Promise.reject(new TransactionMisuseError('ROLLBACK')),
  releaseConnection: async () => undefined,
  destroy: async () => undefined,
};
