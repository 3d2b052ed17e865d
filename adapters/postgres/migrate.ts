/**
 * Applies the inbox migrations (see `migrations/`) to a database: forward only, each version
 * once, all pending ones in one transaction under an advisory lock, so two deployments running it
 * at once apply each version once. A dry run returns the SQL it would run and changes nothing.
 */
import type { ClientBase, Pool, PoolClient } from 'pg';
import { ConfigurationError } from '../../src';
import { toClaimerError } from './errors';
import { DEFAULT_SCHEMA, quoteIdentifier, type TenantsTable } from './identifiers';
import { type MigrationContext, MIGRATIONS } from './migrations';

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /** Schema of the inbox tables; created when missing. Default `twophase`. */
  readonly schema?: string;
  /**
   * The application's tenants table. When given, the tenant inbox (migration 2) is created with a
   * foreign key to it; when not, migration 2 stays pending and is reported as skipped.
   */
  readonly tenants?: TenantsTable;
  /** List what would be applied and its SQL; change nothing. Default false. */
  readonly dryRun?: boolean;
}

/** One migration in a {@link MigrateReport}. */
export interface MigrationEntry {
  readonly version: number;
  readonly name: string;
}

/** What {@link migrate} did (or, in a dry run, would do). Stable JSON for the CLI. */
export interface MigrateReport {
  readonly schema: string;
  readonly dryRun: boolean;
  /** Versions found already applied before this run. */
  readonly alreadyApplied: readonly number[];
  /** Applied by this run (dry run: would be applied). */
  readonly applied: readonly MigrationEntry[];
  /** Pending but not applied, with the reason (the tenant inbox without `tenants`). */
  readonly skipped: readonly (MigrationEntry & { readonly reason: string })[];
  /** The SQL of `applied`, in order. */
  readonly sql: readonly string[];
}

const LOCK_NAMESPACE = 'twophase.migrate:';

/**
 * Brings `schema` up to the newest migration this version ships.
 * Safe to repeat: a second run applies nothing.
 * @param db a Pool (one client is borrowed and returned) or a connected client
 * @throws ConfigurationError for an invalid name, or a tenants table or column that does not exist
 * @throws ClaimerUnavailableError when PostgreSQL fails; nothing was applied (one transaction)
 */
export async function migrate(db: Pool | ClientBase, options: MigrateOptions = {}): Promise<MigrateReport> {
  const schemaName = options.schema ?? DEFAULT_SCHEMA;
  const schema = quoteIdentifier('schema', schemaName);
  const dryRun = options.dryRun === true;
  const client: ClientBase = isPool(db) ? await db.connect().catch((error: unknown) => Promise.reject(toClaimerError(error, 'migrate'))) : db;
  let began = false;
  try {
    await client.query('BEGIN');
    began = true;
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [LOCK_NAMESPACE + schemaName]);
    const context: MigrationContext = { schema, schemaName, ...(options.tenants ? { tenants: await resolveTenants(client, options.tenants) } : {}) };
    const table = `${schema}.twophase_migrations`;
    const exists = (await client.query<{ r: string | null }>('SELECT to_regclass($1) AS r', [`${schema}.twophase_migrations`])).rows[0]?.r;
    const alreadyApplied = exists ? (await client.query<{ version: number }>(`SELECT version FROM ${table} ORDER BY version`)).rows.map((r) => r.version) : [];
    const applied: MigrationEntry[] = [];
    const skipped: (MigrationEntry & { reason: string })[] = [];
    const sql: string[] = [];
    if (!exists) {
      sql.push(
        `CREATE SCHEMA IF NOT EXISTS ${schema};\nCREATE TABLE IF NOT EXISTS ${table} (\n  version integer PRIMARY KEY CHECK (version > 0),\n  name text NOT NULL,\n  applied_at timestamptz NOT NULL DEFAULT clock_timestamp()\n);`,
      );
      if (!dryRun) await client.query(sql[0]!);
    }
    for (const migration of MIGRATIONS) {
      if (alreadyApplied.includes(migration.version)) continue;
      const entry = { version: migration.version, name: migration.name };
      if (migration.needsTenants && !context.tenants) {
        skipped.push({ ...entry, reason: 'needs the tenants table (--tenants-table / tenants option)' });
        continue;
      }
      const text = migration.sql(context);
      sql.push(text);
      applied.push(entry);
      if (!dryRun) {
        await client.query(text);
        await client.query(`INSERT INTO ${table} (version, name) VALUES ($1, $2)`, [migration.version, migration.name]);
      }
    }
    await client.query(dryRun ? 'ROLLBACK' : 'COMMIT');
    began = false;
    return { schema: schemaName, dryRun, alreadyApplied, applied, skipped, sql };
  } catch (error) {
    if (began) await client.query('ROLLBACK').catch(() => undefined);
    throw toClaimerError(error, 'migrate');
  } finally {
    if (isPool(db)) (client as PoolClient).release();
  }
}

async function resolveTenants(client: ClientBase, tenants: TenantsTable): Promise<NonNullable<MigrationContext['tenants']>> {
  const table = `${quoteIdentifier('tenants.schema', tenants.schema ?? 'public')}.${quoteIdentifier('tenants.table', tenants.table)}`;
  const columnName = tenants.column ?? 'id';
  const column = quoteIdentifier('tenants.column', columnName);
  const found = await client.query<{ type: string; key: boolean }>(
    `SELECT format_type(a.atttypid, a.atttypmod) AS type,
            EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisunique AND i.indnkeyatts = 1 AND i.indkey[0] = a.attnum) AS key
       FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attname = $2 AND NOT a.attisdropped AND a.attnum > 0`,
    [table, columnName],
  );
  const row = found.rows[0];
  if (!row) throw new ConfigurationError(`tenants table ${table} with column ${column} does not exist`);
  if (!row.key) throw new ConfigurationError(`tenants column ${table}.${column} is not a primary key or unique on its own; a foreign key needs one`);
  return { table, column, type: row.type };
}

function isPool(db: Pool | ClientBase): db is Pool {
  return typeof (db as Pool).totalCount === 'number';
}
