/**
 * RabbitMQ benchmark (`npm run bench:rabbitmq`; not a timed test).
 *
 * In one process run, side by side: raw amqplib consume+ack against the twophase consumer with
 * the in-memory claimer and with the Redis claimer, at several prefetch counts. Each run drains a
 * pre-filled queue of BENCH_MESSAGES messages of BENCH_BODY_BYTES bytes; the time is taken from
 * the first delivery to the last ack. Variants are interleaved inside each round so drift on the
 * machine hits them alike. Reports medians (msgs/s) and ratios to raw, and writes
 * bench/results/rabbitmq.json.
 *
 * Environment (all optional):
 *   BENCH_MESSAGES    messages per run            (default 100000)
 *   BENCH_BODY_BYTES  body size, bytes            (default 1024)
 *   BENCH_RUNS        runs per variant            (default 3)
 *   BENCH_PREFETCH    comma-separated prefetches  (default 10,100,1000)
 *   BENCH_VARIANTS    raw,floor-memory,floor-redis,adapter,memory,redis,memory-batch,redis-batch
 *                     (default raw,floor-memory,floor-redis,memory,redis);
 *                     `floor-*` are raw amqplib plus the least claim + commit work per message, inline
 *                     (see runFloor: what no claim-per-key design can go below),
 *                     `adapter` is the source with a sink that acks at once (the adapter's own cost),
 *                     `adapter-burn<N>` the same sink spending N µs of CPU per message before the
 *                     ack (what a given per-message cost does to the rate),
 *                     `*-batch` turn on the source's `batchClaims` (window 0: one event-loop turn),
 *                     `*-batch-w<N>` the same with `batchWindowMs: N` (a claim window of N ms)
 *   BENCH_OUT         output file                 (default bench/results/rabbitmq.json)
 *   TWOPHASE_AMQP_URL, REDIS_PORT
 *
 * Profile the pipeline: node --cpu-prof --cpu-prof-dir=.tmp/prof -r ts-node/register/transpile-only bench/rabbitmq/run.ts
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import Redis from 'ioredis';
import { connectAdmin, declareQueue, deleteTopology, fill } from './broker';
import { sampleRedisServer, serverDelta } from '../support/redis-server-cost';
import { type Measured, memoryClaimer, redisClaimer, runAdapterOnly, runFloor, runRaw, runTwophase } from './consumers';

type Variant =
  | 'raw'
  | 'floor-memory'
  | 'floor-redis'
  | 'adapter'
  | 'memory'
  | 'redis'
  | 'memory-batch'
  | 'redis-batch'
  | `${'memory' | 'redis'}-batch-w${number}`
  | `adapter-burn${number}`;

/** The source's claim batching of a twophase variant: undefined = off, else the window, ms. */
function batchWindowOf(variant: Variant): number | undefined {
  const window = /-batch(?:-w(\d+))?$/.exec(variant);
  if (!window) return undefined;
  return window[1] === undefined ? 0 : Number(window[1]);
}

const messages = Number(process.env.BENCH_MESSAGES ?? 100_000);
const bodyBytes = Number(process.env.BENCH_BODY_BYTES ?? 1024);
const runs = Number(process.env.BENCH_RUNS ?? 3);
const prefetches = (process.env.BENCH_PREFETCH ?? '10,100,1000').split(',').map(Number);
const variants = (process.env.BENCH_VARIANTS ?? 'raw,floor-memory,floor-redis,memory,redis').split(',') as Variant[];
const out = process.env.BENCH_OUT ?? join(__dirname, '..', 'results', 'rabbitmq.json');

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function brokerVersion(): string | undefined {
  try {
    return execFileSync('rabbitmqctl', ['eval', 'rabbit:base_product_version().'], { encoding: 'utf8', timeout: 20_000 }).replace(/[^0-9.]/g, '');
  } catch {
    return undefined;
  }
}

async function scrubRedis(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 5000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}

async function main(): Promise<void> {
  for (const [name, value] of [['BENCH_MESSAGES', messages], ['BENCH_BODY_BYTES', bodyBytes], ['BENCH_RUNS', runs]] as const) {
    if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`);
  }
  const admin = await connectAdmin();
  const needsRedis = variants.some((v) => v.includes('redis'));
  const redisPort = Number(process.env.REDIS_PORT ?? 6379);
  const redis = needsRedis ? new Redis({ host: '127.0.0.1', port: redisPort }) : undefined;
  const floorRedis = variants.includes('floor-redis') ? new Redis({ host: '127.0.0.1', port: redisPort, enableAutoPipelining: true }) : undefined;
  const samples = new Map<string, number[]>();
  const cpuSamples = new Map<string, number[]>();
  /** Redis variants: the server's CPU and command time per message, µs (bench/support/redis-server-cost.ts). */
  const redisCpuSamples = new Map<string, number[]>();
  const redisCommandSamples = new Map<string, number[]>();
  /** Batching variants: deliveries per batch claim. */
  const batchSamples = new Map<string, number[]>();
  const started = Date.now();
  process.stderr.write(`twophase RabbitMQ benchmark: ${messages} msgs × ${bodyBytes} B, runs ${runs}, prefetch ${prefetches.join('/')}, variants ${variants.join(',')}\n`);
  for (const prefetch of prefetches) {
    for (let run = 0; run < runs; run++) {
      for (const variant of variants) {
        const runId = `${variant}-${prefetch}-${run}-${Date.now().toString(36)}`;
        const queue = `twophase-bench.${runId}`;
        await declareQueue(admin, queue);
        await fill(admin, queue, messages, bodyBytes, runId);
        let measured: Measured;
        const prefix = `twophase-bench-${runId}`;
        const serverBefore = variant.includes('redis') ? await sampleRedisServer(redis!) : undefined;
        let serverAfter: Awaited<ReturnType<typeof sampleRedisServer>> | undefined;
        if (variant === 'raw') {
          measured = await runRaw(queue, prefetch, messages);
        } else if (variant === 'floor-memory' || variant === 'floor-redis') {
          measured = await runFloor(queue, prefetch, messages, variant === 'floor-memory' ? 'memory' : floorRedis!, prefix);
          if (variant === 'floor-redis') {
            serverAfter = await sampleRedisServer(redis!);
            await scrubRedis(redis!, prefix);
          }
        } else if (variant === 'adapter' || variant.startsWith('adapter-burn')) {
          measured = await runAdapterOnly(queue, prefetch, messages, variant === 'adapter' ? 0 : Number(variant.slice('adapter-burn'.length)));
        } else if (variant.startsWith('memory')) {
          measured = await runTwophase(queue, prefetch, messages, memoryClaimer(), batchWindowOf(variant));
        } else {
          const claimer = redisClaimer(redis!, prefix);
          measured = await runTwophase(queue, prefetch, messages, claimer, batchWindowOf(variant));
          await claimer.close();
          serverAfter = await sampleRedisServer(redis!);
          await scrubRedis(redis!, prefix);
        }
        const key = `${prefetch}:${variant}`;
        if (serverBefore && serverAfter) {
          const server = serverDelta(serverBefore, serverAfter);
          redisCpuSamples.set(key, [...(redisCpuSamples.get(key) ?? []), server.cpuUs / messages]);
          redisCommandSamples.set(key, [...(redisCommandSamples.get(key) ?? []), server.commandUs / messages]);
        }
        await deleteTopology(admin, queue);
        const rate = (messages / measured.elapsedMs) * 1000;
        const cpuPerMsg = measured.cpuUs / messages;
        samples.set(key, [...(samples.get(key) ?? []), rate]);
        if (measured.meanClaimBatch !== undefined) batchSamples.set(key, [...(batchSamples.get(key) ?? []), measured.meanClaimBatch]);
        cpuSamples.set(key, [...(cpuSamples.get(key) ?? []), cpuPerMsg]);
        process.stderr.write(
          `  prefetch ${String(prefetch).padStart(4)}  run ${run + 1}/${runs}  ${variant.padEnd(14)} ${Math.round(rate).toString().padStart(7)} msgs/s  (${Math.round(measured.elapsedMs)} ms, ${cpuPerMsg.toFixed(1)} µs CPU/msg in this process${measured.meanClaimBatch === undefined ? '' : `, ${measured.meanClaimBatch.toFixed(1)} deliveries per batch claim`})\n`,
        );
        if (global.gc) global.gc();
      }
    }
  }
  const results = prefetches.flatMap((prefetch) => {
    const raw = samples.get(`${prefetch}:raw`);
    const rawMedian = raw ? median(raw) : undefined;
    return variants.map((variant) => {
      const rates = samples.get(`${prefetch}:${variant}`)!;
      const med = median(rates);
      return {
        prefetch,
        variant,
        medianMsgsPerSec: Math.round(med),
        runsMsgsPerSec: rates.map(Math.round),
        ratioToRaw: rawMedian ? Number((med / rawMedian).toFixed(3)) : undefined,
        medianNodeCpuUsPerMsg: Number(median(cpuSamples.get(`${prefetch}:${variant}`)!).toFixed(2)),
        runsNodeCpuUsPerMsg: cpuSamples.get(`${prefetch}:${variant}`)!.map((x) => Number(x.toFixed(2))),
        ...(batchSamples.has(`${prefetch}:${variant}`) ? { medianDeliveriesPerClaimBatch: Number(median(batchSamples.get(`${prefetch}:${variant}`)!).toFixed(1)) } : {}),
        ...(redisCpuSamples.has(`${prefetch}:${variant}`)
          ? {
              medianRedisCpuUsPerMsg: Number(median(redisCpuSamples.get(`${prefetch}:${variant}`)!).toFixed(2)),
              medianRedisCommandUsPerMsg: Number(median(redisCommandSamples.get(`${prefetch}:${variant}`)!).toFixed(2)),
              runsRedisCpuUsPerMsg: redisCpuSamples.get(`${prefetch}:${variant}`)!.map((x) => Number(x.toFixed(2))),
            }
          : {}),
      };
    });
  });
  const at100 = (variant: Variant) => results.find((r) => r.prefetch === 100 && r.variant === variant)?.ratioToRaw;
  const report = {
    benchmark: 'rabbitmq',
    date: new Date().toISOString(),
    durationSec: Math.round((Date.now() - started) / 1000),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model, totalMemGiB: Math.round(totalmem() / 2 ** 30), node: process.version, rabbitmq: brokerVersion() },
    config: { messages, bodyBytes, runs, prefetches, variants, handler: 'no-op ack()', consumerDefaults: 'leaseTtlMs 30000, keepAlive on, concurrency = prefetch' },
    notes:
      'RabbitMQ, Redis and this process share the machine; msgs/s depends on how busy it is, so variants are interleaved per round. ' +
      'medianNodeCpuUsPerMsg is the CPU time of this Node process per message (user+system) during the drain: the pipeline cost independent of broker speed. ' +
      'medianRedisCpuUsPerMsg / medianRedisCommandUsPerMsg: the Redis server\'s CPU time (INFO cpu) and command time (INFO commandstats) per message around the run, before the namespace scrub; clean only on a Redis no one else uses (REDIS_PORT of a private server). ' +
      'floor-memory and floor-redis are raw amqplib plus the least claim + commit work per message written inline (a Map; two plain SETs on an auto-pipelining ioredis client): no design that claims each key in that store does less.',
    results,
    goals: {
      memoryAtLeast95PercentOfRaw: { ratioAtPrefetch100: at100('memory'), floorRatioAtPrefetch100: at100('floor-memory'), met: (at100('memory') ?? 0) >= 0.95 },
      redisAtLeast85PercentOfRawAtPrefetch100: { ratioAtPrefetch100: at100('redis'), floorRatioAtPrefetch100: at100('floor-redis'), met: (at100('redis') ?? 0) >= 0.85 },
    },
  };
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
  process.stderr.write('\nprefetch  variant         median msgs/s  ratio to raw  µs CPU/msg (Node)  µs CPU/msg (Redis)\n');
  for (const r of results) {
    const redisCpu = 'medianRedisCpuUsPerMsg' in r ? String(r.medianRedisCpuUsPerMsg) : '';
    process.stderr.write(
      `${String(r.prefetch).padStart(8)}  ${r.variant.padEnd(14)}  ${String(r.medianMsgsPerSec).padStart(13)}  ${String(r.ratioToRaw ?? '').padStart(12)}  ${String(r.medianNodeCpuUsPerMsg).padStart(17)}  ${redisCpu.padStart(18)}\n`,
    );
  }
  process.stderr.write(`\nwritten to ${out}\n`);
  await admin.close();
  await redis?.quit();
  await floorRedis?.quit();
}

main().catch((error: unknown) => {
  process.stderr.write(`benchmark failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exitCode = 1;
});
