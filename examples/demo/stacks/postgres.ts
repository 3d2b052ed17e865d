/**
 * The demo's PostgreSQL transactional inbox (twophase/postgres, mode `transactional`): a schema of
 * its own, migrated at the start and dropped at the end, holding the inbox tables and the demo's
 * effect table. Each worker gets its own pool and PostgresClaimer, as a separate process would.
 * The handler writes its effect row through `ctx.transaction`, so the row commits with the claim
 * or not at all. "Crashing" a worker ends its database sessions (`pg_terminate_backend`), as a
 * killed process's dropped connections do: PostgreSQL rolls back every transaction the worker had
 * open, effect rows with their claims.
 *
 * TWOPHASE_DATABASE_URL (or DATABASE_URL; default postgres://postgres@127.0.0.1:5432/postgres)
 * points elsewhere (../../shared/env.ts).
 */
import { Pool } from 'pg';
import { migrate, PostgresClaimer } from '../../../adapters/postgres';
import { type Claimer, silentLogger } from '../../../src';
import type { EffectRow, WorkerClaimer } from '../stack';

/** A transaction's client, as far as the demo writes through it. */
interface Queryable {
  query(sql: string, values: readonly unknown[]): Promise<unknown>;
}

export interface InboxStore {
  /** A claimer on a pool of its own for `worker`. */
  workerClaimer(worker: number): WorkerClaimer;
  /** Writes one effect row through the claim's transaction. */
  recordEffect(transaction: unknown, key: string, worker: number, fencingToken: number): Promise<void>;
  /** Every committed effect row. */
  effects(): Promise<EffectRow[]>;
  close(): Promise<void>;
}

/**
 * Creates and migrates the demo's schema `twophase_demo_<run>`.
 * @param connectionsPerWorker pool size of each worker: in transactional mode each delivery in
 *   flight holds one client for its whole run, so above the consumer's concurrency
 */
export async function postgresInbox(run: string, url: string, connectionsPerWorker: number): Promise<InboxStore> {
  const schema = `twophase_demo_${run.replace(/[^a-z0-9]/gi, '').toLowerCase()}`;
  const table = `${schema}.demo_effects`;
  const admin = new Pool({ connectionString: url, max: 2, application_name: `${schema}-admin` });
  admin.on('error', () => undefined);
  await migrate(admin, { schema });
  await admin.query(`CREATE TABLE ${table} (key text NOT NULL, worker int NOT NULL, fencing_token bigint NOT NULL)`);
  const pools = new Map<number, Pool>();
  const appName = (worker: number) => `${schema}-w${worker}`;
  return {
    workerClaimer(worker: number): WorkerClaimer {
      const pool = new Pool({ connectionString: url, max: connectionsPerWorker, application_name: appName(worker) });
      pool.on('error', () => undefined); // an idle client whose session a crash ended
      // A killed process never sees its sessions end; this one does, on clients it may hold
      // between statements: their 'error' is the simulated crash, not a failure to report.
      pool.on('connect', (client) => client.on('error', () => undefined));
      pools.set(worker, pool);
      const claimer: Claimer = new PostgresClaimer({ pool, logger: silentLogger }, { schema, mode: 'transactional' });
      return {
        claimer,
        crash: async () => {
          await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [appName(worker)]);
          pools.delete(worker);
          void pool.end().catch(() => undefined);
        },
      };
    },
    async recordEffect(transaction: unknown, key: string, worker: number, fencingToken: number): Promise<void> {
      await (transaction as Queryable).query(`INSERT INTO ${table} (key, worker, fencing_token) VALUES ($1, $2, $3)`, [key, worker, fencingToken]);
    },
    async effects(): Promise<EffectRow[]> {
      const { rows } = await admin.query<{ key: string; worker: number; fencing_token: string }>(`SELECT key, worker, fencing_token FROM ${table} ORDER BY fencing_token`);
      return rows.map((r) => ({ key: r.key, worker: r.worker, fencingToken: Number(r.fencing_token) }));
    },
    async close(): Promise<void> {
      await Promise.all([...pools.values()].map((p) => p.end().catch(() => undefined)));
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE $1 AND pid <> pg_backend_pid()', [`${schema}-w%`]).catch(() => undefined);
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
      await admin.end();
    },
  };
}
