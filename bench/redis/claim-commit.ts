/**
 * Redis claimer throughput, side by side in one process, on one Redis:
 *
 *   raw          SET key token NX PX leaseTtl, then SET key done PX doneTtl (per key)
 *   claimer      RedisClaimer claim() then receipt.commit() (per key), coalescing on and off
 *   claimMany    RedisClaimer.claimMany() with batches of 100 (claims only, and with commits)
 *   claim        RedisClaimer claim() alone (the per-key rate claimMany is compared with)
 *
 * at 1 and 64 operations in flight, each with ioredis enableAutoPipelining off and on. Variants run
 * interleaved, several times; medians and ratios are printed and written to bench/results/redis.json.
 * Not a test: nothing fails on a missed goal; the numbers are reported as measured.
 *
 * Each variant also reports, per key, this process's CPU time and the Redis server's CPU time
 * (`INFO cpu`) and command time (`INFO commandstats`) around its runs (bench/support/redis-server-cost.ts).
 * With `--private-server` the benchmark starts its own redis-server on a free port, so the server
 * figures hold only this benchmark's work.
 *
 *   npx ts-node --transpile-only bench/redis/claim-commit.ts [--runs 5] [--keys 20000] [--port 6379] [--private-server]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Redis from 'ioredis';
import { RedisClaimer, type RedisClaimerOptions } from '../../adapters/redis';
import { RedisServerProcess } from '../../test/integration/redis/support/redis-process';
import { sampleRedisServer, serverDelta } from '../support/redis-server-cost';

interface Args {
  runs: number;
  keys: number;
  keysSerial: number;
  host: string;
  port: number;
  out: string;
  privateServer: boolean;
}

function parseArgs(argv: string[]): Args {
  const get = (name: string, fallback: string) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 && argv[i + 1] ? argv[i + 1]! : fallback;
  };
  return {
    runs: Number(get('runs', '5')),
    keys: Number(get('keys', '20000')),
    keysSerial: Number(get('keys-serial', '4000')),
    host: get('host', process.env.REDIS_HOST ?? '127.0.0.1'),
    port: Number(get('port', process.env.REDIS_PORT ?? '6379')),
    out: get('out', join(__dirname, '..', 'results', 'redis.json')),
    privateServer: argv.includes('--private-server'),
  };
}

const LEASE_TTL_MS = 30_000;
const DONE_TTL_MS = 600_000;
const claimOptions = { leaseTtlMs: LEASE_TTL_MS, doneTtlMs: DONE_TTL_MS };
const silent = { warn: () => undefined, error: () => undefined, info: () => undefined, debug: () => undefined };

type Kind = 'raw' | 'claimer' | 'claim' | 'claimMany' | 'claimManyCommit';

interface Variant {
  name: string;
  kind: Kind;
  inFlight: number;
  autoPipelining: boolean;
  coalesce?: boolean;
}

/** Runs `fn(i)` for i in [0, total) with `inFlight` workers. */
async function pool(total: number, inFlight: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= total) return;
      await fn(i);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
}

async function deleteNamespace(client: Redis, pattern: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 2000);
    cursor = next;
    if (keys.length > 0) await client.unlink(...keys);
  } while (cursor !== '0');
}

/** One measurement of a variant: its rate and what each key cost the Node process and the server. */
interface Measurement {
  /** Keys per second. */
  readonly rate: number;
  /** This process's CPU time (user + system) per key, µs. */
  readonly nodeUsPerKey: number;
  /** The Redis server's CPU time per key (`INFO cpu`), µs. */
  readonly serverCpuUsPerKey: number;
  /** Time inside Redis commands per key (`INFO commandstats`), µs. */
  readonly serverCommandUsPerKey: number;
  /** Redis commands sent per key (a script call counts once, whatever it calls). */
  readonly commandsPerKey: number;
}

/** One measurement of `variant`. */
async function measure(variant: Variant, clients: { off: Redis; on: Redis }, args: Args, run: number): Promise<Measurement> {
  const client = variant.autoPipelining ? clients.on : clients.off;
  const ns = `tp-bench:${run}:${variant.name.replace(/[^a-z0-9]+/gi, '-')}`;
  const total = variant.inFlight === 1 && variant.kind !== 'claimMany' && variant.kind !== 'claimManyCommit' ? args.keysSerial : args.keys;
  let claimer: RedisClaimer | undefined;
  if (variant.kind !== 'raw') {
    const options: RedisClaimerOptions = { prefix: ns, coalesce: variant.coalesce ?? true, maxBatchKeys: 128 };
    claimer = new RedisClaimer({ redis: client, logger: silent }, options);
    await claimer.ready();
  }
  let failures = 0;
  const serverBefore = await sampleRedisServer(clients.off);
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  switch (variant.kind) {
    case 'raw':
      await pool(total, variant.inFlight, async (i) => {
        const key = `${ns}:{k${i}}`;
        const ok = await client.set(key, 'owner-token-0123456789', 'PX', LEASE_TTL_MS, 'NX');
        if (ok === 'OK') await client.set(key, 'done', 'PX', DONE_TTL_MS);
        else failures++;
      });
      break;
    case 'claimer':
      await pool(total, variant.inFlight, async (i) => {
        const claim = await claimer!.claim(`k${i}`, claimOptions);
        if (claim.state === 'acquired') await claim.receipt.commit();
        else failures++;
      });
      break;
    case 'claim':
      await pool(total, variant.inFlight, async (i) => {
        const claim = await claimer!.claim(`k${i}`, claimOptions);
        if (claim.state !== 'acquired') failures++;
      });
      break;
    case 'claimMany':
    case 'claimManyCommit': {
      const batch = 100;
      for (let b = 0; b < total; b += batch) {
        const requests = Array.from({ length: Math.min(batch, total - b) }, (_, j) => ({ key: `k${b + j}`, options: claimOptions }));
        const entries = await claimer!.claimMany(requests);
        const commits: Array<Promise<void>> = [];
        for (const entry of entries) {
          if (!entry.ok || entry.result.state !== 'acquired') failures++;
          else if (variant.kind === 'claimManyCommit') commits.push(entry.result.receipt.commit());
        }
        await Promise.all(commits);
      }
      break;
    }
  }
  const seconds = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const server = serverDelta(serverBefore, await sampleRedisServer(clients.off));
  if (failures > 0) throw new Error(`${variant.name}: ${failures} keys not acquired (is the namespace clean?)`);
  if (claimer) await claimer.close();
  await deleteNamespace(clients.off, `${ns}:*`);
  return {
    rate: total / seconds,
    nodeUsPerKey: (cpu.user + cpu.system) / total,
    serverCpuUsPerKey: server.cpuUs / total,
    serverCommandUsPerKey: server.commandUs / total,
    commandsPerKey: server.calls / total,
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const server = args.privateServer ? await RedisServerProcess.start() : undefined;
  if (server) args.port = server.port;
  const connect = (autoPipelining: boolean) =>
    new Redis({ host: args.host, port: args.port, enableAutoPipelining: autoPipelining, maxRetriesPerRequest: 1, lazyConnect: true });
  const clients = { off: connect(false), on: connect(true) };
  await Promise.all([clients.off.connect(), clients.on.connect()]);
  const info = await clients.off.info('server');
  const redisVersion = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';

  const variants: Variant[] = [];
  for (const autoPipelining of [false, true]) {
    const ap = autoPipelining ? 'autopipe' : 'no-autopipe';
    for (const inFlight of [1, 64]) {
      variants.push({ name: `raw SET NX PX + SET, ${inFlight} in flight, ${ap}`, kind: 'raw', inFlight, autoPipelining });
      variants.push({ name: `claim+commit coalesced, ${inFlight} in flight, ${ap}`, kind: 'claimer', inFlight, autoPipelining, coalesce: true });
      variants.push({ name: `claim+commit not coalesced, ${inFlight} in flight, ${ap}`, kind: 'claimer', inFlight, autoPipelining, coalesce: false });
      variants.push({ name: `claim only, not coalesced, ${inFlight} in flight, ${ap}`, kind: 'claim', inFlight, autoPipelining, coalesce: false });
    }
    variants.push({ name: `claimMany x100, ${ap}`, kind: 'claimMany', inFlight: 1, autoPipelining });
    variants.push({ name: `claimMany x100 + commits, ${ap}`, kind: 'claimManyCommit', inFlight: 1, autoPipelining });
  }

  // Warm-up: JIT, connections, script cache.
  for (const variant of variants) await measure(variant, clients, { ...args, keys: 1000, keysSerial: 300 }, -1);

  const measurements = new Map<string, Measurement[]>(variants.map((v) => [v.name, []]));
  for (let run = 0; run < args.runs; run++) {
    // Alternate the order so no variant always runs first or last.
    for (const variant of run % 2 ? [...variants].reverse() : variants) measurements.get(variant.name)!.push(await measure(variant, clients, args, run));
    process.stdout.write(`run ${run + 1}/${args.runs} done\n`);
  }
  const samples = new Map<string, number[]>([...measurements].map(([name, ms]) => [name, ms.map((m) => m.rate)]));

  const medians: Record<string, number> = {};
  for (const [name, values] of samples) medians[name] = median(values);
  /** Per key, medians over the runs: µs of Node CPU, µs of Redis server CPU and command time. */
  const costs: Record<string, { nodeUs: number; serverCpuUs: number; serverCommandUs: number; commands: number }> = {};
  const round2 = (x: number) => Math.round(x * 100) / 100;
  for (const [name, ms] of measurements) {
    costs[name] = {
      nodeUs: round2(median(ms.map((m) => m.nodeUsPerKey))),
      serverCpuUs: round2(median(ms.map((m) => m.serverCpuUsPerKey))),
      serverCommandUs: round2(median(ms.map((m) => m.serverCommandUsPerKey))),
      commands: round2(median(ms.map((m) => m.commandsPerKey))),
    };
  }
  // Each ratio twice: of the medians, and the median of per-run ratios (both variants measured
  // back to back in the same run, so load from other processes affects both alike).
  const ratio = (a: string, b: string) => {
    const paired = samples.get(a)!.map((value, run) => value / samples.get(b)![run]!);
    return { ofMedians: medians[a]! / medians[b]!, pairedMedian: median(paired) };
  };
  const ratios: Record<string, { ofMedians: number; pairedMedian: number }> = {};
  for (const ap of ['no-autopipe', 'autopipe']) {
    for (const inFlight of [1, 64]) {
      const raw = `raw SET NX PX + SET, ${inFlight} in flight, ${ap}`;
      ratios[`claim+commit coalesced / raw, ${inFlight} in flight, ${ap}`] = ratio(`claim+commit coalesced, ${inFlight} in flight, ${ap}`, raw);
      ratios[`claim+commit not coalesced / raw, ${inFlight} in flight, ${ap}`] = ratio(`claim+commit not coalesced, ${inFlight} in flight, ${ap}`, raw);
    }
    ratios[`claimMany x100 / claim, 1 in flight, ${ap}`] = ratio(`claimMany x100, ${ap}`, `claim only, not coalesced, 1 in flight, ${ap}`);
    ratios[`claimMany x100 / claim, 64 in flight, ${ap}`] = ratio(`claimMany x100, ${ap}`, `claim only, not coalesced, 64 in flight, ${ap}`);
    ratios[`claimMany x100 + commits / claim+commit not coalesced, 1 in flight, ${ap}`] = ratio(
      `claimMany x100 + commits, ${ap}`,
      `claim+commit not coalesced, 1 in flight, ${ap}`,
    );
  }
  const r = (name: string) => ratios[name]!;

  // A goal counts as met when both statistics meet it.
  const meets = (name: string, bound: number) => Math.min(r(name).ofMedians, r(name).pairedMedian) >= bound;
  const goals = {
    'claim+commit at 64 in flight >= 0.9x raw (default: coalesced, no autopipe)': meets('claim+commit coalesced / raw, 64 in flight, no-autopipe', 0.9),
    'claim+commit at 64 in flight >= 0.9x raw (coalesced, autopipe on both)': meets('claim+commit coalesced / raw, 64 in flight, autopipe', 0.9),
    'claimMany x100 >= 3x per-key claim rate (1 in flight)': meets('claimMany x100 / claim, 1 in flight, no-autopipe', 3),
  };

  const width = Math.max(...Object.keys(medians).map((k) => k.length), ...Object.keys(ratios).map((k) => k.length));
  console.log(`\nRedis ${redisVersion} at ${args.host}:${args.port}; node ${process.version}; ${cpus().length} CPUs; ${args.runs} runs; ` +
    `${args.keys} keys per run (${args.keysSerial} at 1 in flight)`);
  console.log(`\n${'median per variant'.padEnd(width + 2)}    keys/s  Node µs/key  Redis CPU µs/key  Redis cmd µs/key  commands/key`);
  for (const [name, value] of Object.entries(medians)) {
    const c = costs[name]!;
    console.log(
      `  ${name.padEnd(width)}  ${value.toFixed(0).padStart(8)}  ${c.nodeUs.toFixed(2).padStart(11)}  ${c.serverCpuUs.toFixed(2).padStart(16)}  ${c.serverCommandUs.toFixed(2).padStart(16)}  ${c.commands.toFixed(2).padStart(12)}`,
    );
  }
  console.log(`\nratios${' '.repeat(width - 4)}of medians  median of per-run ratios`);
  for (const [name, value] of Object.entries(ratios)) {
    console.log(`  ${name.padEnd(width)}  ${value.ofMedians.toFixed(2).padStart(8)}  ${value.pairedMedian.toFixed(2).padStart(8)}`);
  }
  console.log('\ngoals');
  for (const [name, met] of Object.entries(goals)) console.log(`  ${met ? 'met   ' : 'MISSED'}  ${name}`);

  mkdirSync(join(args.out, '..'), { recursive: true });
  writeFileSync(
    args.out,
    `${JSON.stringify(
      {
        benchmark: 'bench/redis/claim-commit.ts',
        date: new Date().toISOString(),
        environment: { node: process.version, redis: redisVersion, cpus: cpus().length, cpuModel: cpus()[0]?.model, host: `${args.host}:${args.port}` },
        parameters: { runs: args.runs, keysPerRun: args.keys, keysPerRunAtOneInFlight: args.keysSerial, leaseTtlMs: LEASE_TTL_MS, doneTtlMs: DONE_TTL_MS, claimManyBatch: 100 },
        unit: 'keys per second (a key = one claim, or one claim + one commit, or one SET NX + one SET)',
        medians,
        costsPerKey: costs,
        costNotes:
          'costsPerKey: medians over the runs, per key. nodeUs = this process (user + system, process.cpuUsage); serverCpuUs = Redis used_cpu_user + used_cpu_sys (INFO cpu); serverCommandUs = sum of usec in INFO commandstats; commands = Redis commands per key. Server figures include any other client of the same server: use a private one.',
        ratios,
        goals,
        samples: Object.fromEntries(samples),
      },
      null,
      2,
    )}\n`,
  );
  console.log(`\nwritten to ${args.out}`);
  clients.off.disconnect();
  clients.on.disconnect();
  await server?.destroy();
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
