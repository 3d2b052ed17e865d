/**
 * Kafka consumption throughput, side by side in one process run, on the dev broker:
 *
 *   raw        kafkajs eachBatch: decode each record's JSON, apply the effect, resolve the
 *              offset; kafkajs auto-commit (after each batch); partitionsConsumedConcurrently 6
 *   memory     twophase: KafkaSource + ConsumerBase (decode, claim, handle, commit, settle)
 *              with the InMemoryClaimer
 *   redis      the same with the RedisClaimer on 127.0.0.1:6379
 *   redis-batched
 *              the same with `batchCommits: true` (the commits of one event-loop turn go out as
 *              one commitMany call); `redis` keeps the default (off: each acked record commits
 *              on its own, and the Redis claimer's coalescer gathers concurrent ones under load)
 *   raw-platformatic, memory-platformatic, redis-platformatic
 *              the same three on @platformatic/kafka (Node >= 22.22): raw is one `consume()`
 *              stream with its default autocommit, twophase runs on `platformaticClient()`;
 *              their ratios are to raw-platformatic, so each client is compared with itself
 *   floor-memory, floor-redis
 *              raw plus the least claim + commit work per record, inline (see floor()): what no
 *              design that claims each key in that store can go below
 *   floor-memory-platformatic, floor-redis-platformatic
 *              the same floors on raw-platformatic's stream (see floorPlatformatic())
 *
 * One topic of `--partitions` partitions holds `--messages` records of `--bytes` bytes (JSON, an
 * `idempotency-key` header each); every run reads all of it with a fresh consumer group (and a
 * fresh key namespace), so each variant does the same work. Variants run interleaved, `--runs`
 * times. Throughput counts from the first record received to the last effect applied (group join
 * excluded; reported separately). Medians and ratios to raw are printed and written to
 * bench/results/kafka.json. Not a test: nothing fails on a missed goal.
 *
 *   npx ts-node --transpile-only bench/kafka/consume.ts [--messages 100000] [--runs 3]
 *   TWOPHASE_BENCH_KAFKA_MESSAGES=20000 npx ts-node --transpile-only bench/kafka/consume.ts
 *   (Node 24) node -r ts-node/register/transpile-only bench/kafka/consume.ts --variants \
 *     raw,memory,redis,raw-platformatic,memory-platformatic,redis-platformatic --out bench/results/kafka-clients.json
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Redis from 'ioredis';
import { type EachBatchHandler, Kafka, logLevel, Partitioners } from 'kafkajs';
import { ack, type Claimer, ConsumerBase, type Disposition, InMemoryClaimer, type Message, silentLogger } from '../../src';
import { Consumer as PlatformaticConsumer } from '@platformatic/kafka';
import { type KafkaClient, KafkaSource } from '../../adapters/kafka';
import { platformaticClient } from '../../adapters/kafka/platformatic-client';
import { RedisClaimer } from '../../adapters/redis';
import { sampleRedisServer, serverDelta } from '../support/redis-server-cost';
import { kafkaBrokerVersion } from './broker-version';

interface Args {
  messages: number;
  runs: number;
  partitions: number;
  bytes: number;
  brokers: string[];
  redisPort: number;
  out: string;
  variants: string[];
}

function parseArgs(argv: string[]): Args {
  const get = (name: string, fallback: string) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 && argv[i + 1] ? argv[i + 1]! : fallback;
  };
  return {
    messages: Number(get('messages', process.env.TWOPHASE_BENCH_KAFKA_MESSAGES ?? '100000')),
    runs: Number(get('runs', process.env.TWOPHASE_BENCH_KAFKA_RUNS ?? '3')),
    partitions: Number(get('partitions', '6')),
    bytes: Number(get('bytes', '1024')),
    brokers: get('brokers', process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
    redisPort: Number(get('redis-port', process.env.REDIS_PORT ?? '6379')),
    out: get('out', join(__dirname, '..', 'results', 'kafka.json')),
    variants: get('variants', 'raw,floor-memory,floor-redis,memory,redis').split(','),
  };
}

interface RunResult {
  /** Records per second from the first record received to the last effect applied. */
  msgsPerSec: number;
  /** ms from start() to the first record. */
  joinMs: number;
  /** ms from the first record to the last effect. */
  consumeMs: number;
  /** This process's CPU time (user + system) per record over the same span, µs. */
  cpuUsPerMsg: number;
  /** Redis variants: claim-store operations per Redis script call (coalescing and claimMany). */
  redisOpsPerCall?: number;
  /**
   * Redis variants: the Redis server's CPU time (`INFO cpu`) and command time (`INFO
   * commandstats`) per record, µs, from before start() to after stop() (bench/support/redis-server-cost.ts).
   * Clean only on a Redis no one else uses (`--redis-port` of a private server).
   */
  redisCpuUsPerMsg?: number;
  redisCommandUsPerMsg?: number;
}

const args = parseArgs(process.argv.slice(2));
const kafka = new Kafka({ clientId: 'twophase-bench', brokers: args.brokers, logLevel: logLevel.NOTHING });
const tag = randomBytes(3).toString('hex');
let platformaticShared: KafkaClient | undefined;
/** The @platformatic/kafka client of the twophase variants (classic group protocol). */
const platformatic = (): KafkaClient => (platformaticShared ??= platformaticClient({ clientId: 'twophase-bench', bootstrapBrokers: args.brokers }));
const topic = `twophase-bench-${tag}`;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function produce(): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: args.partitions }, { topic: `${topic}.dlq`, numPartitions: 1 }] });
  await admin.disconnect();
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  const chunk = 2000;
  for (let start = 0; start < args.messages; start += chunk) {
    const messages = [];
    for (let i = start; i < Math.min(args.messages, start + chunk); i++) {
      const id = `m-${i}`;
      const bare = JSON.stringify({ id, seq: i, pad: '' });
      const value = JSON.stringify({ id, seq: i, pad: 'x'.repeat(Math.max(0, args.bytes - bare.length)) });
      messages.push({ key: id, value, headers: { 'idempotency-key': id } });
    }
    await producer.send({ topic, messages });
  }
  await producer.disconnect();
}

/** The effect every variant applies: remember the record's id. */
class Effects {
  readonly seen = new Set<string>();
  first = 0;
  last = 0;
  cpuStart: NodeJS.CpuUsage | undefined;
  cpuUs = 0;
  apply(id: string): void {
    if (this.first === 0) {
      this.first = performance.now();
      this.cpuStart = process.cpuUsage();
    }
    this.seen.add(id);
    if (this.seen.size === args.messages) {
      this.last = performance.now();
      const d = process.cpuUsage(this.cpuStart);
      this.cpuUs = d.user + d.system;
    }
  }
}

async function waitDone(effects: Effects): Promise<void> {
  const until = Date.now() + 300_000;
  while (effects.last === 0) {
    if (Date.now() > until) throw new Error(`timed out with ${effects.seen.size}/${args.messages} effects`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Runs a plain kafkajs consumer of the bench topic with `eachBatch` until every effect is applied. */
async function consumeRaw(groupId: string, effects: Effects, eachBatch: EachBatchHandler): Promise<RunResult> {
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 250 });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  const started = performance.now();
  await consumer.run({ partitionsConsumedConcurrently: args.partitions, eachBatch });
  await waitDone(effects);
  await consumer.disconnect();
  return result(effects, started);
}

async function raw(run: number): Promise<RunResult> {
  const effects = new Effects();
  return consumeRaw(`bench-raw-${tag}-${run}`, effects, async ({ batch, resolveOffset, heartbeat }) => {
    for (const message of batch.messages) {
      const body = JSON.parse(message.value!.toString('utf8')) as { id: string };
      effects.apply(body.id);
      resolveOffset(message.offset);
    }
    await heartbeat();
  });
}

/** Raw @platformatic/kafka: one `consume()` stream, default autocommit, the same effect per record. */
async function rawPlatformatic(run: number): Promise<RunResult> {
  const effects = new Effects();
  const consumer = new PlatformaticConsumer({ clientId: 'bench-raw-platformatic', bootstrapBrokers: args.brokers, groupId: `bench-raw-platformatic-${tag}-${run}`, maxWaitTime: 250 });
  const started = performance.now();
  const stream = await consumer.consume({ topics: [topic], mode: 'earliest', autocommit: true });
  stream.on('data', (message) => {
    const body = JSON.parse((message.value as Buffer).toString('utf8')) as { id: string };
    effects.apply(body.id);
  });
  await waitDone(effects);
  await stream.close();
  await consumer.close(true);
  return result(effects, started);
}

/**
 * The floor: raw eachBatch plus the least work any claim-before-effect, commit-before-offset
 * design does per record, inline with no SDK around it. `memory`: one Map lookup and two Map
 * writes per record. Redis: per batch, one pipeline of plain `SET key owner NX PX` (the claims),
 * the effects in order, then one pipeline of `SET key done PX` (the commits) before the offsets
 * are resolved; no Lua, no fencing. A goal above the floor's ratio cannot be met by any design
 * that records a claim per key in that store; twophase's distance to the floor is its own cost.
 */
async function floor(run: number, store: 'memory' | Redis, prefix: string): Promise<RunResult> {
  const effects = new Effects();
  const claims = new Map<string, number>();
  return consumeRaw(`bench-floor-${tag}-${run}-${store === 'memory' ? 'm' : 'r'}`, effects, async ({ batch, resolveOffset, heartbeat }) => {
    if (store === 'memory') {
      for (const message of batch.messages) {
        const key = message.headers!['idempotency-key']!.toString();
        if (claims.get(key) === undefined) {
          claims.set(key, 1);
          const body = JSON.parse(message.value!.toString('utf8')) as { id: string };
          effects.apply(body.id);
          claims.set(key, 2);
        }
        resolveOffset(message.offset);
      }
    } else {
      const keys = batch.messages.map((message) => `${prefix}:{${message.headers!['idempotency-key']!.toString()}}`);
      const claimed = store.pipeline();
      for (const key of keys) claimed.set(key, 'leased', 'PX', 30_000, 'NX');
      const replies = (await claimed.exec())!;
      const commits = store.pipeline();
      batch.messages.forEach((message, i) => {
        if (replies[i]![1] !== 'OK') return;
        const body = JSON.parse(message.value!.toString('utf8')) as { id: string };
        effects.apply(body.id);
        commits.set(keys[i]!, 'done', 'PX', 600_000);
      });
      await commits.exec();
      for (const message of batch.messages) resolveOffset(message.offset);
    }
    await heartbeat();
  });
}

/**
 * The floor on @platformatic/kafka: {@link rawPlatformatic}'s stream plus the least claim + commit
 * work per record, inline. `memory`: a Map as in {@link floor}. Redis: the stream hands over one
 * record at a time, so per record `SET key owner NX PX`, the effect once it answered OK, then
 * `SET key done PX`, on a client with auto-pipelining (the commands of one event-loop turn go out
 * together, as the kafkajs floor's pipelines per batch); replies come back in order, so effects
 * keep the stream's order.
 */
async function floorPlatformatic(run: number, store: 'memory' | Redis, prefix: string): Promise<RunResult> {
  const effects = new Effects();
  const claims = new Map<string, number>();
  const pending: Promise<unknown>[] = [];
  const consumer = new PlatformaticConsumer({ clientId: 'bench-floor-platformatic', bootstrapBrokers: args.brokers, groupId: `bench-floor-platformatic-${tag}-${run}-${store === 'memory' ? 'm' : 'r'}`, maxWaitTime: 250 });
  const started = performance.now();
  const stream = await consumer.consume({ topics: [topic], mode: 'earliest', autocommit: true });
  stream.on('data', (message) => {
    const key = headerOf(message.headers as Map<unknown, unknown>);
    if (store === 'memory') {
      if (claims.get(key) !== undefined) return;
      claims.set(key, 1);
      const body = JSON.parse((message.value as Buffer).toString('utf8')) as { id: string };
      effects.apply(body.id);
      claims.set(key, 2);
      return;
    }
    const redisKey = `${prefix}:{${key}}`;
    pending.push(
      store.set(redisKey, 'leased', 'PX', 30_000, 'NX').then((reply) => {
        if (reply !== 'OK') return;
        const body = JSON.parse((message.value as Buffer).toString('utf8')) as { id: string };
        effects.apply(body.id);
        return store.set(redisKey, 'done', 'PX', 600_000);
      }),
    );
  });
  await waitDone(effects);
  // The last commits are still in flight when the last effect is applied.
  await Promise.all(pending);
  await stream.close();
  await consumer.close(true);
  return result(effects, started);
}

/** The `idempotency-key` header of a @platformatic/kafka record (its header map is keyed by Buffers). */
function headerOf(headers: Map<unknown, unknown>): string {
  for (const [name, value] of headers) if (String(name) === 'idempotency-key') return String(value);
  throw new Error('record without an idempotency-key header');
}

class Bench extends ConsumerBase<{ id: string }> {
  constructor(
    options: ConstructorParameters<typeof ConsumerBase>[0],
    private readonly effects: Effects,
  ) {
    super(options);
  }

  async handle(message: Message<{ id: string }>): Promise<Disposition> {
    this.effects.apply(message.body.id);
    return ack();
  }
}

async function twophase(run: number, claimer: Claimer, label: string, batchCommits?: boolean, client?: KafkaClient): Promise<RunResult> {
  const effects = new Effects();
  const groupId = `bench-${label}-${tag}-${run}`;
  const source = new KafkaSource(client ? { client } : { kafka }, { topics: [topic], groupId, fromBeginning: true, logger: silentLogger });
  const consumer = new Bench({ name: groupId, claimer, source, logger: silentLogger, deployment: { replicas: 1 }, ...(batchCommits === undefined ? {} : { batchCommits }) }, effects);
  const started = performance.now();
  await consumer.start();
  await waitDone(effects);
  await consumer.stop();
  return result(effects, started);
}

function result(effects: Effects, started: number): RunResult {
  const consumeMs = effects.last - effects.first;
  return {
    msgsPerSec: Math.round((args.messages / consumeMs) * 1000),
    joinMs: Math.round(effects.first - started),
    consumeMs: Math.round(consumeMs),
    cpuUsPerMsg: Number((effects.cpuUs / args.messages).toFixed(2)),
  };
}

function withServerCost(r: RunResult, server: { cpuUs: number; commandUs: number }): RunResult {
  return { ...r, redisCpuUsPerMsg: Number((server.cpuUs / args.messages).toFixed(2)), redisCommandUsPerMsg: Number((server.commandUs / args.messages).toFixed(2)) };
}

async function deleteKeys(redis: Redis, pattern: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 5000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}

async function main(): Promise<void> {
  const t0 = Date.now();
  const loadBefore = loadavg().map((l) => Number(l.toFixed(2)));
  console.log(`producing ${args.messages} records of ${args.bytes} B to ${topic} (${args.partitions} partitions)…`);
  await produce();
  const redis = new Redis({ host: '127.0.0.1', port: args.redisPort, maxRetriesPerRequest: 1 });
  const results: Record<string, RunResult[]> = Object.fromEntries(args.variants.map((v) => [v, []]));
  try {
    for (let run = 0; run < args.runs; run++) {
      for (const variant of args.variants) {
        let r: RunResult;
        if (variant === 'raw') r = await raw(run);
        else if (variant === 'floor-memory') r = await floor(run, 'memory', '');
        else if (variant === 'floor-redis') {
          const prefix = `twophase-bench-kafka-floor-${tag}-${run}`;
          const before = await sampleRedisServer(redis);
          r = withServerCost(await floor(run, redis, prefix), serverDelta(before, await sampleRedisServer(redis)));
          await deleteKeys(redis, `${prefix}:*`);
        }
        else if (variant === 'raw-platformatic') r = await rawPlatformatic(run);
        else if (variant === 'floor-memory-platformatic') r = await floorPlatformatic(run, 'memory', '');
        else if (variant === 'floor-redis-platformatic') {
          const prefix = `twophase-bench-kafka-floor-p-${tag}-${run}`;
          const pipelined = new Redis({ host: '127.0.0.1', port: args.redisPort, maxRetriesPerRequest: 1, enableAutoPipelining: true });
          const before = await sampleRedisServer(redis);
          r = withServerCost(await floorPlatformatic(run, pipelined, prefix), serverDelta(before, await sampleRedisServer(redis)));
          await pipelined.quit();
          await deleteKeys(redis, `${prefix}:*`);
        }
        else if (variant === 'memory') r = await twophase(run, new InMemoryClaimer(), 'memory');
        else if (variant === 'memory-platformatic') r = await twophase(run, new InMemoryClaimer(), variant, undefined, platformatic());
        else if (variant === 'redis' || variant === 'redis-batched' || variant === 'redis-platformatic') {
          const prefix = `twophase-bench-kafka-${tag}-${run}`;
          const claimer = new RedisClaimer({ redis, logger: silentLogger }, { prefix });
          await claimer.ready();
          const before = await sampleRedisServer(redis);
          r = await twophase(run, claimer, variant, variant === 'redis-batched' ? true : undefined, variant === 'redis-platformatic' ? platformatic() : undefined);
          r = withServerCost(r, serverDelta(before, await sampleRedisServer(redis)));
          r = { ...r, redisOpsPerCall: Number((claimer.stats.operations / claimer.stats.scriptCalls).toFixed(1)) };
          await claimer.close();
          await deleteKeys(redis, `${prefix}:*`);
        } else throw new Error(`unknown variant ${variant}`);
        results[variant]!.push(r);
        console.log(
          `run ${run + 1}/${args.runs} ${variant.padEnd(12)} ${String(r.msgsPerSec).padStart(7)} msg/s  (join ${r.joinMs} ms, consume ${r.consumeMs} ms, Node CPU ${r.cpuUsPerMsg} µs/record` +
            `${r.redisOpsPerCall === undefined ? '' : `, ${r.redisOpsPerCall} Redis ops/call`}${r.redisCpuUsPerMsg === undefined ? '' : `, Redis CPU ${r.redisCpuUsPerMsg} µs/record`})`,
        );
      }
    }
  } finally {
    redis.disconnect();
    const admin = kafka.admin();
    await admin.connect();
    await admin.deleteTopics({ topics: [topic, `${topic}.dlq`] }).catch(() => undefined);
    await admin.disconnect();
  }
  const medians = Object.fromEntries(Object.entries(results).map(([v, rs]) => [v, median(rs.map((r) => r.msgsPerSec))]));
  // Each client's variants are compared with that client's own raw consumer.
  const rawOf = (v: string) => (v.endsWith('-platformatic') ? 'raw-platformatic' : 'raw');
  const ratio = (v: string) => (medians[rawOf(v)] && medians[v] ? Number((medians[v]! / medians[rawOf(v)]!).toFixed(3)) : undefined);
  const cpuMedians = Object.fromEntries(Object.entries(results).map(([v, rs]) => [v, median(rs.map((r) => r.cpuUsPerMsg))]));
  const addedCpu = (v: string) => (cpuMedians[v] !== undefined && cpuMedians[rawOf(v)] !== undefined ? Number((cpuMedians[v]! - cpuMedians[rawOf(v)]!).toFixed(2)) : undefined);
  const summary = {
    benchmark: 'kafka',
    date: new Date().toISOString(),
    durationSec: Math.round((Date.now() - t0) / 1000),
    machine: {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model,
      totalMemGiB: Math.round(totalmem() / 1024 ** 3),
      node: process.version,
      kafkajs: '2.2.4',
      platformaticKafka: args.variants.some((v) => v.endsWith('-platformatic')) ? '2.12.1' : undefined,
      kafka: `${kafkaBrokerVersion(Number(args.brokers[0]?.split(':').pop())) ?? 'unknown version'} (single KRaft node on loopback, same machine)`,
      loadAverage1_5_15: { before: loadBefore, after: loadavg().map((l) => Number(l.toFixed(2))) },
    },
    config: {
      messages: args.messages,
      bodyBytes: args.bytes,
      partitions: args.partitions,
      runs: args.runs,
      handler: 'JSON decode + remember the id (same work in every variant)',
      raw: 'kafkajs eachBatch, resolveOffset per record, auto-commit, partitionsConsumedConcurrently = partitions',
      floor: 'raw plus the least claim + commit work per record, inline: a Map (floor-memory); per batch one pipeline of SET NX PX, the effects, one pipeline of SET PX (floor-redis); on @platformatic/kafka per record SET NX PX, the effect, SET PX on an auto-pipelining client (floor-redis-platformatic)',
      twophase: 'KafkaSource defaults (claimBatchSize 64, commitIntervalMs 1000), ConsumerBase defaults (concurrency 10, leaseTtlMs 30000, keep-alive on)',
      measured: 'first record received → last effect applied; group join excluded (joinMs)',
    },
    results: Object.fromEntries(
      Object.entries(results).map(([v, rs]) => [v, { medianMsgsPerSec: medians[v], ratioToRaw: v === rawOf(v) ? 1 : ratio(v), medianCpuUsPerMsg: cpuMedians[v], addedCpuUsPerMsg: v === rawOf(v) ? 0 : addedCpu(v), runs: rs }]),
    ),
    goals: {
      memory: { goal: '≥ 0.8 × raw', ratio: ratio('memory'), floorRatio: ratio('floor-memory') },
      redis: { goal: '≥ 0.6 × raw', ratio: ratio('redis'), floorRatio: ratio('floor-redis') },
      memoryPlatformatic: { goal: '≥ 0.8 × raw-platformatic', ratio: ratio('memory-platformatic'), floorRatio: ratio('floor-memory-platformatic') },
      redisPlatformatic: { goal: '≥ 0.6 × raw-platformatic', ratio: ratio('redis-platformatic'), floorRatio: ratio('floor-redis-platformatic') },
    },
  };
  mkdirSync(join(args.out, '..'), { recursive: true });
  writeFileSync(args.out, `${JSON.stringify(summary, null, 2)}\n`);
  console.log('');
  for (const v of Object.keys(results)) {
    console.log(`${v.padEnd(20)} median ${String(medians[v]).padStart(7)} msg/s  ratio to ${rawOf(v)} ${v === rawOf(v) ? '1.000' : String(ratio(v))}  Node CPU ${cpuMedians[v]} µs/record (added ${v === rawOf(v) ? 0 : addedCpu(v)})`);
  }
  console.log(`written to ${args.out}`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
