/**
 * Per-message cost of twophase's claim + commit against the Powertools for AWS Lambda idempotency
 * utility (`@aws-lambda-powertools/idempotency` 2.35.0, `CachePersistenceLayer` over
 * `@redis/client`), on the same Redis, both wrapping the same trivial function:
 *
 *   twophase     RedisClaimer.claim(key) → fn(event) → receipt.commit(result)
 *   powertools   makeIdempotent(fn, { persistenceStore: CachePersistenceLayer, config }) called
 *                with a registered Lambda context whose getRemainingTimeInMillis() equals the
 *                lease (so an in-flight record expires like a twophase lease; without a context
 *                Powertools treats an overlapping call as abandoned and runs it again)
 *
 * Two paths: `first` (a new key: the function runs, the result is stored) and `duplicate` (the
 * same keys again: the stored result is returned, the function does not run). Measured at 1 and
 * 64 calls in flight: per-call latency (p50, p99, µs) and calls per second; and the Redis
 * commands per call (INFO commandstats). Both run against one private redis-server started for
 * the comparison (same binary as 127.0.0.1:6379), so other work on the shared Redis cannot skew
 * the counts. Implementations alternate within each round; medians over the rounds.
 *
 *   npx ts-node --transpile-only bench/powertools/compare.ts [--keys 5000] [--rounds 3]
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import { createClient } from '@redis/client';
import Redis from 'ioredis';
import { RedisClaimer } from '../../adapters/redis';
import { type JsonValue, silentLogger } from '../../src';
import { RedisServerProcess } from '../../test/integration/redis/support/redis-process';

export const LEASE_TTL_MS = 30_000;
const DONE_TTL_MS = 3_600_000;

interface BenchEvent {
  readonly key: string;
  readonly n: number;
}

/** The trivial function both wrap. */
async function fn(event: BenchEvent): Promise<{ ok: boolean; n: number }> {
  return { ok: true, n: event.n * 2 };
}

export interface CompareRow {
  readonly impl: 'twophase' | 'powertools';
  readonly path: 'first' | 'duplicate';
  readonly inFlight: number;
  readonly callsPerSec: number;
  readonly p50Us: number;
  readonly p99Us: number;
  /** Commands sent to Redis per call (MONITOR; commands run inside a Lua script not counted). */
  readonly redisCommandsPerCall: number;
}

export interface CompareResult {
  readonly keysPerRun: number;
  readonly rounds: number;
  readonly leaseTtlMs: number;
  readonly versions: Readonly<Record<string, string>>;
  readonly rows: readonly CompareRow[];
}

/** A minimal Lambda context: Powertools reads only getRemainingTimeInMillis. */
function lambdaContext(): Record<string, unknown> {
  return {
    functionName: 'twophase-bench',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:local:0:function:twophase-bench',
    memoryLimitInMB: '128',
    awsRequestId: 'bench',
    logGroupName: 'bench',
    logStreamName: 'bench',
    callbackWaitsForEmptyEventLoop: false,
    getRemainingTimeInMillis: () => LEASE_TTL_MS,
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/**
 * Counts the commands clients send to Redis while `work` runs, with MONITOR (commands a Lua
 * script runs itself are left out: they are not round trips). MONITOR slows Redis down, so this
 * runs in a pass of its own, never while timing.
 */
async function countCommands(port: number, work: () => Promise<void>): Promise<number> {
  // monitor() opens a connection of its own; the client it is called on stays open too.
  const client = new Redis({ host: '127.0.0.1', port });
  const monitor = await client.monitor();
  let count = 0;
  monitor.on('monitor', (_time: string, _args: string[], source: string) => {
    if (!source.includes('lua')) count++;
  });
  await new Promise((resolve) => setTimeout(resolve, 50));
  await work();
  await new Promise((resolve) => setTimeout(resolve, 200));
  monitor.disconnect();
  client.disconnect();
  return count;
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Runs `call(i)` for i in [0, total) with `inFlight` concurrent callers; returns latencies (µs) and the wall time (ms). */
async function drive(total: number, inFlight: number, call: (i: number) => Promise<unknown>): Promise<{ latUs: number[]; ms: number }> {
  const latUs: number[] = new Array<number>(total);
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      for (;;) {
        const i = next++;
        if (i >= total) return;
        const s = performance.now();
        await call(i);
        latUs[i] = (performance.now() - s) * 1000;
      }
    }),
  );
  return { latUs, ms: performance.now() - t0 };
}

export async function comparePowertools(options: { keys?: number; rounds?: number; inFlight?: readonly number[] } = {}): Promise<CompareResult> {
  const keys = options.keys ?? 5000;
  const rounds = options.rounds ?? 3;
  const levels = options.inFlight ?? [1, 64];
  const server = await RedisServerProcess.start();
  const ioredis = new Redis({ host: '127.0.0.1', port: server.port });
  const claimer = new RedisClaimer({ redis: ioredis, logger: silentLogger }, { prefix: 'bench-2p' });
  await claimer.ready();
  const redisClient = createClient({ socket: { host: '127.0.0.1', port: server.port } });
  redisClient.on('error', () => undefined);
  await redisClient.connect();
  const persistenceStore = new CachePersistenceLayer({ client: redisClient as never });
  const config = new IdempotencyConfig({ eventKeyJmesPath: 'key', expiresAfterSeconds: DONE_TTL_MS / 1000 });
  const idempotent = makeIdempotent(async (event: BenchEvent, _context: unknown) => fn(event), { persistenceStore, config });
  const context = lambdaContext();

  const impls = {
    twophase: async (event: BenchEvent) => {
      const claim = await claimer.claim(event.key, { leaseTtlMs: LEASE_TTL_MS, doneTtlMs: DONE_TTL_MS });
      if (claim.state === 'done') return claim.result;
      if (claim.state !== 'acquired') throw new Error(`unexpected ${claim.state}`);
      const result = await fn(event);
      await claim.receipt.commit(result as JsonValue);
      return result;
    },
    powertools: (event: BenchEvent) => idempotent(event, context),
  } as const;

  const samples = new Map<string, { cps: number[]; p50: number[]; p99: number[]; cmds: number }>();
  const record = (impl: keyof typeof impls, path: CompareRow['path'], inFlight: number, latUs: number[], ms: number) => {
    const id = `${impl}|${path}|${inFlight}`;
    const s = samples.get(id) ?? { cps: [], p50: [], p99: [], cmds: 0 };
    const sorted = [...latUs].sort((a, b) => a - b);
    s.cps.push((latUs.length / ms) * 1000);
    s.p50.push(percentile(sorted, 50));
    s.p99.push(percentile(sorted, 99));
    samples.set(id, s);
  };

  try {
    // Warm-up: scripts loaded, connections hot, JIT.
    for (const impl of Object.keys(impls) as (keyof typeof impls)[]) await drive(500, 16, (i) => impls[impl]({ key: `warm-${impl}-${i}`, n: i }));
    for (let round = 0; round < rounds; round++) {
      for (const inFlight of levels) {
        const order = (round % 2 === 0 ? ['twophase', 'powertools'] : ['powertools', 'twophase']) as (keyof typeof impls)[];
        for (const impl of order) {
          const prefix = `r${round}-c${inFlight}-${impl}`;
          for (const path of ['first', 'duplicate'] as const) {
            const { latUs, ms } = await drive(keys, inFlight, (i) => impls[impl]({ key: `${prefix}-${i}`, n: i }));
            record(impl, path, inFlight, latUs, ms);
          }
        }
      }
    }
    // Commands per call, in a pass of its own.
    const counted = 400;
    for (const inFlight of levels) {
      for (const impl of Object.keys(impls) as (keyof typeof impls)[]) {
        for (const path of ['first', 'duplicate'] as const) {
          const n = await countCommands(server.port, async () => void (await drive(counted, inFlight, (i) => impls[impl]({ key: `count-c${inFlight}-${impl}-${i}`, n: i }))));
          const s = samples.get(`${impl}|${path}|${inFlight}`);
          if (s) s.cmds = n / counted;
        }
      }
    }
  } finally {
    await claimer.close();
    ioredis.disconnect();
    await redisClient.quit().catch(() => undefined);
    await server.destroy();
  }

  const rows: CompareRow[] = [];
  for (const [id, s] of samples) {
    const [impl, path, inFlight] = id.split('|') as [CompareRow['impl'], CompareRow['path'], string];
    rows.push({ impl, path, inFlight: Number(inFlight), callsPerSec: Math.round(median(s.cps)), p50Us: Math.round(median(s.p50)), p99Us: Math.round(median(s.p99)), redisCommandsPerCall: Number(s.cmds.toFixed(2)) });
  }
  rows.sort((a, b) => a.inFlight - b.inFlight || a.path.localeCompare(b.path) || a.impl.localeCompare(b.impl));
  const version = (pkg: string) => (JSON.parse(readFileSync(join(__dirname, '..', '..', 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;
  return {
    keysPerRun: keys,
    rounds,
    leaseTtlMs: LEASE_TTL_MS,
    versions: { '@aws-lambda-powertools/idempotency': version('@aws-lambda-powertools/idempotency'), '@redis/client': version('@redis/client'), ioredis: version('ioredis') },
    rows,
  };
}

if (require.main === module) {
  const arg = (name: string, fallback: number) => {
    const i = process.argv.indexOf(`--${name}`);
    return i >= 0 ? Number(process.argv[i + 1]) : fallback;
  };
  comparePowertools({ keys: arg('keys', 5000), rounds: arg('rounds', 3) }).then(
    (r) => {
      console.table(r.rows);
      process.exit(0);
    },
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
