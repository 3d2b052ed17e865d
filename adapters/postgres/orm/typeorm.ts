/**
 * `twophase/typeorm`: the transaction port on TypeORM 1.x (a `DataSource` of type `postgres`).
 * The claimer's transactional mode then runs each delivery in one `dataSource.transaction` of
 * the application's own DataSource, and the handler writes its effect through the transaction's
 * `EntityManager` on `ctx.transaction` (`ctx.transaction.getRepository(Order).save(…)`):
 *
 * ```ts
 * import { DataSource } from 'typeorm';
 * import { typeormTransactions } from 'twophase/typeorm';
 * const dataSource = await new DataSource({ type: 'postgres', url: process.env.DATABASE_URL, entities: [Order] }).initialize();
 * const transactions = typeormTransactions(dataSource);
 * ```
 *
 * TypeORM has no transaction timer of its own: the port ignores `limits`, and the server's
 * `idle_in_transaction_session_timeout`, which twophase sets per transaction, ends a transaction
 * whose owner stopped.
 *
 * When the claimer's `pool` is the DataSource's own (`typeormPool(dataSource)`), the port's
 * `overPoolClient` lets the claimer run the claim as without a port and hand the handler an
 * `EntityManager` over the claim's own client (see {@link typeormTransactions}).
 */
// First: a missing client library is named before any module that needs it loads.
import { SUPPORTED_RANGE } from './typeorm-peer';
import { ConfigurationError, consoleWarnLogger, type Logger } from '../../../src';
import { checkKnownOptions, checkPeerVersion } from '../../../src/adapter-kit';
import { TransactionMisuseError } from '../errors';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import type { Pool, PoolClient } from 'pg';
import type { WrappedPoolClient, SqlRow, TransactionLimits, TransactionPort } from '../transaction-port';

export { SUPPORTED_RANGE };

/** Options of {@link typeormTransactions}. */
export interface TypeormTransactionsOptions {
  /** Where a version warning goes (`typeorm` outside ^1). Default: the core's `consoleWarnLogger`. */
  readonly logger?: Pick<Logger, 'warn'>;
}

/**
 * The transaction port on a TypeORM `DataSource`.
 * - `transaction(work)` is `dataSource.transaction((manager) => work(manager))`: TypeORM commits
 *   when `work` resolves and rolls back when it rejects; a failed COMMIT rejects with TypeORM's
 *   `QueryFailedError` (the server's error as its `driverError`).
 * - `query(manager, text, values)` is `manager.queryRunner.query(text, values, true)` (the
 *   structured result, whose `records` are the rows for every statement: TypeORM's plain
 *   `manager.query` returns `[rows, count]` for UPDATE and DELETE).
 * - `overPoolClient`: when the claimer's `pool` is the DataSource's own `pg` Pool
 *   ({@link typeormPool}), the claim runs as without a port (three round trips a message instead
 *   of six) and the handler gets the `EntityManager` of a query runner of this DataSource set over
 *   the claim's client, inside the transaction twophase began: TypeORM sends neither BEGIN nor
 *   COMMIT (`manager.transaction(…)` in the handler is a SAVEPOINT), and a COMMIT or ROLLBACK sent
 *   through it is refused with `TransactionMisuseError` (not wrapped in TypeORM's `QueryFailedError`).
 *   TypeORM's transaction events (`beforeTransactionStart` … `afterTransactionCommit`) do not fire
 *   for that transaction; its query events and logging do.
 * @param dataSource the application's DataSource (type `postgres`), initialized
 * @param options see {@link TypeormTransactionsOptions}
 * @throws ConfigurationError on an unknown option, or when `dataSource` has no `transaction` method
 */
export function typeormTransactions(dataSource: DataSource, options: TypeormTransactionsOptions = {}): TransactionPort<EntityManager> {
  const host = dataSource as unknown as { transaction?: unknown } | null;
  if (typeof host?.transaction !== 'function') {
    throw new ConfigurationError('typeormTransactions(dataSource): dataSource must be a TypeORM DataSource (it has no transaction method)');
  }
  checkKnownOptions('typeormTransactions options', options, ['logger']);
  checkPeerVersion('typeorm', SUPPORTED_RANGE, options.logger ?? consoleWarnLogger);
  return new TypeormTransactionPort(dataSource);
}

/**
 * The `pg` Pool a TypeORM DataSource of type `postgres` sends through (its driver's master pool).
 * Give it to the claimer (`new PostgresClaimer({ pool: typeormPool(dataSource), transactions })`)
 * so that the claim runs over the DataSource's own connections, as without a port.
 * @param dataSource the application's DataSource (type `postgres`), initialized
 * @throws ConfigurationError when `dataSource` is not initialized, or is not of type `postgres`
 */
export function typeormPool(dataSource: DataSource): Pool {
  const host = dataSource as unknown as { options?: { type?: unknown } } | null;
  if (host?.options?.type !== 'postgres') {
    throw new ConfigurationError(`typeormPool(dataSource): dataSource must be a TypeORM DataSource of type "postgres" (got type ${JSON.stringify(host?.options?.type)})`);
  }
  const master = masterPool(dataSource) as { connect?: unknown; totalCount?: unknown } | undefined;
  if (typeof master?.connect !== 'function' || typeof master.totalCount !== 'number') {
    throw new ConfigurationError('typeormPool(dataSource): the DataSource has no pg Pool yet; call it after `await dataSource.initialize()`');
  }
  return master as unknown as Pool;
}

/** The driver's master pool of an initialized DataSource, else undefined. */
function masterPool(dataSource: DataSource): unknown {
  const source = dataSource as unknown as { isInitialized?: unknown; driver?: { master?: unknown } } | null;
  return source?.isInitialized === true ? source.driver?.master : undefined;
}

/** The fields of TypeORM's PostgresQueryRunner that set it over a client in an open transaction. */
interface RunnerInternals {
  databaseConnection: unknown;
  isTransactionActive: boolean;
  transactionDepth: number;
}

class TypeormTransactionPort implements TransactionPort<EntityManager> {
  readonly name = 'typeorm';
  readonly overPoolClient: WrappedPoolClient<EntityManager>;

  constructor(private readonly dataSource: DataSource) {
    this.overPoolClient = {
      // Read at each claim: the pool exists once the DataSource is initialized, and a new one after a re-initialize.
      get pool(): unknown {
        return masterPool(dataSource);
      },
      wrap: (client: PoolClient) => overClient(dataSource.createQueryRunner('master'), client).manager,
    };
  }

  transaction<T>(work: (tx: EntityManager) => Promise<T>, _limits: TransactionLimits): Promise<T> {
    return this.dataSource.transaction((manager) => work(manager));
  }

  async query(tx: EntityManager, text: string, values: readonly unknown[]): Promise<readonly SqlRow[]> {
    const runner = tx.queryRunner;
    if (runner === undefined) {
      throw new ConfigurationError('typeorm port: the EntityManager has no query runner (it is not the manager of a dataSource.transaction)');
    }
    const result = await runner.query(text, [...values], true);
    return result.records as SqlRow[];
  }
}

/**
 * `runner`, not yet connected, set over `client` in the transaction twophase began: TypeORM's
 * `connect()` answers `client` and never borrows from the pool; depth 1, so a nested
 * `startTransaction` is a SAVEPOINT and `commitTransaction` at depth 1 sends a COMMIT, which the
 * guarded client refuses. Nothing is released to the pool by the runner (it never acquired).
 */
function overClient(runner: QueryRunner, client: PoolClient): QueryRunner {
  const internals = runner as unknown as RunnerInternals;
  if (typeof runner.connect !== 'function' || internals.transactionDepth !== 0 || runner.isTransactionActive !== false) {
    throw new ConfigurationError("typeorm port: this TypeORM's query runner is not a fresh TypeORM 1.x runner (connect, transactionDepth 0, no transaction); use a DataSource whose pool is not the claimer's");
  }
  internals.databaseConnection = client;
  internals.isTransactionActive = true;
  internals.transactionDepth = 1;
  // TypeORM wraps every driver error in its QueryFailedError (the original as `driverError`): a
  // refused BEGIN, COMMIT or ROLLBACK reaches the handler as twophase's own TransactionMisuseError,
  // as on the other paths, so the consumer dead-letters it at once instead of retrying it.
  const query = runner.query.bind(runner);
  runner.query = ((...args: Parameters<QueryRunner['query']>) =>
    query(...args).catch((error: unknown) => {
      const driverError = (error as { driverError?: unknown } | null)?.driverError;
      throw driverError instanceof TransactionMisuseError ? driverError : error;
    })) as QueryRunner['query'];
  return runner;
}
