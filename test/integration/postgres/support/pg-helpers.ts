/**
 * Helpers of the PostgreSQL suites: a pool on the shared server (127.0.0.1:5432 unless PGHOST /
 * PGPORT / PGUSER / PGDATABASE say otherwise) and a fresh schema per test, dropped afterwards, so
 * suites running at the same time never see each other's rows.
 */
import { randomBytes } from 'node:crypto';
import { Pool, type PoolConfig } from 'pg';
import { migrate, type TenantsTable } from '../../../../adapters/postgres';

export function pgConfig(overrides: PoolConfig = {}): PoolConfig {
  return {
    host: process.env.PGHOST ?? '127.0.0.1',
    port: Number(process.env.PGPORT ?? 5432),
    user: process.env.PGUSER ?? 'postgres',
    database: process.env.PGDATABASE ?? 'postgres',
    max: 20,
    ...overrides,
  };
}

export function pgUrl(): string {
  const c = pgConfig();
  return `postgres://${c.user}@${c.host}:${c.port}/${c.database}`;
}

/** A unique schema name: lower case, starts with tp_. */
export function uniqueSchema(label: string): string {
  return `tp_${label}_${randomBytes(4).toString('hex')}`.toLowerCase();
}

export interface SchemaFixture {
  readonly pool: Pool;
  readonly schema: string;
  /** The tenants schema/table the tenant inbox references (created in its own schema). */
  readonly tenants: TenantsTable;
  cleanup(): Promise<void>;
}

/**
 * A pool, a fresh inbox schema (migrated unless `migrated: false`) and an application schema
 * with a `tenants (id text primary key)` table holding tenants `t1` and `t2`.
 */
export async function freshSchema(label: string, options: { migrated?: boolean; pool?: PoolConfig } = {}): Promise<SchemaFixture> {
  const pool = new Pool(pgConfig(options.pool));
  pool.on('error', () => undefined);
  const schema = uniqueSchema(label);
  const appSchema = `${schema}_app`;
  await pool.query(`CREATE SCHEMA ${appSchema}; CREATE TABLE ${appSchema}.tenants (id text PRIMARY KEY); INSERT INTO ${appSchema}.tenants VALUES ('t1'), ('t2')`);
  const tenants: TenantsTable = { schema: appSchema, table: 'tenants', column: 'id' };
  if (options.migrated !== false) await migrate(pool, { schema, tenants });
  return {
    pool,
    schema,
    tenants,
    cleanup: async () => {
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE; DROP SCHEMA IF EXISTS ${appSchema} CASCADE`).catch(() => undefined);
      await pool.end();
    },
  };
}
