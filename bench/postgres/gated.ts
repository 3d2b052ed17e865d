/**
 * The gated claimer benchmark (`npm run bench:gated`): a Redis gate in front of the PostgreSQL
 * transactional inbox, against the plain transactional inbox, at the claimer (no broker), in one
 * run, interleaved round by round (the order alternates), medians over the rounds.
 *
 * Each round and variant, on the shared PostgreSQL (a fresh schema) and the shared Redis:
 *   new keys    `--keys` keys, each claimed, one ledger row INSERTed through the claim's
 *               transaction, committed with a small result (the first delivery of a message)
 *   duplicates  each of those completed keys claimed `--dups` more times (redeliveries): every
 *               answer must be `done` with the stored result
 * with `--concurrency` callers in a closed loop.
 *
 * Reports per variant and phase: operations per second, latency median and p99 (ms, claim to
 * commit for new keys, the claim alone for duplicates), this process's CPU per operation (µs),
 * PostgreSQL round trips per operation (statements sent on the pool's clients, counted by a
 * wrapper around the pool), Redis server time per operation (µs, from INFO commandstats, which
 * includes other clients of a shared Redis). Writes bench/results/gated.json (or `--out`).
 * Not a test: nothing fails on a number.
 *
 *   npx ts-node --transpile-only bench/postgres/gated.ts [--rounds 5] [--keys 1000] [--dups 5] [--concurrency 16] [--out file.json]
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Redis from 'ioredis';
import { Pool, type PoolClient } from 'pg';
import { type Claimer, silentLogger } from '../../src';
import { GatedClaimer } from '../../adapters/gated';
import { migrate, PostgresClaimer } from '../../adapters/postgres';
import { RedisClaimer } from '../../adapters/redis';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}
const ROUNDS = arg('rounds', 5);
const KEYS = arg('keys', 1000);
const DUPS = arg('dups', 5);
const CONCURRENCY = arg('concurrency', 16);
const outIndex = process.argv.indexOf('--out');
const OUT = outIndex >= 0 ? process.argv[outIndex + 1]! : join(__dirname, '..', 'results', 'gated.json');
const OPTS = { leaseTtlMs: 30_000, doneTtlMs: 600_000 };

/** Statements sent on the pool's clients (each `query` call is one round trip). */
let pgRoundTrips = 0;

/** `pool`, with every statement its clients send counted in `pgRoundTrips`. */
function countingPool(pool: Pool): Pool {
  const counted = (client: PoolClient): PoolClient =>
    new Proxy(client, {
      get(target, property) {
        const value: unknown = Reflect.get(target, property, target);
        if (property === 'query') {
          return (...args: unknown[]) => {
            pgRoundTrips++;
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  return new Proxy(pool, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (property === 'connect') return async () => counted(await target.connect());
      if (property === 'query') {
        return (...args: unknown[]) => {
          pgRoundTrips++;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** Redis server time spent in scripts so far (µs), from INFO commandstats. */
async function redisScriptUsec(redis: Redis): Promise<number> {
  const info = await redis.info('commandstats');
  let total = 0;
  for (const m of info.matchAll(/cmdstat_(?:evalsha|eval|evalsha_ro|eval_ro|fcall):calls=\d+,usec=(\d+)/g)) total += Number(m[1]);
  return total;
}

interface Phase {
  readonly opsPerSec: number;
  readonly latencyMedianMs: number;
  readonly latencyP99Ms: number;
  readonly cpuUsPerOp: number;
  readonly pgRoundTripsPerOp: number;
  readonly redisServerUsPerOp: number;
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** Runs `op` once per item with CONCURRENCY callers; measures it. */
async function measure(redis: Redis, items: readonly string[], op: (key: string) => Promise<void>): Promise<Phase> {
  const latencies: number[] = [];
  const trips = pgRoundTrips;
  const usec = await redisScriptUsec(redis);
  const cpu = process.cpuUsage();
  const start = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < items.length) {
        const key = items[next++]!;
        const t0 = performance.now();
        await op(key);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = performance.now() - start;
  const used = process.cpuUsage(cpu);
  const serverUs = (await redisScriptUsec(redis)) - usec;
  latencies.sort((a, b) => a - b);
  return {
    opsPerSec: Math.round((items.length / elapsed) * 1000),
    latencyMedianMs: round(quantile(latencies, 0.5)),
    latencyP99Ms: round(quantile(latencies, 0.99)),
    cpuUsPerOp: Math.round((used.user + used.system) / items.length),
    pgRoundTripsPerOp: round(((pgRoundTrips - trips) / items.length) * 100) / 100,
    redisServerUsPerOp: round(serverUs / items.length),
  };
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

async function round1(variant: string, claimer: Claimer, redis: Redis, ledger: string, roundNo: number): Promise<{ fresh: Phase; duplicates: Phase }> {
  const keys = Array.from({ length: KEYS }, (_, i) => `${variant}-r${roundNo}-${i}`);
  const fresh = await measure(redis, keys, async (key) => {
    const claim = await claimer.claim(key, OPTS);
    if (claim.state !== 'acquired') throw new Error(`${variant}: ${key} was ${claim.state}`);
    await (claim.receipt.transaction as PoolClient).query(`INSERT INTO ${ledger} (key) VALUES ($1)`, [key]);
    await claim.receipt.commit({ booked: key });
  });
  const dupKeys = Array.from({ length: DUPS }, () => keys).flat();
  const duplicates = await measure(redis, dupKeys, async (key) => {
    const claim = await claimer.claim(key, OPTS);
    if (claim.state !== 'done' || (claim.result as { booked?: string } | undefined)?.booked !== key) throw new Error(`${variant}: duplicate of ${key} was ${claim.state}`);
  });
  return { fresh, duplicates };
}

function medians(phases: Phase[]): Phase {
  const pick = (f: keyof Phase) => round(median(phases.map((p) => p[f])));
  return {
    opsPerSec: pick('opsPerSec'),
    latencyMedianMs: pick('latencyMedianMs'),
    latencyP99Ms: pick('latencyP99Ms'),
    cpuUsPerOp: pick('cpuUsPerOp'),
    pgRoundTripsPerOp: pick('pgRoundTripsPerOp'),
    redisServerUsPerOp: pick('redisServerUsPerOp'),
  };
}

async function main(): Promise<void> {
  const raw = new Pool({ host: process.env.PGHOST ?? '127.0.0.1', port: Number(process.env.PGPORT ?? 5432), user: process.env.PGUSER ?? 'postgres', database: process.env.PGDATABASE ?? 'postgres', max: CONCURRENCY + 8 });
  const pool = countingPool(raw);
  const schema = `tp_bench_gated_${process.pid}`;
  const ledger = `${schema}.ledger`;
  const redis = new Redis({ host: '127.0.0.1', port: Number(process.env.REDIS_PORT ?? 6379), maxRetriesPerRequest: 1 });
  const gate = new RedisClaimer({ redis, logger: silentLogger }, { prefix: `bench-gated-${process.pid}` });
  try {
    await migrate(raw, { schema });
    await raw.query(`CREATE TABLE ${ledger} (id bigserial PRIMARY KEY, key text NOT NULL)`);
    const truth = () => new PostgresClaimer({ pool, logger: silentLogger }, { schema, mode: 'transactional' });
    const variants: Record<string, Claimer> = {
      inbox: truth(),
      gated: new GatedClaimer({ gate, truth: truth(), logger: silentLogger }),
    };
    await gate.ready();
    const results: Record<string, { fresh: Phase[]; duplicates: Phase[] }> = { inbox: { fresh: [], duplicates: [] }, gated: { fresh: [], duplicates: [] } };
    // One warm-up round, not counted.
    for (const name of Object.keys(variants)) await round1(`warm-${name}`, variants[name]!, redis, ledger, 0);
    for (let r = 1; r <= ROUNDS; r++) {
      const order = r % 2 ? ['inbox', 'gated'] : ['gated', 'inbox'];
      for (const name of order) {
        const m = await round1(name, variants[name]!, redis, ledger, r);
        results[name]!.fresh.push(m.fresh);
        results[name]!.duplicates.push(m.duplicates);
        console.log(JSON.stringify({ round: r, variant: name, ...m }));
      }
    }
    // Each round ran both variants back to back: the ratio within a round is less exposed to the
    // load of a shared machine than the ratio of the medians.
    const perRound = results.gated!.duplicates.map((g, i) => round(g.opsPerSec / results.inbox!.duplicates[i]!.opsPerSec));
    const summary = Object.fromEntries(Object.entries(results).map(([name, v]) => [name, { fresh: medians(v.fresh), duplicates: medians(v.duplicates) }]));
    const inbox = summary.inbox!;
    const gated = summary.gated!;
    const report = {
      at: new Date().toISOString(),
      settings: { rounds: ROUNDS, keys: KEYS, dupsPerKey: DUPS, concurrency: CONCURRENCY },
      medians: summary,
      ratios: {
        duplicatesPerSecGatedVsInbox: round(gated.duplicates.opsPerSec / inbox.duplicates.opsPerSec),
        duplicatesPerSecGatedVsInboxPerRound: perRound,
        duplicatesPerSecGatedVsInboxMedianOfRounds: round(median(perRound)),
        duplicateCpuInboxVsGated: round(inbox.duplicates.cpuUsPerOp / gated.duplicates.cpuUsPerOp),
        newKeysPerSecGatedVsInbox: round(gated.fresh.opsPerSec / inbox.fresh.opsPerSec),
        addedNewKeyLatencyMedianMs: round(gated.fresh.latencyMedianMs - inbox.fresh.latencyMedianMs),
      },
      gatedPgRoundTripsPerDuplicate: gated.duplicates.pgRoundTripsPerOp,
    };
    writeFileSync(OUT, `${JSON.stringify(report, null, 2)}\n`);
    console.log(JSON.stringify(report, null, 2));
  } finally {
    await raw.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await gate.close();
    await raw.end();
    redis.disconnect();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
