/**
 * `twophase/postgres`: the PostgreSQL claimer (standalone, or the transactional inbox mode) on a
 * `pg` Pool the application owns, and the inbox migrations.
 *
 * ```ts
 * import { Pool } from 'pg';
 * import { migrate, PostgresClaimer } from 'twophase/postgres';
 * const pool = new Pool({ connectionString: process.env.DATABASE_URL });
 * await migrate(pool);
 * const claimer = new PostgresClaimer({ pool }, { mode: 'transactional' });
 * ```
 */
// First: a missing client library is named before any module that needs it loads.
import './peer';
export { PostgresClaimer } from './postgres-claimer';
export { TransactionReceipt } from './transaction-lease';
export type { TransactionPort, TransactionLimits, SqlRow, PoolClientTransactions, WrappedPoolClient, EnteredPoolClient, EnteredTransaction } from './transaction-port';
export { pgTransactions } from './pg-transactions';
export { portExecutor } from './port-executor';
export {
  POSTGRES_CLAIMER_DEFAULTS,
  type PostgresClaimerDependencies,
  type PostgresClaimerLogger,
  type PostgresClaimerMode,
  type TransactionBatch,
  type PostgresClaimerOptions,
  type ResolvedPostgresClaimerOptions,
} from './options';
export { migrate, type MigrateOptions, type MigrateReport, type MigrationEntry } from './migrate';
export { MIGRATIONS, type Migration, type MigrationContext, REQUIRED_PLATFORM_VERSION, REQUIRED_TENANT_VERSION, REQUIRED_OUTBOX_VERSION, REQUIRED_PORT_VERSION, OUTBOX_CHANNEL } from './migrations';
export { DEFAULT_SCHEMA, type TenantsTable, parseTenantsTable } from './identifiers';
export { SchemaMismatchError, TransactionAbortedError, TransactionMisuseError, toClaimerError } from './errors';
export { keyDigests, type KeyDigests } from './key-digest';
export { diagnoseKey, type DiagnoseOptions, type KeyDiagnosis, type PostgresQueryable, purgeExpired, type PurgeOptions, type PurgeReport } from './keys';
export { stageOutbox, transactionOutbox, type SqlExecutor, type StageOutboxOptions } from './outbox-staging';
export { PostgresOutboxStore, type PostgresOutboxStoreDependencies, type PostgresOutboxStoreOptions } from './outbox-store';
export { PostgresOutboxNotifier, type PostgresOutboxNotifierDependencies, type PostgresOutboxNotifierOptions } from './outbox-notifier';
export {
  outboxStatus,
  listOutbox,
  showOutbox,
  requeueOutbox,
  purgeOutbox,
  type OutboxSelection,
  type ListOutboxOptions,
  type OutboxListEntry,
  type OutboxMessageDetails,
  type DeadSelection,
  type DeadOperationReport,
} from './outbox-admin';
