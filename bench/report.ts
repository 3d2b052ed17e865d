/**
 * The benchmark report (`npm run bench`): one run, side by side, of
 *
 * 1. throughput: the adapters' own benchmarks (bench/core/pipeline.ts, bench/redis/claim-commit.ts,
 *    bench/rabbitmq/run.ts, bench/rabbitmq/replay.ts (`twophase dlq replay`), bench/postgres/inbox.ts, bench/postgres/gated.ts,
 *    bench/outbox/run.ts (the transactional outbox),
 *    bench/kafka/consume.ts), each in a child process, one after another,
 *    with the sizes below, their JSON written to bench/results/*.report.tmp.json;
 * 2. added latency: for each broker (in-process, RabbitMQ, Kafka) × claimer (none = the raw
 *    client, InMemoryClaimer, RedisClaimer), messages published at a steady rate well under
 *    capacity and timed from publish to settle (ack) in the same process; twophase's added
 *    latency is its percentile minus the raw one;
 * 3. the per-call cost of claim + commit against Powertools idempotency on the same Redis
 *    (bench/powertools/compare.ts).
 *
 * 4. issue #14's goals, each beside its measured figure, the spread over the alternating runs and
 *    the raw rate (bench/goals.ts), with the floors under the Redis claimer (bench/redis/floor.ts).
 *
 * Every Redis figure comes from a private redis-server this report starts on a free port (the
 * children get it as REDIS_PORT / --port / --redis-port), so `INFO cpu` around a run holds only
 * that run's work; without the redis-server binary it falls back to 127.0.0.1:6379.
 *
 * Writes bench/results/latest.json, bench/results/goals.md and bench/results/latest.png (and the
 * .svg it is rendered from, with @resvg/resvg-js). Not a test: nothing fails on a number.
 *
 *   npx ts-node --transpile-only bench/report.ts [--quick] [--skip rabbitmq,kafka,postgres,gated,outbox,powertools,throughput,latency]
 *
 * Needs RabbitMQ (127.0.0.1:5672) and Kafka (127.0.0.1:9092, `npm run kafka:start`); a broker that
 * is not reachable is skipped and reported as such.
 */
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Resvg } from '@resvg/resvg-js';
import amqp from 'amqplib';
import Redis from 'ioredis';
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import { MemoryBroker, MemorySource } from '../adapters/memory';
import { KafkaSource } from '../adapters/kafka';
import { RabbitMqSource } from '../adapters/rabbitmq';
import { RedisClaimer } from '../adapters/redis';
import { ack, type Claimer, ConsumerBase, type Disposition, InMemoryClaimer, type MessageSource, silentLogger } from '../src';
import { RedisServerProcess } from '../test/integration/redis/support/redis-process';
import { evaluateGoals, type Figures, goalsMarkdown, median } from './goals';
import { comparePowertools, type CompareResult } from './powertools/compare';

const RESULTS = join(__dirname, 'results');
const AMQP_URL = process.env.TWOPHASE_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const KAFKA_BROKERS = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
/** The Redis every part uses: a private server started by main(), else REDIS_PORT or 6379. */
let redisPort = Number(process.env.REDIS_PORT ?? 6379);
/** Alternating rounds of the latency part (each round: raw, in-memory, Redis on every broker). */
const LATENCY_ROUNDS = 3;

type Broker = 'memory' | 'rabbitmq' | 'kafka';
type ClaimerName = 'none' | 'memory' | 'redis';

interface Args {
  quick: boolean;
  skip: Set<string>;
}

function parseArgs(argv: string[]): Args {
  const i = argv.indexOf('--skip');
  return { quick: argv.includes('--quick'), skip: new Set(i >= 0 ? (argv[i + 1] ?? '').split(',') : []) };
}

function reachable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.connect(port, host, () => done(true));
  });
}

/** Runs a TypeScript bench in a child process; resolves with its stdout. */
function runBench(script: string, args: string[], env: Record<string, string> = {}, timeoutMs = 900_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['-r', 'ts-node/register/transpile-only', join(__dirname, script), ...args],
      { env: { ...process.env, ...env }, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => (error ? reject(new Error(`${script} failed: ${error.message}\n${stderr.slice(-2000)}`)) : resolve(stdout)),
    );
  });
}

const readJson = (file: string): unknown => JSON.parse(readFileSync(file, 'utf8'));
const tmp = (name: string) => join(RESULTS, `${name}.report.tmp.json`);

// ---------------------------------------------------------------- throughput (adapters' benches)

/** msgs/s by broker and claimer ('none' = the raw client), as the adapters' benches measured them. */
type Throughput = Partial<Record<Broker, Partial<Record<ClaimerName, number>>>>;

async function throughput(args: Args, available: Record<Broker, boolean>): Promise<{ table: Throughput; raw: Record<string, unknown>; figures: Figures }> {
  const table: Throughput = {};
  const raw: Record<string, unknown> = {};
  const figures: { -readonly [K in keyof Figures]: Figures[K] } = {};
  const q = args.quick;
  const redisEnv = { REDIS_PORT: String(redisPort) };
  step('throughput: in-process pipeline (bench/core/pipeline.ts)');
  const core = await runBench('core/pipeline.ts', [String(q ? 20_000 : 100_000), String(q ? 3 : 5)]);
  const line = (label: RegExp) => {
    const m = new RegExp(`${label.source}\\s+median (\\d+) msg/s\\s+cpu ([\\d.]+) us/msg\\s+runs ([\\d ]+)`).exec(core);
    return { rate: Number(m?.[1] ?? NaN), cpu: Number(m?.[2] ?? NaN), runs: (m?.[3] ?? '').trim().split(/\s+/).map(Number) };
  };
  const coreRaw = line(/raw consume\+ack/);
  const coreTwo = line(/ConsumerBase \+ in-memory/);
  table.memory = { none: coreRaw.rate, memory: coreTwo.rate };
  figures.core = { rawRate: coreRaw.rate, twophaseRate: coreTwo.rate, rawCpuUs: coreRaw.cpu, twophaseCpuUs: coreTwo.cpu, rawRuns: coreRaw.runs, twophaseRuns: coreTwo.runs };
  raw.core = core.trim();

  step('throughput: Redis claimer (bench/redis/claim-commit.ts)');
  await runBench('redis/claim-commit.ts', ['--runs', q ? '3' : '5', '--keys', q ? '5000' : '20000', '--keys-serial', q ? '1000' : '4000', '--port', String(redisPort), '--out', tmp('redis')]);
  raw.redis = readJson(tmp('redis'));
  step('floors under the Redis claimer (bench/redis/floor.ts, its own private redis-server)');
  await runBench('redis/floor.ts', ['--runs', q ? '3' : '5', '--calls', q ? '5000' : '20000', '--out', tmp('redis-floor')]);
  raw.redisFloor = readJson(tmp('redis-floor'));

  if (available.rabbitmq) {
    step('throughput: RabbitMQ (bench/rabbitmq/run.ts, prefetch 100)');
    await runBench('rabbitmq/run.ts', [], {
      ...redisEnv,
      BENCH_MESSAGES: q ? '10000' : '50000',
      BENCH_RUNS: '3',
      BENCH_PREFETCH: '100',
      // redis-batch-w2: batchClaims with a 2 ms claim window (bench/rabbitmq/run.ts), reported beside redis.
      BENCH_VARIANTS: 'raw,floor-memory,floor-redis,memory,redis,redis-batch-w2',
      BENCH_OUT: tmp('rabbitmq'),
    });
    const r = readJson(tmp('rabbitmq')) as { results: Array<NonNullable<Figures['rabbitmq']>[number]> };
    figures.rabbitmq = r.results;
    const at = (v: string) => r.results.find((x) => x.prefetch === 100 && x.variant === v)?.medianMsgsPerSec;
    table.rabbitmq = { none: at('raw'), memory: at('memory'), redis: at('redis') };
    raw.rabbitmq = r;
    step('throughput: RabbitMQ DLQ replay (bench/rabbitmq/replay.ts, `twophase dlq replay`)');
    await runBench('rabbitmq/replay.ts', [], { BENCH_MESSAGES: q ? '2000' : '10000', BENCH_RUNS: '3', BENCH_OUT: tmp('replay') });
    const replay = readJson(tmp('replay')) as { medianMsgsPerSec: number; medianCpuMicrosPerMessage: number };
    raw.replay = replay;
    step(`DLQ replay: ${replay.medianMsgsPerSec} msg/s (${replay.medianCpuMicrosPerMessage} µs CPU/msg in the tool)`);
    if (!args.skip.has('postgres')) {
      step('throughput: PostgreSQL inbox on RabbitMQ (bench/postgres/inbox.ts: floor vs transactional vs Redis claimer)');
      try {
        await runBench('postgres/inbox.ts', ['--count', q ? '2000' : '5000', '--out', tmp('postgres')]);
        raw.postgres = readJson(tmp('postgres'));
      } catch (error) {
        raw.postgres = { skipped: (error as Error).message.slice(0, 300) };
      }
    }
  }
  if (!args.skip.has('postgres') && !args.skip.has('gated')) {
    step('duplicates: Redis gate in front of the PostgreSQL inbox (bench/postgres/gated.ts: gated vs plain transactional inbox)');
    try {
      await runBench('postgres/gated.ts', ['--rounds', q ? '2' : '5', '--keys', q ? '300' : '1000', '--out', tmp('gated')]);
      raw.gated = readJson(tmp('gated'));
    } catch (error) {
      raw.gated = { skipped: (error as Error).message.slice(0, 300) };
    }
  }
  if (available.rabbitmq && available.kafka && !args.skip.has('postgres') && !args.skip.has('outbox')) {
    step('outbox: relay vs raw confirmed publish, staging vs INSERT, lag, table size (bench/outbox/run.ts)');
    try {
      await runBench('outbox/run.ts', ['--runs', q ? '2' : '3', '--messages', q ? '1000' : '2000', '--stage', q ? '200' : '300', '--lag-seconds', q ? '5' : '10', '--size', q ? '20000' : '100000', '--out', tmp('outbox')]);
      raw.outbox = readJson(tmp('outbox'));
      figures.outbox = raw.outbox as Figures['outbox'];
    } catch (error) {
      raw.outbox = { skipped: (error as Error).message.slice(0, 300) };
    }
  }
  if (available.kafka) {
    step('throughput: Kafka (bench/kafka/consume.ts)');
    await runBench('kafka/consume.ts', ['--messages', q ? '10000' : '50000', '--runs', '3', '--variants', 'raw,floor-memory,floor-redis,memory,redis', '--redis-port', String(redisPort), '--out', tmp('kafka')]);
    const k = readJson(tmp('kafka')) as { results: Record<string, { medianMsgsPerSec: number; runs: NonNullable<Figures['kafka']>[string]['runs'] }> };
    figures.kafka = k.results;
    table.kafka = { none: k.results.raw?.medianMsgsPerSec, memory: k.results.memory?.medianMsgsPerSec, redis: k.results.redis?.medianMsgsPerSec };
    raw.kafka = k;
  }
  return { table, raw, figures };
}

// ---------------------------------------------------------------- latency (measured here)

export interface LatencyRow {
  readonly broker: Broker;
  readonly claimer: ClaimerName;
  readonly messages: number;
  readonly ratePerSec: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /**
   * This row's percentile minus the raw client's on the same broker (0 for the raw row): the
   * median over the rounds of the per-round differences (raw and twophase measured back to back).
   */
  readonly addedP50Ms: number;
  readonly addedP99Ms: number;
  /** The per-round added p99, min and max. */
  readonly addedP99RangeMs: readonly [number, number];
  readonly rounds: number;
}

const T_HEADER = 'bench-t';

class TimedConsumer extends ConsumerBase<unknown> {
  async handle(): Promise<Disposition> {
    return ack();
  }
}

/** Publish-to-settle latencies (ms) of `count` messages published at `ratePerSec`. */
interface LatencyProbe {
  /** Starts consuming; `settled(t)` must be called at each settle with the message's publish time. */
  start(settled: (publishedAt: number) => void): Promise<void>;
  publish(key: string, publishedAt: number): Promise<void>;
  stop(): Promise<void>;
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function measureLatency(probe: LatencyProbe, count: number, ratePerSec: number, warmup: number): Promise<number[]> {
  const lat: number[] = [];
  let settled = 0;
  let measuring = false;
  await probe.start((publishedAt) => {
    settled++;
    if (measuring) lat.push(performance.now() - publishedAt);
  });
  const run = randomBytes(3).toString('hex');
  const pace = async (n: number, label: string) => {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const due = t0 + (i * 1000) / ratePerSec;
      const wait = due - performance.now();
      if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
      await probe.publish(`${run}-${label}-${i}`, performance.now());
    }
  };
  await pace(warmup, 'w');
  const until = Date.now() + 30_000;
  while (settled < warmup && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
  measuring = true;
  await pace(count, 'm');
  const deadline = Date.now() + 60_000;
  while (lat.length < count && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  await probe.stop();
  return lat.sort((a, b) => a - b);
}

/** A twophase consumer on `source` whose settle times are reported through the observer. */
function twophaseProbe(
  makeSource: () => MessageSource,
  claimer: () => Claimer,
  publish: LatencyProbe['publish'],
  hooks: { prepare?: () => Promise<void>; ready?: (source: MessageSource) => Promise<void>; cleanup: () => Promise<void> },
): LatencyProbe {
  let consumer: TimedConsumer | undefined;
  return {
    async start(settled) {
      await hooks.prepare?.();
      const source = makeSource();
      consumer = new TimedConsumer({
        name: `bench-${randomBytes(3).toString('hex')}`,
        claimer: claimer(),
        source,
        concurrency: 100,
        deployment: { replicas: 1 },
        logger: silentLogger,
        observers: [
          {
            onDelivery: (info) => ({
              end: (result) => {
                if (result.action !== 'ack') return;
                const t = info.headers[T_HEADER];
                settled(Number(Buffer.isBuffer(t) ? t.toString() : t));
              },
            }),
          },
        ],
      });
      await consumer.start();
      await hooks.ready?.(source);
    },
    publish,
    async stop() {
      await consumer?.stop();
      await hooks.cleanup();
    },
  };
}

async function latency(args: Args, available: Record<Broker, boolean>): Promise<LatencyRow[]> {
  const rows: LatencyRow[] = [];
  const count = args.quick ? 500 : 2000;
  const redis = new Redis({ host: '127.0.0.1', port: redisPort });
  const prefix = `bench-lat-${randomBytes(3).toString('hex')}`;
  const claimers: Record<Exclude<ClaimerName, 'none'>, () => Claimer> = {
    memory: () => new InMemoryClaimer(),
    redis: () => new RedisClaimer({ redis, logger: silentLogger }, { prefix }),
  };
  const probes: Record<Broker, (c: ClaimerName) => LatencyProbe> = {
    memory: (c) => {
      const broker = new MemoryBroker();
      const publish = async (key: string, t: number) => void broker.publish('lat', { body: '{}', headers: { 'idempotency-key': key, [T_HEADER]: String(t) } });
      if (c === 'none') {
        return {
          start: async (settled) => {
            broker.consume('lat', 100, (d) => {
              JSON.parse(d.message.body.toString('utf8'));
              broker.ack(d.consumerTag, d.deliveryTag);
              settled(Number(d.message.headers[T_HEADER]));
            });
          },
          publish,
          stop: async () => broker.close(),
        };
      }
      return twophaseProbe(() => new MemorySource({ broker, queue: 'lat' }), claimers[c], publish, { cleanup: async () => broker.close() });
    },
    rabbitmq: (c) => {
      const queue = `bench-lat.${randomBytes(4).toString('hex')}`;
      let connection: amqp.ChannelModel | undefined;
      let channel: amqp.ConfirmChannel | undefined;
      const open = async () => {
        connection = await amqp.connect(AMQP_URL, { clientProperties: { connection_name: 'twophase-bench-latency' } });
        channel = await connection.createConfirmChannel();
      };
      const publish = (key: string, t: number) =>
        new Promise<void>((resolve, reject) => channel!.sendToQueue(queue, Buffer.from('{}'), { headers: { 'idempotency-key': key, [T_HEADER]: String(t) } }, (err) => (err ? reject(err) : resolve())));
      const cleanup = async () => {
        for (const q of [queue, `${queue}.dlq`, `${queue}.delay.1000ms`, `${queue}.delay.5000ms`]) await channel?.deleteQueue(q).catch(() => undefined);
        await channel?.deleteExchange(`${queue}.dlx`).catch(() => undefined);
        await connection?.close().catch(() => undefined);
      };
      if (c === 'none') {
        // Its own connection, as the adapter's consumer has: publishes and acks on one
        // connection would add Nagle/delayed-ACK stalls the twophase variants do not have.
        let consumerConnection: amqp.ChannelModel | undefined;
        let consumerChannel: amqp.Channel | undefined;
        return {
          start: async (settled) => {
            await open();
            await channel!.assertQueue(queue, { durable: true });
            consumerConnection = await amqp.connect(AMQP_URL, { clientProperties: { connection_name: 'twophase-bench-latency-raw' } });
            consumerChannel = await consumerConnection.createChannel();
            await consumerChannel.prefetch(100);
            await consumerChannel.consume(queue, (m) => {
              if (!m) return;
              JSON.parse(m.content.toString('utf8'));
              consumerChannel!.ack(m);
              settled(Number(String(m.properties.headers?.[T_HEADER])));
            });
          },
          publish,
          stop: async () => {
            await consumerConnection?.close().catch(() => undefined);
            await cleanup();
          },
        };
      }
      return twophaseProbe(
        () => new RabbitMqSource({ url: AMQP_URL, queue, delayTiersMs: [1000, 5000], logger: silentLogger, connectionName: 'twophase-bench-latency-consumer' }),
        claimers[c],
        publish,
        { prepare: open, cleanup },
      );
    },
    kafka: (c) => {
      const topic = `bench-lat-${randomBytes(4).toString('hex')}`;
      const kafka = new Kafka({ clientId: 'twophase-bench-latency', brokers: KAFKA_BROKERS, logLevel: logLevel.NOTHING });
      const admin = kafka.admin();
      const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
      const group = { sessionTimeout: 6000, rebalanceTimeout: 8000, heartbeatInterval: 500, maxWaitTimeInMs: 20 } as const;
      const prepare = async () => {
        await admin.connect();
        await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 3 }, { topic: `${topic}.dlq`, numPartitions: 3 }] });
        await producer.connect();
      };
      const publish = async (key: string, t: number) => void (await producer.send({ topic, acks: 1, messages: [{ key, value: '{}', headers: { 'idempotency-key': key, [T_HEADER]: String(t) } }] }));
      const cleanup = async () => {
        await producer.disconnect().catch(() => undefined);
        await admin.deleteTopics({ topics: [topic, `${topic}.dlq`] }).catch(() => undefined);
        await admin.disconnect().catch(() => undefined);
      };
      const waitAssigned = async (assigned: () => boolean) => {
        const until = Date.now() + 30_000;
        while (!assigned() && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
      };
      if (c === 'none') {
        const consumer = kafka.consumer({ groupId: `${topic}-raw`, ...group });
        let joined = false;
        return {
          start: async (settled) => {
            await prepare();
            consumer.on(consumer.events.GROUP_JOIN, () => (joined = true));
            await consumer.connect();
            await consumer.subscribe({ topics: [topic], fromBeginning: true });
            await consumer.run({
              partitionsConsumedConcurrently: 3,
              eachMessage: async ({ message }) => {
                JSON.parse(message.value?.toString('utf8') ?? '{}');
                settled(Number(message.headers?.[T_HEADER]?.toString()));
              },
            });
            await waitAssigned(() => joined);
          },
          publish,
          stop: async () => {
            await consumer.disconnect().catch(() => undefined);
            await cleanup();
          },
        };
      }
      return twophaseProbe(
        () => new KafkaSource({ kafka }, { topics: [topic], groupId: `${topic}-2p`, fromBeginning: true, consumer: group, logger: silentLogger }),
        claimers[c],
        publish,
        { prepare, ready: (source) => waitAssigned(() => (source as KafkaSource).assignment.length > 0), cleanup },
      );
    },
  };
  const rounds = args.quick ? 1 : LATENCY_ROUNDS;
  try {
    for (const broker of ['memory', 'rabbitmq', 'kafka'] as const) {
      if (!available[broker]) continue;
      const per = new Map<ClaimerName, { p50: number[]; p99: number[]; n: number }>();
      for (let round = 0; round < rounds; round++) {
        // Raw first in even rounds, last in odd ones, so drift hits every variant alike.
        const order = round % 2 ? (['redis', 'memory', 'none'] as const) : (['none', 'memory', 'redis'] as const);
        for (const c of order) {
          step(`latency round ${round + 1}/${rounds}: ${broker} × ${c === 'none' ? 'raw client' : `${c} claimer`} (${count} messages at ${LATENCY_RATES[broker]}/s)`);
          const lat = await measureLatency(probes[broker](c), count, LATENCY_RATES[broker], Math.floor(count / 10));
          const s = per.get(c) ?? { p50: [], p99: [], n: 0 };
          s.p50.push(percentile(lat, 50));
          s.p99.push(percentile(lat, 99));
          s.n = Math.min(s.n || lat.length, lat.length);
          per.set(c, s);
        }
      }
      const raw = per.get('none')!;
      for (const c of ['none', 'memory', 'redis'] as const) {
        const s = per.get(c)!;
        const added50 = s.p50.map((v, i) => v - raw.p50[i]!);
        const added99 = s.p99.map((v, i) => v - raw.p99[i]!);
        rows.push({
          broker,
          claimer: c,
          messages: s.n,
          ratePerSec: LATENCY_RATES[broker],
          p50Ms: round(median(s.p50)),
          p99Ms: round(median(s.p99)),
          addedP50Ms: round(median(added50)),
          addedP99Ms: round(median(added99)),
          addedP99RangeMs: [round(Math.min(...added99)), round(Math.max(...added99))],
          rounds,
        });
      }
    }
  } finally {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 2000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
    redis.disconnect();
  }
  return rows;
}

const round = (x: number) => Math.round(x * 100) / 100;

/** Publish rate of the latency part, msg/s: issue #14 states the latency goal at 500 msg/s on every broker. */
const LATENCY_RATES: Record<Broker, number> = { memory: 500, rabbitmq: 500, kafka: 500 };

// ---------------------------------------------------------------- chart

const COLORS: Record<ClaimerName, string> = { none: '#8c8c8c', memory: '#4c78a8', redis: '#e45756' };
const LABELS: Record<ClaimerName, string> = { none: 'raw client', memory: 'twophase + InMemoryClaimer', redis: 'twophase + RedisClaimer' };
const BROKER_LABELS: Record<Broker, string> = { memory: 'in-process', rabbitmq: 'RabbitMQ', kafka: 'Kafka' };

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
}

/** One grouped bar panel: groups = brokers, bars = claimers. */
function panel(x0: number, y0: number, w: number, h: number, title: string, unit: string, values: Partial<Record<Broker, Partial<Record<ClaimerName, number>>>>, claimers: readonly ClaimerName[]): string {
  const brokers = (['memory', 'rabbitmq', 'kafka'] as const).filter((b) => values[b] && claimers.some((c) => Number.isFinite(values[b]![c])));
  const all = brokers.flatMap((b) => claimers.map((c) => values[b]![c] ?? 0)).filter(Number.isFinite);
  const max = Math.max(1e-9, ...all.map((v) => Math.max(0, v)));
  const min = Math.min(0, ...all);
  const top = y0 + 40;
  const bottom = y0 + h - 40;
  const scale = (v: number) => ((v - min) / (max - min)) * (bottom - top);
  const zero = bottom - scale(0);
  const groupW = (w - 60) / Math.max(1, brokers.length);
  const barW = Math.min(40, (groupW - 20) / claimers.length);
  let out = `<text x="${x0 + w / 2}" y="${y0 + 20}" font-size="15" font-weight="bold" text-anchor="middle">${esc(title)}</text>`;
  if (brokers.length === 0) return `${out}<text x="${x0 + w / 2}" y="${y0 + h / 2}" font-size="12" text-anchor="middle" fill="#777">not measured in this run</text>`;
  out += `<line x1="${x0 + 50}" y1="${zero}" x2="${x0 + w - 10}" y2="${zero}" stroke="#333"/>`;
  for (let i = 0; i <= 4; i++) {
    const v = min + ((max - min) * i) / 4;
    const y = bottom - scale(v);
    out += `<line x1="${x0 + 50}" y1="${y}" x2="${x0 + w - 10}" y2="${y}" stroke="#ddd"/><text x="${x0 + 46}" y="${y + 4}" font-size="10" text-anchor="end">${fmt(v)}</text>`;
  }
  out += `<text x="${x0 + 12}" y="${(top + bottom) / 2}" font-size="11" text-anchor="middle" transform="rotate(-90 ${x0 + 12} ${(top + bottom) / 2})">${esc(unit)}</text>`;
  brokers.forEach((b, gi) => {
    const gx = x0 + 55 + gi * groupW + (groupW - barW * claimers.length) / 2;
    claimers.forEach((c, ci) => {
      const v = values[b]![c];
      if (v === undefined || !Number.isFinite(v)) return;
      const bx = gx + ci * barW;
      const y = v >= 0 ? zero - (scale(v) - scale(0)) : zero;
      const bh = Math.abs(scale(v) - scale(0));
      out += `<rect x="${bx}" y="${y}" width="${barW - 4}" height="${Math.max(1, bh)}" fill="${COLORS[c]}"/><text x="${bx + (barW - 4) / 2}" y="${v >= 0 ? y - 3 : y + bh + 11}" font-size="9" text-anchor="middle">${fmt(v)}</text>`;
    });
    out += `<text x="${x0 + 55 + gi * groupW + groupW / 2}" y="${bottom + 18}" font-size="12" text-anchor="middle">${BROKER_LABELS[b]}</text>`;
  });
  return out;
}

function fmt(v: number): string {
  if (Math.abs(v) >= 10_000) return `${(v / 1000).toFixed(0)}k`;
  if (Math.abs(v) >= 1000) return `${(v / 1000).toFixed(1)}k`;
  if (Math.abs(v) >= 10) return v.toFixed(0);
  return v.toFixed(2);
}

function chart(tp: Throughput, lat: readonly LatencyRow[], machine: string): string {
  const width = 1500;
  const height = 900;
  const latency = (key: 'addedP50Ms' | 'addedP99Ms') => {
    const out: Partial<Record<Broker, Partial<Record<ClaimerName, number>>>> = {};
    for (const r of lat) (out[r.broker] ??= {})[r.claimer] = r[key];
    return out;
  };
  // Throughput differs by an order of magnitude between brokers: one panel (own scale) each.
  let body = '';
  (['memory', 'rabbitmq', 'kafka'] as const).forEach((b, i) => {
    body += panel(i * 500, 0, 500, 420, `${BROKER_LABELS[b]}: throughput (msgs/s, higher is better)`, 'msgs/s', tp[b] ? { [b]: tp[b] } : {}, ['none', 'memory', 'redis']);
  });
  body += panel(0, 430, 750, 420, 'Added latency p50, twophase − raw (ms, lower is better)', 'ms', latency('addedP50Ms'), ['memory', 'redis']);
  body += panel(750, 430, 750, 420, 'Added latency p99, twophase − raw (ms, lower is better)', 'ms', latency('addedP99Ms'), ['memory', 'redis']);
  let lx = 60;
  for (const c of ['none', 'memory', 'redis'] as const) {
    body += `<rect x="${lx}" y="${height - 30}" width="14" height="14" fill="${COLORS[c]}"/><text x="${lx + 20}" y="${height - 18}" font-size="12">${LABELS[c]}</text>`;
    lx += 260;
  }
  body += `<text x="${width - 10}" y="${height - 18}" font-size="10" text-anchor="end" fill="#555">${esc(machine)}</text>`;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="DejaVu Sans, sans-serif"><rect width="100%" height="100%" fill="#fff"/>${body}</svg>`;
}

// ---------------------------------------------------------------- main

function step(text: string): void {
  process.stdout.write(`[${new Date().toISOString().slice(11, 19)}] ${text}\n`);
}

function versionOf(cmd: string, args: string[], re: RegExp): string | undefined {
  try {
    return re.exec(execFileSync(cmd, args, { encoding: 'utf8', timeout: 20_000 }))?.[1];
  } catch {
    return undefined;
  }
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  mkdirSync(RESULTS, { recursive: true });
  const started = Date.now();
  const available: Record<Broker, boolean> = {
    memory: true,
    rabbitmq: !args.skip.has('rabbitmq') && (await reachable('127.0.0.1', Number(new URL(AMQP_URL).port || 5672))),
    kafka: !args.skip.has('kafka') && (await reachable(KAFKA_BROKERS[0]!.split(':')[0]!, Number(KAFKA_BROKERS[0]!.split(':')[1]))),
  };
  let privateRedis: RedisServerProcess | undefined;
  try {
    privateRedis = await RedisServerProcess.start();
    redisPort = privateRedis.port;
  } catch (error) {
    step(`no private redis-server (${(error as Error).message.slice(0, 120)}); using 127.0.0.1:${redisPort}, whose INFO counters include every other client`);
  }
  try {
    await report(args, available, started, privateRedis !== undefined);
  } finally {
    await privateRedis?.destroy();
  }
}

async function report(args: Args, available: Record<Broker, boolean>, started: number, privateRedis: boolean): Promise<void> {
  if (!(await reachable('127.0.0.1', redisPort))) throw new Error(`Redis is not reachable on 127.0.0.1:${redisPort}`);
  const machine = {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    totalMemGiB: Math.round(totalmem() / 2 ** 30),
    loadAvgAtStart: loadavg().map((x) => Number(x.toFixed(2))),
    node: process.version,
    redis: versionOf('redis-server', ['--version'], /v=([\d.]+)/),
    redisServer: privateRedis ? `private redis-server on 127.0.0.1:${redisPort}, started for this report` : `shared 127.0.0.1:${redisPort}`,
    rabbitmq: available.rabbitmq ? versionOf('rabbitmqctl', ['version'], /([\d.]+)/) : undefined,
    kafka: available.kafka ? existsSync(join(__dirname, '..', '.kafka')) ? 'local KRaft broker (scripts/kafka)' : 'reachable' : undefined,
  };
  step(`machine: ${machine.cpus} × ${machine.cpuModel}, ${machine.totalMemGiB} GiB, Node ${machine.node}; brokers: ${Object.entries(available).filter(([, v]) => v).map(([k]) => k).join(', ')}`);
  const tp = args.skip.has('throughput') ? { table: {}, raw: {}, figures: {} } : await throughput(args, available);
  const lat = args.skip.has('latency') ? [] : await latency(args, available);
  let powertools: CompareResult | undefined;
  if (!args.skip.has('powertools')) {
    step('claim+commit vs Powertools idempotency (bench/powertools/compare.ts)');
    powertools = await comparePowertools({ keys: args.quick ? 1000 : 5000, rounds: 3 });
  }
  const goals = evaluateGoals({ ...tp.figures, latency: lat, latencyRatePerSec: LATENCY_RATES, powertools: powertools?.rows });
  const report = {
    benchmark: 'bench/report.ts',
    date: new Date().toISOString(),
    durationSec: Math.round((Date.now() - started) / 1000),
    quick: args.quick,
    machine,
    notes:
      'Everything (brokers, Redis, PostgreSQL, this process) shares one machine; numbers move with its load. Throughput: the adapters\' benches (drain a pre-filled queue/topic, no-op or JSON-decode handler); RabbitMQ at prefetch 100, ConsumerBase concurrency = prefetch. Latency: publish-to-settle in one process at 500 msg/s on every broker, in alternating rounds; added = the median over the rounds of (twophase percentile − raw percentile) on the same broker. Redis: a private redis-server (machine.redisServer), so INFO cpu around a run holds only its work. Goals: bench/goals.ts, medians with the spread over the runs. Powertools: same trivial function, same private redis-server, 30 s lease = registered Lambda context remaining time.',
    goals,
    throughput: { msgsPerSec: tp.table, details: tp.raw },
    latency: lat,
    powertools,
  };
  writeFileSync(join(RESULTS, 'latest.json'), `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(join(RESULTS, 'goals.md'), `Issue #14 goals, \`npm run bench\` of ${report.date} (${machine.cpus} × ${machine.cpuModel}, load ${machine.loadAvgAtStart.join(' ')} at start)\n\n${goalsMarkdown(goals)}\n`);
  const svg = chart(tp.table, lat, `${machine.cpus} × ${machine.cpuModel}, Node ${machine.node}, ${report.date.slice(0, 10)}`);
  writeFileSync(join(RESULTS, 'latest.svg'), svg);
  const png = new Resvg(svg, { fitTo: { mode: 'width', value: 1500 }, font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans' } }).render().asPng();
  writeFileSync(join(RESULTS, 'latest.png'), png);
  step(`written bench/results/latest.json, latest.svg, latest.png in ${report.durationSec} s`);
  console.table(
    Object.entries(tp.table).flatMap(([b, v]) => Object.entries(v ?? {}).map(([c, n]) => ({ broker: b, claimer: c, msgsPerSec: n }))),
  );
  console.table(lat);
  if (powertools) console.table(powertools.rows);
  console.log(`\nissue #14 goals (nothing fails on a number; also in bench/results/goals.md)\n${goalsMarkdown(goals)}`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
