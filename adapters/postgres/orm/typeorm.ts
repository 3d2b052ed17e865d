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
 */
// First: a missing client library is named before any module that needs it loads.
import { SUPPORTED_RANGE } from './typeorm-peer';
import { ConfigurationError, consoleWarnLogger, type Logger } from '../../../src';
import { checkKnownOptions, checkPeerVersion } from '../../../src/adapter-kit';
import type { DataSource, EntityManager } from 'typeorm';
import type { SqlRow, TransactionLimits, TransactionPort } from '../transaction-port';

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

class TypeormTransactionPort implements TransactionPort<EntityManager> {
  readonly name = 'typeorm';

  constructor(private readonly dataSource: DataSource) {}

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
