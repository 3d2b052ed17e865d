/**
 * RabbitMQ batch mode of the PostgreSQL inbox against its floors (`npm run bench:postgres:rabbit-batch`).
 * Each variant drains `count` pre-filled messages (unique keys) and writes one ledger row per
 * message; the variants are interleaved `--runs` times (the order rotates by one each run) at each
 * prefetch of `--prefetch` (default 32,100), medians reported:
 *
 *   floor        raw amqplib + one INSERT of the effect in its own transaction (autocommit), then ack
 *   floor-batch  raw amqplib + the least a design that shares one transaction per claim window can
 *                do, with no SDK (bench/postgres/floor-batch.ts): BEGIN, each delivery's effect
 *                INSERT, one multi-row INSERT of the window's claim rows and COMMIT, then the acks
 *   batch        twophase + PostgresClaimer transactional, `transactionBatch: 'per-chunk'`,
 *                RabbitMqSource `batchClaims` (window of one event-loop turn), ConsumerBase
 *                concurrency = prefetch
 *   batch@base   the same, with the SDK loaded from `--baseline DIR` (another checkout, e.g. the
 *                main branch): old and new code measured in the same minutes
 *
 * Reports msg/s, this process's CPU per message (µs), the local PostgreSQL server's CPU per message
 * (µs, from /proc, over the whole measure: start and stop included), PostgreSQL round trips and statements per
 * message (every `pg` Client query call counted; a simple query of several statements counts each),
 * and for the batch variants the mean window size (deliveries / claim batches).
 * Not a test: nothing fails on a number. Writes bench/results/rabbit-batch.json (or `--out`).
 *
 *   npx ts-node --transpile-only bench/postgres/rabbit-batch.ts [--count 5000] [--runs 3]
 *     [--prefetch 32,100] [--variants floor,floor-batch,batch,batch@base] [--baseline /path/to/checkout] [--out file.json]
 * PGHOST / PGPORT / PGDATABASE / PGUSER select the server (default 127.0.0.1:5432, postgres).
 */
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import { join, resolve as resolvePath } from 'node:path';
import { performance } from 'node:perf_hooks';
import amqp from 'amqplib';
import { runFloorBatch } from './floor-batch';
import pg, { Pool, type PoolClient } from 'pg';
import { AMQP_URL, BENCH_DELAY_TIERS_MS, declareQueue, deleteTopology, fill } from '../rabbitmq/broker';
import { postgresServerCpuUs } from '../cpu';

interface Measured {
  readonly elapsedMs: number;
  readonly cpuUs: number;
  /** The kernel's share of cpuUs (socket writes on loopback run the receiving side's TCP work too). */
  readonly systemUs: number;
  readonly batches?: number;
}

interface Row {
  readonly variant: string;
  readonly prefetch: number;
  readonly msgPerSec: number;
  readonly cpuUsPerMsg: number;
  readonly systemUsPerMsg: number;
  readonly roundTripsPerMsg: number;
  readonly statementsPerMsg: number;
  /** The local PostgreSQL server's CPU over the whole measure (start and stop included), µs per message. */
  readonly pgCpuUsPerMsg?: number;
  readonly pgWritesPerMsg: number;
  readonly amqpWritesPerMsg: number;
  readonly meanWindow?: number;
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const COUNT = Number(arg('--count') ?? 5000);
const RUNS = Number(arg('--runs') ?? 3);
const PREFETCHES = (arg('--prefetch') ?? '32,100').split(',').map(Number);
const BASELINE = arg('--baseline');
const VARIANTS = (arg('--variants') ?? (BASELINE ? 'floor,floor-batch,batch,batch@base' : 'floor,floor-batch,batch')).split(',');
const OUT = arg('--out') ?? join(__dirname, '..', 'results', 'rabbit-batch.json');
for (const v of VARIANTS) if (!['floor', 'floor-batch', 'batch', 'batch@base'].includes(v)) throw new Error(`unknown variant ${v}`);
if (VARIANTS.includes('batch@base') && !BASELINE) throw new Error('batch@base needs --baseline DIR');

/**
 * Statements of a simple query: the non-blank pieces between semicolons outside single quotes
 * (at least one). One pass over the text: the count costs little beside the work it measures.
 */
function statementCount(text: string): number {
  let count = 0;
  let blank = true;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (quoted) {
      if (c === 39) quoted = false; // '' inside a literal ends it and opens the next: the same
    } else if (c === 39) {
      quoted = true;
      blank = false;
    } else if (c === 59) {
      if (!blank) count++;
      blank = true;
    } else if (blank && c !== 32 && c !== 10 && c !== 13 && c !== 9) blank = false;
  }
  if (!blank) count++;
  return count || 1;
}

/** Counts every query call of every pg Client (both SDK copies share the one `pg` module). */
const counter = { roundTrips: 0, statements: 0 };
const originalQuery = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  counter.roundTrips++;
  const first = args[0] as string | { text?: string } | undefined;
  const text = typeof first === 'string' ? first : (first?.text ?? '');
  counter.statements += statementCount(text);
  return (originalQuery as (...a: unknown[]) => unknown).apply(this, args);
} as typeof pg.Client.prototype.query;

/** Socket writes by remote port (writes the kernel sees: `write` and `writev` calls of net.Socket). */
const socketWrites = new Map<number, number>();
for (const method of ['_write', '_writev'] as const) {
  const original = net.Socket.prototype[method] as (...a: unknown[]) => unknown;
  (net.Socket.prototype as unknown as Record<string, unknown>)[method] = function (this: net.Socket, ...args: unknown[]) {
    const port = this.remotePort ?? 0;
    socketWrites.set(port, (socketWrites.get(port) ?? 0) + 1);
    return original.apply(this, args);
  };
}

/** The SDK's entry points, from this checkout or from the baseline. */
interface Sdk {
  readonly src: typeof import('../../src');
  readonly postgres: typeof import('../../adapters/postgres');
  readonly rabbitmq: typeof import('../../adapters/rabbitmq');
}

function loadSdk(root: string): Sdk {
  /* eslint-disable @typescript-eslint/no-require-imports */
  return {
    src: require(join(root, 'src')) as Sdk['src'],
    postgres: require(join(root, 'adapters', 'postgres')) as Sdk['postgres'],
    rabbitmq: require(join(root, 'adapters', 'rabbitmq')) as Sdk['rabbitmq'],
  };
  /* eslint-enable @typescript-eslint/no-require-imports */
}

async function runFloor(queue: string, pool: Pool, ledger: string, prefetch: number): Promise<Measured> {
  const model = await amqp.connect(AMQP_URL);
  const ch = await model.createChannel();
  await ch.prefetch(prefetch, false);
  let seen = 0;
  let first = 0;
  let cpu = process.cpuUsage();
  const measured = await new Promise<Measured>((resolve) => {
    void ch.consume(queue, (m) => {
      if (!m) return;
      if (first === 0) {
        first = performance.now();
        cpu = process.cpuUsage();
      }
      void pool.query(`INSERT INTO ${ledger} (key) VALUES ($1)`, [String(m.properties.headers?.['idempotency-key'])]).then(() => {
        ch.ack(m);
        if (++seen === COUNT) {
          const d = process.cpuUsage(cpu);
          resolve({ elapsedMs: performance.now() - first, cpuUs: d.user + d.system, systemUs: d.system });
        }
      });
    });
  });
  await model.close();
  return measured;
}

async function runBatch(sdk: Sdk, queue: string, pool: Pool, schema: string, ledger: string, prefetch: number): Promise<Measured> {
  const { ConsumerBase, ack, silentLogger } = sdk.src;
  let first = 0;
  let cpu = process.cpuUsage();
  class LedgerConsumer extends ConsumerBase<Buffer, PoolClient | undefined> {
    protected override decode(raw: Buffer): Buffer {
      return raw;
    }
    async handle(message: { key: string }, ctx: { transaction: PoolClient | undefined }) {
      if (first === 0) {
        first = performance.now();
        cpu = process.cpuUsage();
      }
      await ctx.transaction!.query(`INSERT INTO ${ledger} (key) VALUES ($1)`, [message.key]);
      return ack();
    }
  }
  const claimer = new sdk.postgres.PostgresClaimer({ pool }, { schema, mode: 'transactional', transactionBatch: 'per-chunk' });
  const source = new sdk.rabbitmq.RabbitMqSource({ url: AMQP_URL, queue, delayTiersMs: BENCH_DELAY_TIERS_MS, logger: silentLogger, batchClaims: true, batchWindowMs: 0 });
  const consumer = new LedgerConsumer({ name: 'bench', claimer, source, concurrency: prefetch, leaseTtlMs: 30_000, doneTtlMs: 600_000, logger: silentLogger, deployment: { replicas: 1 } });
  await consumer.start();
  await new Promise<void>((resolve) => {
    const poll = setInterval(() => {
      if (source.stats.acks >= COUNT) {
        clearInterval(poll);
        resolve();
      }
    }, 1);
  });
  const d = process.cpuUsage(cpu);
  const stats = source.stats;
  const measured = { elapsedMs: performance.now() - first, cpuUs: d.user + d.system, systemUs: d.system, batches: stats.claimBatches };
  if (stats.requeues.busy + stats.requeues.retry + stats.requeues.claimer_unavailable + stats.rejects > 0) throw new Error(`run not clean: ${JSON.stringify(stats)}`);
  await consumer.stop();
  return measured;
}

async function main(): Promise<void> {
  const pgConfig = { host: process.env.PGHOST ?? '127.0.0.1', port: Number(process.env.PGPORT ?? 5432), user: process.env.PGUSER ?? 'postgres', database: process.env.PGDATABASE ?? 'postgres' };
  // Idle clients stay connected (idleTimeoutMillis 0): a backend that exits takes its CPU out of
  // the server's /proc counters, which made the PostgreSQL CPU of a variant negative.
  const pool = new Pool({ ...pgConfig, max: Math.max(...PREFETCHES) + 8, idleTimeoutMillis: 0 });
  const admin = await amqp.connect(AMQP_URL);
  const schema = `tp_rbatch_${process.pid}`;
  const baseSchema = `${schema}_base`;
  const ledger = `${schema}.ledger`;
  const claims = `${schema}.claims`;
  const here = loadSdk(resolvePath(__dirname, '..', '..'));
  const base = BASELINE ? loadSdk(resolvePath(BASELINE)) : undefined;
  const samples = new Map<string, Row[]>();
  try {
    await here.postgres.migrate(pool, { schema });
    if (base) await base.postgres.migrate(pool, { schema: baseSchema });
    await pool.query(`CREATE TABLE ${ledger} (id bigserial PRIMARY KEY, key text NOT NULL)`);
    await pool.query(`CREATE TABLE ${claims} (key text PRIMARY KEY, status text NOT NULL, created_at timestamptz NOT NULL DEFAULT clock_timestamp())`);
    const variants: [string, (queue: string, prefetch: number) => Promise<Measured>][] = [
      ['floor', (queue, prefetch) => runFloor(queue, pool, ledger, prefetch)],
      ['floor-batch', (queue, prefetch) => runFloorBatch(queue, pool, ledger, claims, prefetch, COUNT)],
      ['batch', (queue, prefetch) => runBatch(here, queue, pool, schema, ledger, prefetch)],
      ['batch@base', (queue, prefetch) => runBatch(base!, queue, pool, baseSchema, ledger, prefetch)],
    ];
    const selected = variants.filter(([name]) => VARIANTS.includes(name));
    for (let run = 0; run < RUNS; run++) {
      for (const prefetch of PREFETCHES) {
        const order = selected.map((_, i) => selected[(i + run) % selected.length]!);
        for (const [variant, measure] of order) {
          await new Promise((r) => setTimeout(r, 500));
          await pool.query(`TRUNCATE ${ledger}, ${claims}; TRUNCATE ${schema}.twophase_inbox, ${schema}.twophase_attempts${base ? `; TRUNCATE ${baseSchema}.twophase_inbox, ${baseSchema}.twophase_attempts` : ''}`);
          const queue = `twophase-bench-rbatch-${process.pid}-${run}-${prefetch}-${variant}`;
          await declareQueue(admin, queue);
          await fill(admin, queue, COUNT, 64, queue);
          const before = { ...counter };
          const writesBefore = new Map(socketWrites);
          const startUs = Number(process.hrtime.bigint() / 1000n);
          const pgCpuBefore = postgresServerCpuUs(pgConfig.port);
          const m = await measure(queue, prefetch);
          const pgCpuAfter = postgresServerCpuUs(pgConfig.port);
          const endUs = Number(process.hrtime.bigint() / 1000n);
          const roundTrips = counter.roundTrips - before.roundTrips;
          const statements = counter.statements - before.statements;
          const writesPerMsg = (port: number) => Math.round((((socketWrites.get(port) ?? 0) - (writesBefore.get(port) ?? 0)) / COUNT) * 100) / 100;
          await deleteTopology(admin, queue);
          const row: Row = {
            variant,
            prefetch,
            msgPerSec: Math.round((COUNT / m.elapsedMs) * 1000),
            cpuUsPerMsg: Math.round(m.cpuUs / COUNT),
            systemUsPerMsg: Math.round(m.systemUs / COUNT),
            roundTripsPerMsg: Math.round((roundTrips / COUNT) * 100) / 100,
            statementsPerMsg: Math.round((statements / COUNT) * 100) / 100,
            ...(pgCpuBefore !== undefined && pgCpuAfter !== undefined ? { pgCpuUsPerMsg: Math.round((pgCpuAfter - pgCpuBefore) / COUNT) } : {}),
            pgWritesPerMsg: writesPerMsg(pgConfig.port),
            amqpWritesPerMsg: writesPerMsg(Number(new URL(AMQP_URL).port || 5672)),
            ...(m.batches ? { meanWindow: Math.round((COUNT / m.batches) * 10) / 10 } : {}),
          };
          // The hrtime span (µs) of the measure, to cut a --cpu-prof profile to it.
          console.log(JSON.stringify({ run, ...row, span: [startUs, endUs] }));
          const key = `${variant}@${prefetch}`;
          samples.set(key, [...(samples.get(key) ?? []), row]);
        }
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const rows = [...samples.values()].map((rs) => ({
      variant: rs[0]!.variant,
      prefetch: rs[0]!.prefetch,
      runs: rs.length,
      msgPerSec: median(rs.map((r) => r.msgPerSec)),
      cpuUsPerMsg: median(rs.map((r) => r.cpuUsPerMsg)),
      systemUsPerMsg: median(rs.map((r) => r.systemUsPerMsg)),
      roundTripsPerMsg: median(rs.map((r) => r.roundTripsPerMsg)),
      statementsPerMsg: median(rs.map((r) => r.statementsPerMsg)),
      ...(rs[0]!.pgCpuUsPerMsg !== undefined ? { pgCpuUsPerMsg: median(rs.map((r) => r.pgCpuUsPerMsg!)) } : {}),
      pgWritesPerMsg: median(rs.map((r) => r.pgWritesPerMsg)),
      amqpWritesPerMsg: median(rs.map((r) => r.amqpWritesPerMsg)),
      ...(rs[0]!.meanWindow !== undefined ? { meanWindow: median(rs.map((r) => r.meanWindow!)) } : {}),
    }));
    // Ratios to the floor of the same prefetch: the median over runs of each run's ratio.
    const ratios: Record<string, number> = {};
    for (const prefetch of PREFETCHES) {
      const floor = samples.get(`floor@${prefetch}`);
      for (const v of VARIANTS.filter((x) => x !== 'floor')) {
        const rs = samples.get(`${v}@${prefetch}`);
        if (!floor || !rs) continue;
        ratios[`${v}/floor@${prefetch}`] = Math.round(median(rs.map((r, i) => r.msgPerSec / floor[i]!.msgPerSec)) * 100) / 100;
        const fb = samples.get(`floor-batch@${prefetch}`);
        if (fb && v.startsWith('batch')) ratios[`${v}/floor-batch@${prefetch}`] = Math.round(median(rs.map((r, i) => r.msgPerSec / fb[i]!.msgPerSec)) * 100) / 100;
      }
    }
    const report = { at: new Date().toISOString(), count: COUNT, runs: RUNS, rows, ratios };
    writeFileSync(OUT, `${JSON.stringify(report, null, 2)}\n`);
    console.log(JSON.stringify({ rows, ratios }, null, 1));
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE; DROP SCHEMA IF EXISTS ${baseSchema} CASCADE`).catch(() => undefined);
    await pool.end();
    await admin.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
