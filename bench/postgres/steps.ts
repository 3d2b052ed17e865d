/**
 * What bounds the transactional inbox's throughput, per step (`npm run bench:postgres:steps`):
 * no broker, one process, `--count` keys at each concurrency, variants interleaved:
 *
 *   floor          one INSERT of the effect in its own transaction (autocommit): 1 round trip, 1 durable commit
 *   transactional  PostgresClaimer transactional: claim (attempt count auto-committed without a WAL
 *                  flush + BEGIN + limits + claim row), the same INSERT through the transaction,
 *                  commit (row completed + COMMIT + unlock): 3 round trips, 1 durable commit;
 *                  the commit through `twophase_complete` (migration 7, planned once per session)
 *   inline         the same with the completion sent as the inline statement (a second schema
 *                  without migration 7); the two inbox variants alternate their order every run
 *
 * Reports, per concurrency, msg/s of each and the mean wall time of each step (ms): the floor's
 * INSERT, and the inbox's claim, INSERT and commit, and this process's CPU per inbox message (µs). At concurrency 1 the steps are round trips
 * plus server work; their sum against the floor's one step is the ratio no client-side change can
 * beat while three round trips stay sequential. Writes bench/results/postgres-steps.json (or `--out`).
 *
 *   npx ts-node --transpile-only bench/postgres/steps.ts [--count 400] [--runs 3] [--out file.json]
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Pool, type PoolClient } from 'pg';
import { migrate, PostgresClaimer } from '../../adapters/postgres';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
};
const COUNT = Number(arg('count', '400'));
const RUNS = Number(arg('runs', '3'));
const OUT = arg('out', join(__dirname, '..', 'results', 'postgres-steps.json'));
const CONCURRENCY = [1, 8, 32];

interface Sample {
  floorMsgPerSec: number;
  inboxMsgPerSec: number;
  inlineMsgPerSec: number;
  inboxNodeCpuUs: number;
  inlineNodeCpuUs: number;
  inlineCommitMs: number;
  floorInsertMs: number;
  claimMs: number;
  insertMs: number;
  commitMs: number;
}

async function pooled(concurrency: number, work: (i: number) => Promise<void>): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < COUNT; i = next++) await work(i);
    }),
  );
  return performance.now() - started;
}

async function sample(pool: Pool, claimers: { fn: PostgresClaimer; inline: PostgresClaimer }, ledger: string, concurrency: number, tag: string, run: number): Promise<Sample> {
  const t = { floor: 0, claim: 0, insert: 0, commit: 0, inlineCommit: 0 };
  const floorMs = await pooled(concurrency, async (i) => {
    const a = performance.now();
    await pool.query(`INSERT INTO ${ledger} (key) VALUES ($1)`, [`${tag}-f${i}`]);
    t.floor += performance.now() - a;
  });
  const options = { leaseTtlMs: 30_000, doneTtlMs: 600_000 };
  // The inbox twice: completing through twophase_complete (migration 7) and through the inline
  // statement (a schema without it), in an order that flips every run.
  const inbox = async (inFunction: boolean): Promise<{ ms: number; cpuUs: number }> => {
    const claimer = inFunction ? claimers.fn : claimers.inline;
    const cpu = process.cpuUsage();
    const ms = await pooled(concurrency, async (i) => {
      const key = `${tag}-${inFunction ? 'k' : 'i'}${i}`;
      const a = performance.now();
      const claim = await claimer.claim(key, options);
      const b = performance.now();
      if (claim.state !== 'acquired') throw new Error(`unexpected ${claim.state}`);
      await (claim.receipt.transaction as PoolClient).query(`INSERT INTO ${ledger} (key) VALUES ($1)`, [key]);
      const c = performance.now();
      await claim.receipt.commit({ ok: true });
      if (inFunction) {
        t.claim += b - a;
        t.insert += c - b;
        t.commit += performance.now() - c;
      } else t.inlineCommit += performance.now() - c;
    });
    const used = process.cpuUsage(cpu);
    return { ms, cpuUs: (used.user + used.system) / COUNT };
  };
  const order = run % 2 === 0 ? [true, false] : [false, true];
  const results = new Map<boolean, { ms: number; cpuUs: number }>();
  for (const inFunction of order) results.set(inFunction, await inbox(inFunction));
  const fn = results.get(true)!;
  const inline = results.get(false)!;
  const ms = (x: number) => Math.round((x / COUNT) * 100) / 100;
  return {
    floorMsgPerSec: Math.round((COUNT / floorMs) * 1000),
    inboxMsgPerSec: Math.round((COUNT / fn.ms) * 1000),
    inlineMsgPerSec: Math.round((COUNT / inline.ms) * 1000),
    inboxNodeCpuUs: Math.round(fn.cpuUs),
    inlineNodeCpuUs: Math.round(inline.cpuUs),
    floorInsertMs: ms(t.floor),
    claimMs: ms(t.claim),
    insertMs: ms(t.insert),
    commitMs: ms(t.commit),
    inlineCommitMs: ms(t.inlineCommit),
  };
}

async function main(): Promise<void> {
  const pool = new Pool({ host: process.env.PGHOST ?? '127.0.0.1', port: Number(process.env.PGPORT ?? 5432), user: process.env.PGUSER ?? 'postgres', database: process.env.PGDATABASE ?? 'postgres', max: 40 });
  const schema = `tp_bench_steps_${process.pid}`;
  const inlineSchema = `${schema}_inline`;
  const ledger = `${schema}.ledger`;
  try {
    await migrate(pool, { schema });
    await pool.query(`CREATE TABLE ${ledger} (id bigserial PRIMARY KEY, key text NOT NULL)`);
    // The inline completion's claimer: a schema without migration 7 (its function dropped, its record removed).
    await migrate(pool, { schema: inlineSchema });
    await pool.query(`DROP FUNCTION ${inlineSchema}.twophase_complete; DELETE FROM ${inlineSchema}.twophase_migrations WHERE version = 7`);
    const claimers = { fn: new PostgresClaimer({ pool }, { schema, mode: 'transactional' }), inline: new PostgresClaimer({ pool }, { schema: inlineSchema, mode: 'transactional' }) };
    await claimers.fn.ready();
    await claimers.inline.ready();
    const samples = new Map<number, Sample[]>();
    for (let run = 0; run < RUNS; run++) {
      for (const concurrency of CONCURRENCY) {
        const s = await sample(pool, claimers, ledger, concurrency, `r${run}c${concurrency}`, run);
        console.log(JSON.stringify({ run, concurrency, ...s }));
        samples.set(concurrency, [...(samples.get(concurrency) ?? []), s]);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const rows = [...samples.entries()].map(([concurrency, runs]) => {
      const row: Record<string, number> = { concurrency };
      for (const field of Object.keys(runs[0]!) as (keyof Sample)[]) row[field] = median(runs.map((r) => r[field]));
      row.inboxVsFloor = median(runs.map((r) => Math.round((r.inboxMsgPerSec / r.floorMsgPerSec) * 100) / 100));
      row.inlineVsFloor = median(runs.map((r) => Math.round((r.inlineMsgPerSec / r.floorMsgPerSec) * 100) / 100));
      row.functionVsInline = median(runs.map((r) => Math.round((r.inboxMsgPerSec / r.inlineMsgPerSec) * 100) / 100));
      return row;
    });
    writeFileSync(OUT, `${JSON.stringify({ at: new Date().toISOString(), count: COUNT, runs: RUNS, rows }, null, 2)}\n`);
    console.log(JSON.stringify(rows));
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE; DROP SCHEMA IF EXISTS ${inlineSchema} CASCADE`).catch(() => undefined);
    await pool.end();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
