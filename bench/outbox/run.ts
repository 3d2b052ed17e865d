/**
 * The transactional outbox benchmark (`npm run bench:outbox`), on the shared PostgreSQL, RabbitMQ
 * and Kafka, in a fresh schema, four parts in one run:
 *
 *   throughput  relay rate (one OutboxRelay started as in production, from its first claim to
 *               the delete of the last row; batch size `--batch`) against the same broker's raw
 *               confirmed-publish rate with the same batch (amqplib confirm channel,
 *               `waitForConfirms` per batch; kafkajs idempotent producer, acks -1, one `send` per
 *               batch), 1 KiB messages, `--runs` rounds interleaved (the variants alternate, the
 *               order flips each round), medians. Relay variants: the defaults; one claim at a
 *               time; the previous defaults (16 keys, one claim); and the relay with a publisher
 *               that resolves at once (no broker: the floor set by the claim and delete
 *               statements). Each relay line gives the client-side time per message in the claim
 *               statement, the delete and the publishing (claim returned → last confirm). Also the
 *               per-record floor: the same client publishing one message at a time,
 *               `keyConcurrency` in flight; and the inline floor: the least a relay on this table
 *               can do, written with no SDK (claim a batch, publish it with the raw client,
 *               delete it; `claimConcurrency` lanes). Each raw, floor and relay line gives the
 *               CPU per message of this process, of the PostgreSQL server (when it runs on this
 *               machine) and of the whole machine (bench/cpu.ts);
 *   staging     one staging call (`transactionOutbox(client).stage`, as `ctx.outbox` does) against
 *               a plain INSERT of the same row into a table `LIKE twophase_outbox INCLUDING ALL`
 *               (same columns, defaults and indexes), `--stage` calls of each in one open
 *               transaction, alternating call by call and each call timed; and one message per
 *               transaction (BEGIN, `stageOutbox` with its first-call check, COMMIT) against BEGIN,
 *               INSERT, COMMIT, alternating transaction by transaction;
 *   lag         staging COMMIT → downstream twophase handler (RabbitMqSource + InMemoryClaimer),
 *               one message per transaction at each of `--rates` msg/s for `--lag-seconds` from
 *               `--lag-lanes` connections (a commit waits for the disk's flush), the relay woken
 *               by LISTEN/NOTIFY (polling every 1 s as the fallback; the relay's defaults),
 *               p50 / p99 / max;
 *   size        `--size` messages staged (transactions of 1,000) and relayed in cycles of 10,000
 *               (keyConcurrency = the batch size, to get through them sooner):
 *               pg_total_relation_size of the table before, after each cycle, and after a VACUUM
 *               that follows each cycle (what autovacuum does; the server's autovacuum settings
 *               are reported beside it).
 *
 * Prints a table and writes JSON (`--out`, default bench/results/outbox.json). The machine is
 * shared: ratios (measured back to back) carry the result, absolute rates only the context.
 * Not a test: nothing fails on a number.
 *
 *   npx ts-node --transpile-only bench/outbox/run.ts [--runs 3] [--messages 5000] [--batch 100] [--stage 500]
 *     [--rates 1000,200] [--lag-seconds 10] [--lag-lanes 50] [--size 200000] [--parts throughput,staging,lag,size]
 *     [--brokers rabbitmq,kafka] [--out file.json]
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import amqp from 'amqplib';
import { Kafka, logLevel, type Producer } from 'kafkajs';
import { Pool } from 'pg';
import {
  ack,
  ConsumerBase,
  InMemoryClaimer,
  type Message,
  OUTBOX_RELAY_DEFAULTS,
  type OutboxClaim,
  type OutboxClaimRequest,
  type OutboxFailure,
  type OutboxLease,
  type OutboxMessage,
  type OutboxPublisher,
  OutboxRelay,
  type OutboxRelayEvent,
  type OutboxStats,
  type OutboxStore,
  type OutboxSystem,
  silentLogger,
} from '../../src';
import { KafkaOutboxPublisher } from '../../adapters/kafka';
import { migrate, PostgresOutboxNotifier, PostgresOutboxStore, stageOutbox, transactionOutbox } from '../../adapters/postgres';
import { RabbitMqOutboxPublisher, RabbitMqSource } from '../../adapters/rabbitmq';
import { machineCpuUs, postgresServerCpuUs } from '../cpu';
import { median } from '../goals';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}
function text(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : fallback;
}
const RUNS = arg('runs', 3);
const MESSAGES = arg('messages', 5000);
const BATCH = arg('batch', 100);
const STAGE_CALLS = arg('stage', 500);
/** Offered staging rates of the lag part, msg/s (the first is the goal's). */
const RATES = text('rates', '1000,200').split(',').map(Number);
const LAG_SECONDS = arg('lag-seconds', 10);
const SIZE = arg('size', 200_000);
const PARTS = new Set(text('parts', 'throughput,staging,lag,size').split(','));
/** The brokers of the throughput part. */
const BROKERS = new Set(text('brokers', 'rabbitmq,kafka').split(','));
const OUT = text('out', join(__dirname, '..', 'results', 'outbox.json'));
const AMQP_URL = process.env.TWOPHASE_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const KAFKA_BROKERS = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
/** 1 KiB of JSON (the lag part's downstream consumer decodes it). */
const BODY = Buffer.from(JSON.stringify({ pad: 'x'.repeat(1024 - 12) }));
/** Staging transactions in flight in the lag part (one message each, paced to `--rate`). */
const LAG_LANES = arg('lag-lanes', 50);
/** The relay's defaults: publishes of one claim in flight at once, across ordering keys; claims in progress at once. */
const KEY_CONCURRENCY = OUTBOX_RELAY_DEFAULTS.keyConcurrency;
const CLAIM_CONCURRENCY = OUTBOX_RELAY_DEFAULTS.claimConcurrency;

const pool = new Pool({ host: process.env.PGHOST ?? '127.0.0.1', port: Number(process.env.PGPORT ?? 5432), user: process.env.PGUSER ?? 'postgres', database: process.env.PGDATABASE ?? 'test', max: Math.max(30, LAG_LANES + 10), idleTimeoutMillis: 0 });
const schema = `bench_outbox_${randomBytes(4).toString('hex')}`;
const table = `${schema}.twophase_outbox`;
const step = (line: string) => process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
const pct = (xs: readonly number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : NaN;
};
const r2 = (x: number) => Math.round(x * 100) / 100;
const PG_PORT = Number(process.env.PGPORT ?? 5432);

/**
 * CPU spent over one measured run, µs per message: this process (the relay or the raw client),
 * the PostgreSQL server (when it runs on this machine) and the whole machine (both servers, the
 * broker, this process and anything else running).
 */
function cpuMeter(): (messages: number) => { nodeUs: number; pgUs: number; machineUs: number } {
  const node = process.cpuUsage();
  const pg = postgresServerCpuUs(PG_PORT);
  const machine = machineCpuUs();
  return (messages) => {
    const n = process.cpuUsage(node);
    const pgNow = postgresServerCpuUs(PG_PORT);
    return {
      nodeUs: (n.user + n.system) / messages,
      pgUs: pg === undefined || pgNow === undefined ? NaN : (pgNow - pg) / messages,
      machineUs: (machineCpuUs() - machine) / messages,
    };
  };
}

/** Stages `n` messages in transactions of up to 1,000. */
async function stageMany(n: number, make: (i: number) => OutboxMessage): Promise<void> {
  const client = await pool.connect();
  try {
    for (let done = 0; done < n; ) {
      const k = Math.min(1000, n - done);
      await client.query('BEGIN');
      await stageOutbox(
        client,
        Array.from({ length: k }, (_, i) => make(done + i)),
        { schema, notify: false },
      );
      await client.query('COMMIT');
      done += k;
    }
  } finally {
    client.release();
  }
}

/** The relay's variants measured against the raw rate. */
interface RelayVariant {
  readonly keyConcurrency?: number;
  readonly claimConcurrency?: number;
}

/** One relay run: its rate and where the time went. */
interface RelayRun {
  /** msg/s from the first claim to the last confirmed row deleted. */
  readonly rate: number;
  /** Client-side time in the claim statement, µs per message relayed (summed over concurrent claims). */
  readonly claimUs: number;
  /** The same for the delete of confirmed rows. */
  readonly completeUs: number;
  /** Time from the first publish of a claim to its last confirm, µs per message (summed over claims). */
  readonly publishUs: number;
  /** CPU per message from the relay's start to its last delete (`cpuMeter`). */
  readonly cpu: { nodeUs: number; pgUs: number; machineUs: number };
}

/** The store with a stopwatch on claim and complete. */
class TimedStore implements OutboxStore {
  claimMs = 0;
  completeMs = 0;
  constructor(private readonly inner: PostgresOutboxStore) {}
  ready(): Promise<void> {
    return this.inner.ready();
  }
  async claim(request: OutboxClaimRequest): Promise<OutboxClaim> {
    const t = performance.now();
    try {
      return await this.inner.claim(request);
    } finally {
      this.claimMs += performance.now() - t;
    }
  }
  async complete(lease: OutboxLease, sequences: readonly string[]): Promise<number> {
    const t = performance.now();
    try {
      return await this.inner.complete(lease, sequences);
    } finally {
      this.completeMs += performance.now() - t;
    }
  }
  extend(lease: OutboxLease, sequences: readonly string[], leaseMs: number): Promise<readonly string[]> {
    return this.inner.extend(lease, sequences, leaseMs);
  }
  fail(lease: OutboxLease, failures: readonly OutboxFailure[]): Promise<number> {
    return this.inner.fail(lease, failures);
  }
  release(lease: OutboxLease, sequences: readonly string[]): Promise<number> {
    return this.inner.release(lease, sequences);
  }
  stats(): Promise<OutboxStats> {
    return this.inner.stats();
  }
}

/** Resolves every publish at once: the relay's own floor (claim, delete, sequencing) with no broker. */
class NoBrokerPublisher implements OutboxPublisher {
  constructor(readonly system: OutboxSystem) {}
  publish(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * Runs a relay as it runs in production (`start()`, its loop; no notifier: the rows are staged
 * before it starts) until `expected` rows were deleted; the clock runs from the first claim to the
 * last delete (connecting the publisher is not counted). `makePublisher` gives a fresh publisher
 * (the relay closes it at stop).
 */
async function relayAll(makePublisher: () => OutboxPublisher, expected: number, variant: RelayVariant = {}): Promise<RelayRun> {
  const store = new TimedStore(new PostgresOutboxStore({ pool }, { schema }));
  let firstClaim = 0;
  let removed = 0;
  let publishMs = 0;
  const claimStarted = new Map<number, number>();
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  const observer = {
    onEvent(event: OutboxRelayEvent): void {
      if (event.type === 'claimed') {
        firstClaim ||= performance.now();
        claimStarted.set(event.fencingToken, performance.now());
      } else if (event.type === 'completed') {
        publishMs += performance.now() - (claimStarted.get(event.fencingToken) ?? performance.now());
        removed += event.removed;
        if (removed >= expected) finish();
      }
    },
  };
  const relay = new OutboxRelay(
    { store, publisher: makePublisher(), logger: silentLogger, observer },
    { name: 'bench', batchSize: BATCH, keyConcurrency: variant.keyConcurrency ?? KEY_CONCURRENCY, claimConcurrency: variant.claimConcurrency ?? CLAIM_CONCURRENCY, statsIntervalMs: 0, pollIntervalMs: 50 },
  );
  const meter = cpuMeter();
  await relay.start();
  const timeout = setTimeout(finish, 300_000);
  await done;
  clearTimeout(timeout);
  const elapsed = performance.now() - firstClaim;
  const cpu = meter(Math.max(1, removed));
  await relay.stop();
  if (removed !== expected) throw new Error(`relayed ${removed} of ${expected}`);
  // publishMs counts from the claim's return to its delete's return: take the delete out.
  return { rate: (removed / elapsed) * 1000, claimUs: (store.claimMs * 1000) / removed, completeUs: (store.completeMs * 1000) / removed, publishUs: ((publishMs - store.completeMs) * 1000) / removed, cpu };
}

// ---------------------------------------------------------------- throughput

/** Per variant, one figure per run. */
type Series = Record<string, number[]>;

function push(series: Series, name: string, value: number): void {
  (series[name] ??= []).push(value);
}

function pushCpu(series: Series, name: string, cpu: { nodeUs: number; pgUs: number; machineUs: number }): void {
  push(series, `${name}:nodeUs`, cpu.nodeUs);
  push(series, `${name}:pgUs`, cpu.pgUs);
  push(series, `${name}:machineUs`, cpu.machineUs);
}

/** A claimed row as the inline floor reads it. */
interface FloorRow {
  readonly seq: string;
  readonly id: string;
  readonly destination: Record<string, string>;
  readonly body: Buffer;
}

/**
 * The least a relay can do, written inline with no SDK: claim a batch of rows (one UPDATE of
 * their lease over a `FOR UPDATE SKIP LOCKED` select, in commit order), publish them with the
 * raw client, delete them by sequence; as many lanes as the relay's claims in flight. No fencing
 * token, no per-key order, no lease extension, no failure handling, no stats: a bound on what any
 * relay built on this table, this client and this machine can reach.
 */
async function inlineFloor(series: Series, makeMessage: (i: number) => OutboxMessage, publishBatch: (rows: readonly FloorRow[]) => Promise<void>): Promise<number> {
  await stageMany(MESSAGES, makeMessage);
  const claim = `UPDATE ${table} o SET lease_owner = 'floor', fencing_token = 1, lease_expires_at = clock_timestamp() + interval '30 seconds'
    FROM (SELECT seq FROM ${table} WHERE lease_owner IS NULL AND state = 'pending' ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED) c
    WHERE o.seq = c.seq RETURNING o.seq, o.id, o.destination, o.body`;
  let removed = 0;
  const meter = cpuMeter();
  const started = performance.now();
  const lane = async () => {
    for (;;) {
      const { rows } = await pool.query<FloorRow>(claim, [BATCH]);
      if (rows.length === 0) return;
      await publishBatch(rows);
      await pool.query(`DELETE FROM ${table} WHERE seq = ANY($1::bigint[])`, [rows.map((r) => r.seq)]);
      removed += rows.length;
    }
  };
  await Promise.all(Array.from({ length: CLAIM_CONCURRENCY }, lane));
  const rate = (removed / (performance.now() - started)) * 1000;
  if (removed !== MESSAGES) throw new Error(`inline floor relayed ${removed} of ${MESSAGES}`);
  push(series, 'inline-floor', rate);
  pushCpu(series, 'inline-floor', meter(removed));
  return rate;
}

/**
 * The relay variants of both brokers: the defaults (keyConcurrency 100, claimConcurrency 2); one
 * claim at a time; the defaults of the previous version (16 keys in flight, one claim at a time).
 */
const RELAY_VARIANTS: Readonly<Record<string, RelayVariant>> = {
  relay: {},
  'relay-1-claim': { claimConcurrency: 1 },
  'relay-16-keys-1-claim': { keyConcurrency: 16, claimConcurrency: 1 },
};

async function relayVariant(series: Series, name: string, makePublisher: () => OutboxPublisher, makeMessage: (i: number) => OutboxMessage): Promise<number> {
  await stageMany(MESSAGES, makeMessage);
  const run = await relayAll(makePublisher, MESSAGES, RELAY_VARIANTS[name] ?? {});
  push(series, name, run.rate);
  push(series, `${name}:claimUs`, run.claimUs);
  push(series, `${name}:completeUs`, run.completeUs);
  push(series, `${name}:publishUs`, run.publishUs);
  pushCpu(series, name, run.cpu);
  return run.rate;
}

function describeRun(series: Series, raw: number): string {
  const last = (name: string) => series[name]?.[series[name]!.length - 1] ?? NaN;
  const cpu = (name: string) => `CPU µs/msg: node ${last(`${name}:nodeUs`).toFixed(0)}, postgres ${last(`${name}:pgUs`).toFixed(0)}, machine ${last(`${name}:machineUs`).toFixed(0)}`;
  return [`raw ${cpu('raw')}`, `inline-floor ${last('inline-floor').toFixed(0)} msg/s (${(last('inline-floor') / raw).toFixed(2)}×; ${cpu('inline-floor')})`]
    .concat(
      Object.keys(RELAY_VARIANTS)
        .concat('no-broker')
        .map((name) => `${name} ${last(name).toFixed(0)} msg/s (${(last(name) / raw).toFixed(2)}×; claim ${last(`${name}:claimUs`).toFixed(0)} µs/msg, delete ${last(`${name}:completeUs`).toFixed(0)} µs/msg, publish ${last(`${name}:publishUs`).toFixed(0)} µs/msg; ${cpu(name)})`),
    )
    .join(',\n    ');
}

interface BrokerFigures {
  readonly raw: number[];
  readonly relay: number[];
  readonly ratios: number[];
  readonly series: Series;
}

async function rabbitThroughput(): Promise<BrokerFigures> {
  const queue = `bench.outbox.${randomBytes(3).toString('hex')}`;
  const connection = await amqp.connect(AMQP_URL);
  const channel = await connection.createConfirmChannel();
  await channel.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'classic' } });
  const series: Series = {};
  const makePublisher = () => new RabbitMqOutboxPublisher({ url: AMQP_URL, logger: silentLogger });
  const makeMessage = () => ({ to: { exchange: '', routingKey: queue }, body: BODY });
  const publishOne = () =>
    new Promise<void>((resolve, reject) => {
      const id = randomBytes(16).toString('hex');
      channel.publish('', queue, BODY, { persistent: true, mandatory: true, messageId: id, headers: { 'idempotency-key': id } }, (err) => (err ? reject(err) : resolve()));
    });
  const variants = ['raw', 'inline-floor', ...Object.keys(RELAY_VARIANTS), 'no-broker', 'per-record'];
  try {
    for (let run = 0; run < RUNS; run++) {
      for (const variant of run % 2 === 0 ? variants : [...variants].reverse()) {
        await channel.purgeQueue(queue);
        if (variant === 'per-record') {
          const started = performance.now();
          let next = 0;
          const worker = async () => {
            while (next < MESSAGES) {
              next++;
              await publishOne();
            }
          };
          await Promise.all(Array.from({ length: KEY_CONCURRENCY }, worker));
          push(series, 'per-record', (MESSAGES / (performance.now() - started)) * 1000);
        } else if (variant === 'raw') {
          const meter = cpuMeter();
          const started = performance.now();
          for (let sent = 0; sent < MESSAGES; sent += BATCH) {
            for (let i = 0; i < Math.min(BATCH, MESSAGES - sent); i++) {
              const id = randomBytes(16).toString('hex');
              channel.publish('', queue, BODY, { persistent: true, mandatory: true, messageId: id, headers: { 'idempotency-key': id } });
            }
            await channel.waitForConfirms();
          }
          push(series, 'raw', (MESSAGES / (performance.now() - started)) * 1000);
          pushCpu(series, 'raw', meter(MESSAGES));
        } else if (variant === 'inline-floor') {
          await inlineFloor(series, makeMessage, (rows) =>
            Promise.all(
              rows.map(
                (row) =>
                  new Promise<void>((resolve, reject) => {
                    channel.publish(row.destination.exchange!, row.destination.routingKey!, row.body, { persistent: true, mandatory: true, messageId: row.id, headers: { 'idempotency-key': row.id } }, (err) => (err ? reject(err) : resolve()));
                  }),
              ),
            ).then(() => undefined),
          );
        } else if (variant === 'no-broker') {
          await relayVariant(series, variant, () => new NoBrokerPublisher('rabbitmq'), makeMessage);
        } else {
          await relayVariant(series, variant, makePublisher, makeMessage);
        }
      }
      const raw = series.raw![run]!;
      step(`  RabbitMQ run ${run + 1}: raw ${raw.toFixed(0)} msg/s (batches of ${BATCH}), ${KEY_CONCURRENCY} in flight ${series['per-record']![run]!.toFixed(0)} msg/s; ${describeRun(series, raw)}`);
    }
  } finally {
    await channel.deleteQueue(queue).catch(() => undefined);
    await connection.close().catch(() => undefined);
  }
  return { raw: series.raw!, relay: series.relay!, ratios: series.relay!.map((x, i) => x / series.raw![i]!), series };
}

async function kafkaThroughput(): Promise<BrokerFigures> {
  const topic = `bench-outbox-${randomBytes(3).toString('hex')}`;
  const kafka = new Kafka({ clientId: 'bench-outbox', brokers: KAFKA_BROKERS, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 6 }] });
  // The raw producer is configured as the relay's publisher configures its own.
  const producer: Producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const series: Series = {};
  const makePublisher = () => new KafkaOutboxPublisher({ kafka });
  const makeMessage = (i: number) => ({ to: { topic, key: `k${i}` }, body: BODY });
  const record = () => {
    const id = randomBytes(16).toString('hex');
    return { key: id, value: BODY, headers: { 'idempotency-key': id } };
  };
  const variants = ['raw', 'inline-floor', ...Object.keys(RELAY_VARIANTS), 'no-broker', 'per-record'];
  try {
    for (let run = 0; run < RUNS; run++) {
      for (const variant of run % 2 === 0 ? variants : [...variants].reverse()) {
        const started = performance.now();
        if (variant === 'raw') {
          const meter = cpuMeter();
          for (let sent = 0; sent < MESSAGES; sent += BATCH) await producer.send({ topic, acks: -1, messages: Array.from({ length: Math.min(BATCH, MESSAGES - sent) }, record) });
          push(series, 'raw', (MESSAGES / (performance.now() - started)) * 1000);
          pushCpu(series, 'raw', meter(MESSAGES));
        } else if (variant === 'inline-floor') {
          await inlineFloor(series, makeMessage, (rows) =>
            producer.send({ topic, acks: -1, messages: rows.map((row) => ({ key: row.destination.key!, value: row.body, headers: { 'idempotency-key': row.id } })) }).then(() => undefined),
          );
        } else if (variant === 'per-record') {
          let next = 0;
          const worker = async () => {
            while (next < MESSAGES) {
              next++;
              await producer.send({ topic, acks: -1, messages: [record()] });
            }
          };
          await Promise.all(Array.from({ length: KEY_CONCURRENCY }, worker));
          push(series, 'per-record', (MESSAGES / (performance.now() - started)) * 1000);
        } else if (variant === 'no-broker') {
          await relayVariant(series, variant, () => new NoBrokerPublisher('kafka'), makeMessage);
        } else {
          await relayVariant(series, variant, makePublisher, makeMessage);
        }
      }
      const raw = series.raw![run]!;
      step(`  Kafka run ${run + 1}: raw ${raw.toFixed(0)} msg/s (batches of ${BATCH}), one record per send ×${KEY_CONCURRENCY} ${series['per-record']![run]!.toFixed(0)} msg/s; ${describeRun(series, raw)}`);
    }
  } finally {
    await producer.disconnect();
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  }
  return { raw: series.raw!, relay: series.relay!, ratios: series.relay!.map((x, i) => x / series.raw![i]!), series };
}

/** Medians of every series, and of each variant's ratio to raw (run by run). */
function summarize(f: BrokerFigures): Record<string, number> {
  const out: Record<string, number> = { rawMedian: Math.round(median(f.raw)), relayMedian: Math.round(median(f.relay)), ratioMedian: r2(median(f.ratios)) };
  for (const [name, xs] of Object.entries(f.series)) {
    out[`${name}:median`] = r2(median(xs));
    if (!name.includes(':') && name !== 'raw') out[`${name}:ratioMedian`] = r2(median(xs.map((x, i) => x / f.raw[i]!)));
  }
  return out;
}

// ---------------------------------------------------------------- staging

interface StagingFigures {
  /** µs per call in an open transaction, per round. */
  readonly stageUs: number[];
  /** The same without an ordering key and with `notify: false` (no advisory lock, no NOTIFY). */
  readonly stageBareUs: number[];
  readonly bareRatios: number[];
  readonly insertUs: number[];
  readonly ratios: number[];
  /** µs per one-message transaction (BEGIN … COMMIT), per round. */
  readonly stageTxUs: number[];
  readonly insertTxUs: number[];
  readonly txRatios: number[];
}

async function staging(): Promise<StagingFigures> {
  const plain = `${schema}.plain_copy`;
  await pool.query(`CREATE TABLE ${plain} (LIKE ${table} INCLUDING ALL)`);
  const client = await pool.connect();
  const out: StagingFigures = { stageUs: [], stageBareUs: [], bareRatios: [], insertUs: [], ratios: [], stageTxUs: [], insertTxUs: [], txRatios: [] };
  const message = (i: number): OutboxMessage => ({ to: { exchange: 'orders', routingKey: 'order.placed' }, body: BODY, headers: { 'x-tenant': 't1' }, orderingKey: `order-${i % 100}` });
  const insert = (i: number) =>
    client.query(`INSERT INTO ${plain} (id, system, destination, headers, properties, body, ordering_key) VALUES ($1, 'rabbitmq', $2, $3, $4, $5, $6)`, [
      randomUUID(),
      { exchange: 'orders', routingKey: 'order.placed' },
      { 'x-tenant': 't1' },
      {},
      BODY,
      `order-${i % 100}`,
    ]);
  try {
    // The variants alternate call by call (the order rotating), each call timed on its own, so a
    // burst of load on the shared machine falls on all of them alike.
    for (let run = 0; run < RUNS + 1; run++) {
      const total: Record<string, number> = { stage: 0, 'stage-bare': 0, insert: 0, 'stage-tx': 0, 'insert-tx': 0 };
      await client.query('BEGIN');
      const outbox = transactionOutbox(client, { schema, notify: true });
      const bareOutbox = transactionOutbox(client, { schema, notify: false });
      const bare = (i: number): OutboxMessage => ({ ...message(i), orderingKey: null });
      const calls: Record<string, (i: number) => Promise<unknown>> = { stage: (i) => outbox.stage(message(i)), 'stage-bare': (i) => bareOutbox.stage(bare(i)), insert };
      const order = ['stage', 'stage-bare', 'insert'];
      for (let i = 0; i < STAGE_CALLS; i++) {
        for (let j = 0; j < order.length; j++) {
          const variant = order[(i + j) % order.length]!;
          const started = performance.now();
          await calls[variant]!(i);
          total[variant]! += performance.now() - started;
        }
      }
      await client.query('COMMIT');
      const n = Math.max(50, Math.floor(STAGE_CALLS / 5));
      for (let i = 0; i < n; i++) {
        for (const variant of i % 2 === 0 ? ['stage-tx', 'insert-tx'] : ['insert-tx', 'stage-tx']) {
          const started = performance.now();
          await client.query('BEGIN');
          await (variant === 'stage-tx' ? stageOutbox(client, message(i), { schema }) : insert(i));
          await client.query('COMMIT');
          total[variant]! += performance.now() - started;
        }
      }
      const rec: Record<string, number> = {
        stage: (total.stage! * 1000) / STAGE_CALLS,
        'stage-bare': (total['stage-bare']! * 1000) / STAGE_CALLS,
        insert: (total.insert! * 1000) / STAGE_CALLS,
        'stage-tx': (total['stage-tx']! * 1000) / n,
        'insert-tx': (total['insert-tx']! * 1000) / n,
      };
      await pool.query(`DELETE FROM ${table}; DELETE FROM ${plain}`);
      if (run === 0) continue; // warm-up round
      out.stageUs.push(rec.stage!);
      out.stageBareUs.push(rec['stage-bare']!);
      out.bareRatios.push(rec['stage-bare']! / rec.insert!);
      out.insertUs.push(rec.insert!);
      out.ratios.push(rec.stage! / rec.insert!);
      out.stageTxUs.push(rec['stage-tx']!);
      out.insertTxUs.push(rec['insert-tx']!);
      out.txRatios.push(rec['stage-tx']! / rec['insert-tx']!);
      step(`  staging run ${run}: stage ${rec.stage!.toFixed(0)} µs (no ordering key, no NOTIFY: ${rec['stage-bare']!.toFixed(0)} µs) vs INSERT ${rec.insert!.toFixed(0)} µs (${(rec.stage! / rec.insert!).toFixed(2)}×); one-message transaction ${rec['stage-tx']!.toFixed(0)} vs ${rec['insert-tx']!.toFixed(0)} µs (${(rec['stage-tx']! / rec['insert-tx']!).toFixed(2)}×)`);
    }
  } finally {
    client.release();
  }
  return out;
}


// ---------------------------------------------------------------- lag

interface LagFigures {
  readonly targetRate: number;
  /** Staging rate reached, msg/s. */
  readonly achievedRate: number;
  readonly messages: number;
  /** Messages that reached the handler within 60 s of the end of staging (percentiles are over these). */
  readonly arrived: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

class LagConsumer extends ConsumerBase<unknown> {
  readonly lags: number[] = [];
  constructor(
    source: RabbitMqSource,
    private readonly committedAt: Map<string, number>,
  ) {
    super({ name: 'lag', claimer: new InMemoryClaimer(), source, concurrency: 50, logger: silentLogger });
  }
  async handle(message: Message<unknown>) {
    const id = message.key.slice('lag:'.length);
    const at = this.committedAt.get(id);
    this.lags.push(at === undefined ? 0 : performance.now() - at);
    return ack();
  }
}

async function lag(rate: number): Promise<LagFigures> {
  const queue = `bench.outbox.lag.${randomBytes(3).toString('hex')}`;
  const committedAt = new Map<string, number>();
  const source = new RabbitMqSource({ url: AMQP_URL, queue, delayTiersMs: [1000], logger: silentLogger });
  const consumer = new LagConsumer(source, committedAt);
  await consumer.start();
  const relay = new OutboxRelay(
    { store: new PostgresOutboxStore({ pool }, { schema }), publisher: new RabbitMqOutboxPublisher({ url: AMQP_URL, logger: silentLogger }), notifier: new PostgresOutboxNotifier({ pool, logger: silentLogger }, { schema }), logger: silentLogger },
    { name: 'bench-lag', batchSize: BATCH, statsIntervalMs: 0 },
  );
  await relay.start();
  const total = rate * LAG_SECONDS;
  const started = performance.now();
  let next = 0;
  const lane = async () => {
    const client = await pool.connect();
    try {
      while (next < total) {
        const i = next++;
        const wait = started + (i * 1000) / rate - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        await client.query('BEGIN');
        const [id] = await stageOutbox(client, { to: { exchange: '', routingKey: queue }, body: BODY }, { schema });
        await client.query('COMMIT');
        committedAt.set(id!, performance.now());
      }
    } finally {
      client.release();
    }
  };
  await Promise.all(Array.from({ length: LAG_LANES }, lane));
  const achievedRate = (total / (performance.now() - started)) * 1000;
  const deadline = Date.now() + 60_000;
  while (consumer.lags.length < total && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  await relay.stop();
  await consumer.stop();
  const a = await amqp.connect(AMQP_URL);
  const ch = await a.createChannel();
  for (const q of [queue, `${queue}.dlq`, `${queue}.delay.1000ms`]) await ch.deleteQueue(q).catch(() => undefined);
  await ch.deleteExchange(`${queue}.dlx`).catch(() => undefined);
  await a.close();
  step(`  lag at ${rate} msg/s offered (${Math.round(achievedRate)} staged/s): ${consumer.lags.length} of ${total} handled; p50 ${r2(pct(consumer.lags, 50))} ms, p99 ${r2(pct(consumer.lags, 99))} ms`);
  return { targetRate: rate, achievedRate: Math.round(achievedRate), messages: total, arrived: consumer.lags.length, p50Ms: r2(pct(consumer.lags, 50)), p99Ms: r2(pct(consumer.lags, 99)), maxMs: r2(Math.max(...consumer.lags)) };
}

// ---------------------------------------------------------------- size

interface SizeFigures {
  readonly messages: number;
  readonly cycle: number;
  readonly beforeBytes: number;
  /** Table size after each cycle was relayed, before the cycle's VACUUM. */
  readonly cycleBytes: number[];
  /** Table size after the last cycle's VACUUM. */
  readonly afterVacuumBytes: number;
  readonly seconds: number;
  readonly autovacuumRuns: number;
  readonly autovacuum: Readonly<Record<string, string>>;
}

/**
 * Stages and relays `SIZE` messages in cycles; after each cycle, the table's size, then a VACUUM
 * (standing in for autovacuum when the server has it off, as the shared test server does).
 */
async function size(): Promise<SizeFigures> {
  const queue = `bench.outbox.size.${randomBytes(3).toString('hex')}`;
  const connection = await amqp.connect(AMQP_URL);
  const channel = await connection.createChannel();
  // The broker keeps only the newest 1,000: the messages are routed (confirmed), not stored.
  await channel.assertQueue(queue, { durable: true, arguments: { 'x-max-length': 1000, 'x-overflow': 'drop-head' } });
  const bytes = async () => Number((await pool.query<{ b: string }>('SELECT pg_total_relation_size($1::regclass) AS b', [table])).rows[0]!.b);
  const settings = await pool.query<{ name: string; setting: string }>(
    "SELECT name, setting FROM pg_settings WHERE name IN ('autovacuum', 'autovacuum_naptime', 'autovacuum_vacuum_threshold', 'autovacuum_vacuum_scale_factor', 'autovacuum_vacuum_insert_threshold')",
  );
  await pool.query(`DELETE FROM ${table}`);
  await pool.query(`VACUUM ${table}`);
  const beforeBytes = await bytes();
  const cycleBytes: number[] = [];
  const started = performance.now();
  const cycle = 10_000;
  try {
    for (let done = 0; done < SIZE; done += cycle) {
      const n = Math.min(cycle, SIZE - done);
      await stageMany(n, (i) => ({ to: { exchange: '', routingKey: queue }, body: BODY, orderingKey: `k${i % 50}` }));
      await relayAll(() => new RabbitMqOutboxPublisher({ url: AMQP_URL, logger: silentLogger }), n, { keyConcurrency: BATCH });
      cycleBytes.push(await bytes());
      await pool.query(`VACUUM ${table}`);
      if ((done / cycle) % 5 === 4) step(`  size: ${done + n} relayed; table ${(cycleBytes[cycleBytes.length - 1]! / 1048576).toFixed(1)} MiB before this cycle's VACUUM, ${((await bytes()) / 1048576).toFixed(1)} MiB after`);
    }
  } finally {
    await channel.deleteQueue(queue).catch(() => undefined);
    await connection.close().catch(() => undefined);
  }
  const seconds = (performance.now() - started) / 1000;
  const av = await pool.query<{ n: string }>('SELECT autovacuum_count AS n FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = $2', [schema, 'twophase_outbox']);
  return { messages: SIZE, cycle, beforeBytes, cycleBytes, afterVacuumBytes: await bytes(), seconds: Math.round(seconds), autovacuumRuns: Number(av.rows[0]?.n ?? 0), autovacuum: Object.fromEntries(settings.rows.map((r) => [r.name, r.setting])) };
}

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  await migrate(pool, { schema });
  const load = loadavg().map((x) => Math.round(x * 100) / 100);
  step(`outbox bench: schema ${schema}, ${MESSAGES} × 1 KiB per throughput run, batch ${BATCH}, ${RUNS} runs; load ${load.join(' ')}`);
  const result: Record<string, unknown> = { date: new Date().toISOString(), loadAvgAtStart: load, runs: RUNS, messages: MESSAGES, batch: BATCH, bodyBytes: BODY.length };
  try {
    if (PARTS.has('throughput')) {
      if (BROKERS.has('rabbitmq')) {
        step('throughput: RabbitMQ');
        const r = await rabbitThroughput();
        result.rabbitmq = { ...r, ...summarize(r) };
      }
      if (BROKERS.has('kafka')) {
        step('throughput: Kafka');
        const k = await kafkaThroughput();
        result.kafka = { ...k, ...summarize(k) };
      }
    }
    if (PARTS.has('staging')) {
      step('staging cost');
      const s = await staging();
      result.staging = { ...s, ratioMedian: r2(median(s.ratios)), bareRatioMedian: r2(median(s.bareRatios)), txRatioMedian: r2(median(s.txRatios)), stageUsMedian: Math.round(median(s.stageUs)), insertUsMedian: Math.round(median(s.insertUs)) };
    }
    if (PARTS.has('lag')) {
      const lags: LagFigures[] = [];
      for (const rate of RATES) {
        step(`lag: ${rate} msg/s for ${LAG_SECONDS} s, LISTEN/NOTIFY`);
        lags.push(await lag(rate));
      }
      result.lag = lags;
    }
    if (PARTS.has('size')) {
      step(`size: ${SIZE} messages relayed`);
      result.size = await size();
    }
  } finally {
    await pool.query(`DROP SCHEMA ${schema} CASCADE`).catch(() => undefined);
    await pool.end();
  }
  result.loadAvgAtEnd = loadavg().map((x) => Math.round(x * 100) / 100);
  mkdirSync(dirname(OUT), { recursive: true });
  writeFileSync(OUT, `${JSON.stringify(result, null, 2)}\n`);
  type Broker = Record<string, number> | undefined;
  const cpuOf = (f: Broker, name: string) => (f ? `${f[`${name}:nodeUs:median`]} / ${f[`${name}:pgUs:median`]} / ${f[`${name}:machineUs:median`]}` : '—');
  const x = result as { rabbitmq?: Broker; kafka?: Broker; staging?: { ratioMedian: number; bareRatioMedian: number; txRatioMedian: number }; lag?: LagFigures[]; size?: SizeFigures };
  process.stdout.write(
    [
      '',
      ...(['rabbitmq', 'kafka'] as const).map((b) => {
        const f = x[b];
        return `relay / raw confirmed publish (${b})   ${f?.ratioMedian ?? '—'}×   (goal ≥ 0.8; one claim at a time ${f?.['relay-1-claim:ratioMedian'] ?? '—'}×; 16 keys and one claim at a time (the previous defaults) ${f?.['relay-16-keys-1-claim:ratioMedian'] ?? '—'}×; no broker ${f?.['no-broker:ratioMedian'] ?? '—'}× = the store's floor; ${KEY_CONCURRENCY} one-message publishes in flight ${f?.['per-record:ratioMedian'] ?? '—'}×)
  inline floor (claim, raw publish, delete; no SDK) ${f?.['inline-floor:ratioMedian'] ?? '—'}× raw; relay / inline floor ${f ? r2(f['relay:median']! / f['inline-floor:median']!) : '—'}×
  CPU µs/msg (node / postgres / machine): raw ${cpuOf(f, 'raw')}; inline floor ${cpuOf(f, 'inline-floor')}; relay ${cpuOf(f, 'relay')}; no broker ${cpuOf(f, 'no-broker')}`;
      }),
      `staging call / plain INSERT                ${x.staging?.ratioMedian ?? '—'}×   (goal ≤ 1.2; without ordering key and NOTIFY ${x.staging?.bareRatioMedian ?? '—'}×; one-message transaction ${x.staging?.txRatioMedian ?? '—'}×)`,
      ...(x.lag ?? []).map((l) => `lag COMMIT → handler, ${l.targetRate} msg/s offered (${l.achievedRate} staged/s, ${l.arrived}/${l.messages} handled)   p50 ${l.p50Ms} ms, p99 ${l.p99Ms} ms, max ${l.maxMs} ms   (goal p99 ≤ 100 ms at 1000 msg/s)`),
      x.size
        ? `table over ${x.size.messages} relayed         before ${x.size.beforeBytes} B; per ${x.size.cycle}-message cycle before its VACUUM: first ${x.size.cycleBytes[0]} B, largest ${Math.max(...x.size.cycleBytes)} B, last ${x.size.cycleBytes[x.size.cycleBytes.length - 1]} B; after the last VACUUM ${x.size.afterVacuumBytes} B (autovacuum ${x.size.autovacuum.autovacuum} on this server, ${x.size.seconds} s)`
        : 'table size: not measured',
      `load ${(result.loadAvgAtStart as number[]).join(' ')} at start, ${(result.loadAvgAtEnd as number[]).join(' ')} at end; written to ${OUT}`,
      '',
    ].join('\n'),
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`outbox bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
