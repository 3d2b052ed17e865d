/**
 * The effect ledger in PostgreSQL (127.0.0.1:5432 unless PGHOST/PGPORT/PGUSER/PGDATABASE say
 * otherwise; trust auth, database `test`).
 *
 * - `chaos_effects`: the handler's effect, one INSERT per handler run. **No unique constraint**,
 *   so a duplicated effect is a second row.
 * - `chaos_markers`: written after a claim's commit succeeded (the `committed` outcome).
 * - `chaos_outcomes`: every `lease_lost` and `commit_failed` outcome.
 * - `chaos_faults`: every fault the harness injected, with its time and target.
 * - `chaos_runs`: one row per stack run, with its verdict.
 * - `chaos_outbox_orders`: the outbox stacks' producer effect, committed in the staging
 *   transaction (a row here = the staged message committed).
 * - `chaos_outbox_applied`: the outbox stacks' downstream effect, in the consumer's inbox
 *   transaction, numbered in commit-free insertion order (`seq`) for the per-key order check.
 */
import { Pool, type PoolConfig } from 'pg';
import type { EffectRow, MarkerRow, OutcomeRow } from './verdict';

export function pgConfig(max: number): PoolConfig {
  return {
    host: process.env.PGHOST ?? '127.0.0.1',
    port: Number(process.env.PGPORT ?? 5432),
    user: process.env.PGUSER ?? 'postgres',
    database: process.env.PGDATABASE ?? 'test',
    max,
    idleTimeoutMillis: 10_000,
  };
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS chaos_effects (run_id text NOT NULL, key text NOT NULL, fence bigint NOT NULL, worker text NOT NULL, attempt int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE INDEX IF NOT EXISTS chaos_effects_run ON chaos_effects (run_id);
CREATE TABLE IF NOT EXISTS chaos_markers (run_id text NOT NULL, key text NOT NULL, fence bigint NOT NULL, worker text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE INDEX IF NOT EXISTS chaos_markers_run ON chaos_markers (run_id);
CREATE TABLE IF NOT EXISTS chaos_outcomes (run_id text NOT NULL, key text NOT NULL, fence bigint NOT NULL, worker text NOT NULL, kind text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE INDEX IF NOT EXISTS chaos_outcomes_run ON chaos_outcomes (run_id);
CREATE TABLE IF NOT EXISTS chaos_faults (run_id text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp(), elapsed_ms int NOT NULL, kind text NOT NULL, target text NOT NULL, detail text);
CREATE INDEX IF NOT EXISTS chaos_faults_run ON chaos_faults (run_id);
CREATE TABLE IF NOT EXISTS chaos_outbox_orders (run_id text NOT NULL, id text NOT NULL, grp text NOT NULL, n int NOT NULL);
CREATE INDEX IF NOT EXISTS chaos_outbox_orders_run ON chaos_outbox_orders (run_id);
CREATE TABLE IF NOT EXISTS chaos_outbox_applied (seq bigserial, run_id text NOT NULL, id text NOT NULL, grp text NOT NULL, n int NOT NULL);
CREATE INDEX IF NOT EXISTS chaos_outbox_applied_run ON chaos_outbox_applied (run_id);
CREATE TABLE IF NOT EXISTS chaos_runs (run_id text PRIMARY KEY, stack text NOT NULL, scenario text NOT NULL, profile text NOT NULL, seed bigint NOT NULL, started_at timestamptz NOT NULL DEFAULT clock_timestamp(), verdict jsonb);
`;

/** Creates the tables (idempotent) and forgets runs older than a week. */
export async function prepareLedger(pool: Pool): Promise<void> {
  await pool.query(SCHEMA);
  const old = `SELECT run_id FROM chaos_runs WHERE started_at < now() - interval '7 days'`;
  for (const table of ['chaos_effects', 'chaos_markers', 'chaos_outcomes', 'chaos_faults', 'chaos_outbox_orders', 'chaos_outbox_applied']) {
    await pool.query(`DELETE FROM ${table} WHERE run_id IN (${old})`);
  }
  await pool.query(`DELETE FROM chaos_runs WHERE started_at < now() - interval '7 days'`);
}

/** What a worker writes. One pool per process. */
export class LedgerWriter {
  readonly pool: Pool;
  private readonly ownsPool: boolean;

  /** @param pool a pool to share (the writer then never ends it), or the size of its own pool */
  constructor(
    readonly runId: string,
    readonly worker: string,
    pool: Pool | number = 6,
  ) {
    this.ownsPool = typeof pool === 'number';
    this.pool = typeof pool === 'number' ? new Pool(pgConfig(pool)) : pool;
    this.pool.on('error', () => undefined);
  }

  /** A writer for another worker on the same pool. */
  forWorker(worker: string): LedgerWriter {
    return new LedgerWriter(this.runId, worker, this.pool);
  }

  /**
   * The effect: a plain INSERT, no constraint; through `via` (the claim's transaction in the
   * PostgreSQL inbox) when given, else on the writer's pool (auto-committed).
   */
  async effect(key: string, fence: number, attempt: number, via: { query(text: string, values: unknown[]): Promise<unknown> } = this.pool): Promise<void> {
    await via.query('INSERT INTO chaos_effects (run_id, key, fence, worker, attempt) VALUES ($1, $2, $3, $4, $5)', [this.runId, key, fence, this.worker, attempt]);
  }

  async marker(key: string, fence: number): Promise<void> {
    await this.pool.query('INSERT INTO chaos_markers (run_id, key, fence, worker) VALUES ($1, $2, $3, $4)', [this.runId, key, fence, this.worker]);
  }

  async outcome(key: string, fence: number, kind: 'lease_lost' | 'commit_failed'): Promise<void> {
    await this.pool.query('INSERT INTO chaos_outcomes (run_id, key, fence, worker, kind) VALUES ($1, $2, $3, $4, $5)', [this.runId, key, fence, this.worker, kind]);
  }

  async fault(elapsedMs: number, kind: string, target: string, detail?: string): Promise<void> {
    await logFault(this.pool, this.runId, elapsedMs, kind, target, detail);
  }

  async close(): Promise<void> {
    if (this.ownsPool) await this.pool.end().catch(() => undefined);
  }
}

export async function logFault(pool: Pool, runId: string, elapsedMs: number, kind: string, target: string, detail?: string): Promise<void> {
  await pool.query('INSERT INTO chaos_faults (run_id, elapsed_ms, kind, target, detail) VALUES ($1, $2, $3, $4, $5)', [runId, Math.round(elapsedMs), kind, target, detail ?? null]);
}

/** Everything the verdict needs from the ledger of one run. */
export async function readLedger(pool: Pool, runId: string): Promise<{ effects: EffectRow[]; markers: MarkerRow[]; outcomes: OutcomeRow[] }> {
  const effects = await pool.query<{ key: string; fence: string; worker: string }>('SELECT key, fence, worker FROM chaos_effects WHERE run_id = $1 ORDER BY at', [runId]);
  const markers = await pool.query<{ key: string; fence: string }>('SELECT key, fence FROM chaos_markers WHERE run_id = $1', [runId]);
  const outcomes = await pool.query<{ key: string; fence: string; kind: 'lease_lost' | 'commit_failed' }>('SELECT key, fence, kind FROM chaos_outcomes WHERE run_id = $1', [runId]);
  return {
    effects: effects.rows.map((r) => ({ key: r.key, fence: Number(r.fence), worker: r.worker })),
    markers: markers.rows.map((r) => ({ key: r.key, fence: Number(r.fence) })),
    outcomes: outcomes.rows.map((r) => ({ key: r.key, fence: Number(r.fence), kind: r.kind })),
  };
}

/** Keys with at least one effect: progress while the run drains. */
export async function countEffectKeys(pool: Pool, runId: string): Promise<number> {
  const r = await pool.query<{ n: string }>('SELECT count(DISTINCT key) AS n FROM chaos_effects WHERE run_id = $1', [runId]);
  return Number(r.rows[0]!.n);
}

/** Faults that fired in a run, by kind (arming a fault in a worker is not counted, its firing is). */
export async function readFaultCounts(pool: Pool, runId: string): Promise<Record<string, number>> {
  const r = await pool.query<{ kind: string; n: string }>("SELECT kind, count(*) AS n FROM chaos_faults WHERE run_id = $1 AND kind NOT LIKE 'arm:%' GROUP BY kind ORDER BY kind", [runId]);
  return Object.fromEntries(r.rows.map((row) => [row.kind, Number(row.n)]));
}
