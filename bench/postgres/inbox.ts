/**
 * The PostgreSQL inbox benchmark (`npm run bench:postgres`): RabbitMQ and Kafka, one process run,
 * variants interleaved `--runs` times, medians reported. Each variant drains `count` pre-filled
 * messages (unique keys) and writes one ledger row per message:
 *
 * RabbitMQ (prefetch 32, ConsumerBase concurrency 32):
 *   floor          raw amqplib + one INSERT of the effect in its own transaction (autocommit), then ack
 *   transactional  twophase + PostgresClaimer (mode transactional): claim + effect + complete + COMMIT, then ack
 *   redis          twophase + RedisClaimer + the same INSERT in its own transaction
 *   batch mode     twophase + PostgresClaimer transactional, `transactionBatch: 'per-chunk'` with
 *                  `batchClaims` (the default claim window, one event-loop turn): one transaction per window; at prefetch 32,
 *                  and at 100 beside a floor at prefetch 100 (per-record transactions are not run
 *                  at 100: each in-flight delivery would hold a pool client)
 *   floor-batch    raw amqplib + the least a design sharing one transaction per window can do, no SDK
 *                  (bench/postgres/floor-batch.ts: BEGIN, the effect INSERTs, one multi-row INSERT of
 *                  the claim records with COMMIT, then the acks), at prefetch 32 and 100: the bound
 *                  for batch mode (`rabbitBatchVsFloorBatchPrefetch32`/`100`, `floorBatchVsFloor…`)
 * Kafka (one topic of KAFKA_PARTITIONS partitions, a fresh consumer group per run):
 *   floor          raw kafkajs eachMessage (partitions consumed concurrently) + the INSERT in its own transaction
 *   per-record     twophase KafkaSource + PostgresClaimer transactional, one transaction per record (claimBatchSize 1)
 *   per-chunk      the same with `transactionBatch: 'per-chunk'` (claimBatchSize 64): one transaction per chunk
 * RabbitMQ, the transaction port (prefetch 32, concurrency 32):
 *   drizzle port   twophase + PostgresClaimer transactional with `transactions: drizzleTransactions(db)`,
 *                  `db = drizzle(pool)` on the claimer's own pool (the port's `overPoolClient`: the
 *                  claim runs as without a port): the same one-row INSERT written with Drizzle's
 *                  query builder through its `tx`; compared with "twophase transactional" of the
 *                  same run (`drizzlePortVsNative`, `drizzleAddedTimePerMessagePercent`)
 *   kysely port    `kyselyTransactions(db, { pool })` with `db` a Kysely on the claimer's own pool
 *                  (its `overPoolClient`, as the Drizzle row): the same INSERT with Kysely's query
 *                  builder on its `Transaction` (`kyselyPortVsNative`, `kyselyAddedTimePerMessagePercent`)
 *   drizzle, another pool   the same with `db` on a second pool: the claim runs inside
 *                  `db.transaction` (the generic port path, as for Prisma, Kysely, TypeORM)
 *   prisma port    `prismaTransactions(prisma)` (the test client of test/support/prisma, with
 *                  `@prisma/adapter-pg`): `tx.effect.create` of one row, the generic port path
 *   typeorm port   `typeormTransactions(dataSource)` (its own pool): the same INSERT through the
 *                  transaction's `EntityManager` (a repository's `insert`), the generic port path
 *                  (`typeormPortVsNative`, `typeormAddedTimePerMessagePercent`)
 *   typeorm port, the DataSource's pool   the same port with the claimer on `typeormPool(dataSource)`
 *                  (its `overPoolClient`: the claim runs as without a port; `typeormPoolPortVsNative`,
 *                  `typeormPoolAddedTimePerMessagePercent`, `typeormPoolVsTypeormAlone`)
 *   prisma port, PrismaPg's pool   `prismaTransactions(prisma, { adapter })` with the client built on
 *                  `inboxAdapter(new PrismaPg(pool))` and the claimer on `pool` (its `overPoolClient`:
 *                  the claim runs as without a port, Prisma's interactive transaction inside it; the
 *                  same `tx.effect.create`; `prismaPoolPortVsNative`, `prismaPoolAddedTimePerMessagePercent`,
 *                  `prismaPoolVsPrismaAlone`)
 *   alone rows     the same handlers in each library's own transaction without twophase, raw
 *                  amqplib at prefetch 32: `pg` (BEGIN, the INSERT on a pool client, COMMIT),
 *                  Drizzle on the second pool (`db.transaction`), Prisma (`prisma.$transaction`),
 *                  TypeORM (`dataSource.transaction`); each port row is compared with its library
 *                  alone in the same run (`nativeVsPgAlone`, `drizzleVsDrizzleAlone`,
 *                  `drizzleOtherPoolVsDrizzleAlone`, `prismaVsPrismaAlone`, `typeormVsTypeormAlone`:
 *                  time per message ratio, added wall µs and Node CPU µs per message), and each
 *                  library alone with "twophase transactional" (`prismaAloneVsNative`…: rate ratio)
 *
 * Reports throughput (msg/s), this process's CPU per message (µs) and PostgreSQL commits per
 * second (`pg_stat_database.xact_commit` of the database: other clients' commits count too on a
 * shared server, and backends report their counts up to a second late, so short runs read low or
 * high). The variants of a run start at a different one each run (the order rotates by one), so no
 * variant always runs first or after the same neighbour. Ratios are the median over runs of each run's ratio. Writes bench/results/postgres.json (or `--out`). Not a test: nothing fails on a number.
 *
 *   npx ts-node --transpile-only bench/postgres/inbox.ts [--count 5000] [--runs 3] [--out file.json] [--port-only | --rabbit-batch-only]
 * `--rabbit-batch-only` runs only the RabbitMQ floors, batch mode and floor-batch rows at prefetch 32 and 100, interleaved.
 * `--port-only` runs only "twophase transactional", the six port rows and the four alone rows, interleaved (Kafka is still
 * connected to, not used).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import amqp from 'amqplib';
import Redis from 'ioredis';
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import { Pool, type PoolClient } from 'pg';
import { ack, type Claimer, ConsumerBase, type Disposition, type HandlerContext, type Message, silentLogger } from '../../src';
import { migrate, PostgresClaimer } from '../../adapters/postgres';
import { drizzleTransactions, type DrizzleTransaction } from '../../adapters/postgres/orm/drizzle';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { Kysely, PostgresDialect, type Transaction } from 'kysely';
import { kyselyTransactions } from '../../adapters/postgres/orm/kysely';
import { bigserial, pgSchema, text } from 'drizzle-orm/pg-core';
import { PrismaPg } from '@prisma/adapter-pg';
import { inboxAdapter, prismaTransactions } from '../../adapters/postgres/orm/prisma';
import { PrismaClient } from '../../test/support/prisma/generated/client';
import { DataSource, EntitySchema, type EntityManager } from 'typeorm';
import { typeormPool, typeormTransactions } from '../../adapters/postgres/orm/typeorm';
import { KafkaSource } from '../../adapters/kafka';
import { RabbitMqSource } from '../../adapters/rabbitmq';
import { RedisClaimer } from '../../adapters/redis';
import { AMQP_URL, BENCH_DELAY_TIERS_MS, declareQueue, deleteTopology, fill } from '../rabbitmq/broker';
import { runFloorBatch } from './floor-batch';

const PREFETCH = 32;

interface Row {
  readonly broker: string;
  readonly variant: string;
  readonly runs?: number;
  readonly messages: number;
  readonly msgPerSec: number;
  readonly cpuUsPerMsg: number;
  readonly pgCommitsPerSec: number;
}

const countArg = process.argv.indexOf('--count');
const COUNT = countArg >= 0 ? Number(process.argv[countArg + 1]) : 5000;
const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg >= 0 ? Number(process.argv[runsArg + 1]) : 3;
const outArg = process.argv.indexOf('--out');
const PORT_ONLY = process.argv.includes('--port-only');
const RABBIT_BATCH_ONLY = process.argv.includes('--rabbit-batch-only');
const OUT = outArg >= 0 ? process.argv[outArg + 1]! : join(__dirname, '..', 'results', 'postgres.json');

async function commits(pool: Pool): Promise<number> {
  return Number((await pool.query<{ n: string }>('SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = current_database()')).rows[0]!.n);
}

class LedgerConsumer extends ConsumerBase<Buffer, PoolClient | undefined> {
  first = 0;
  cpu = process.cpuUsage();
  done = 0;
  constructor(
    options: ConstructorParameters<typeof ConsumerBase>[0],
    private readonly effect: (key: string, tx: PoolClient | undefined) => Promise<unknown>,
  ) {
    super(options);
  }
  protected override decode(raw: Buffer): Buffer {
    return raw;
  }
  async handle(message: Message<Buffer>, ctx: HandlerContext<PoolClient | undefined>): Promise<Disposition> {
    if (this.first === 0) {
      this.first = performance.now();
      this.cpu = process.cpuUsage();
    }
    await this.effect(message.key, ctx.transaction);
    this.done++;
    return ack();
  }
}

/**
 * Raw amqplib at `prefetch`: each delivery runs `effect` (by default one INSERT of the ledger row in
 * its own transaction, autocommit), then is acked. The "alone" rows pass the port rows' handler
 * wrapped in the library's own transaction, without twophase.
 */
async function runFloor(
  queue: string,
  pool: Pool,
  ledger: string,
  prefetch = PREFETCH,
  effect: (key: string) => Promise<unknown> = (key) => pool.query(`INSERT INTO ${ledger} (key) VALUES ($1)`, [key]),
): Promise<{ elapsedMs: number; cpuUs: number }> {
  const model = await amqp.connect(AMQP_URL);
  const ch = await model.createChannel();
  await ch.prefetch(prefetch, false);
  let seen = 0;
  let first = 0;
  let cpu = process.cpuUsage();
  const measured = await new Promise<{ elapsedMs: number; cpuUs: number }>((resolve) => {
    void ch.consume(queue, (m) => {
      if (!m) return;
      if (first === 0) {
        first = performance.now();
        cpu = process.cpuUsage();
      }
      void effect(String(m.properties.headers?.['idempotency-key'])).then(() => {
        ch.ack(m);
        if (++seen === COUNT) {
          const d = process.cpuUsage(cpu);
          resolve({ elapsedMs: performance.now() - first, cpuUs: d.user + d.system });
        }
      });
    });
  });
  await model.close();
  return measured;
}

async function runTwophase(
  queue: string,
  claimer: Claimer,
  effect: (key: string, tx: PoolClient | undefined) => Promise<unknown>,
  batch: { prefetch: number; batchClaims: boolean } = { prefetch: PREFETCH, batchClaims: false },
  /** Busy requeues are counted into `busyRequeues` instead of failing the run (the Prisma row: see docs/performance.md). */
  countBusy?: { busyRequeues: number },
): Promise<{ elapsedMs: number; cpuUs: number }> {
  const windowed = batch.batchClaims ? { batchClaims: true, batchWindowMs: 0 } : {};
  const source = new RabbitMqSource({ url: AMQP_URL, queue, delayTiersMs: BENCH_DELAY_TIERS_MS, logger: silentLogger, ...windowed });
  const consumer = new LedgerConsumer(
    { name: 'bench', claimer, source, concurrency: batch.prefetch, leaseTtlMs: 30_000, doneTtlMs: 600_000, logger: silentLogger, deployment: { replicas: 1 } },
    effect,
  );
  await consumer.start();
  await new Promise<void>((resolve) => {
    const poll = setInterval(() => {
      if (source.stats.acks >= COUNT) {
        clearInterval(poll);
        resolve();
      }
    }, 1);
  });
  const d = process.cpuUsage(consumer.cpu);
  const measured = { elapsedMs: performance.now() - consumer.first, cpuUs: d.user + d.system };
  const stats = source.stats;
  if (countBusy) countBusy.busyRequeues += stats.requeues.busy;
  const busy = countBusy ? 0 : stats.requeues.busy;
  if (busy + stats.requeues.retry + stats.requeues.claimer_unavailable + stats.rejects > 0) throw new Error(`run not clean: ${JSON.stringify(stats)}`);
  await consumer.stop();
  return measured;
}

const KAFKA_PARTITIONS = 3;
const BROKERS = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');

async function runKafkaFloor(kafka: Kafka, topic: string, pool: Pool, ledger: string): Promise<{ elapsedMs: number; cpuUs: number }> {
  const consumer = kafka.consumer({ groupId: `twophase-bench-pg-floor-${process.pid}-${Date.now()}`, maxWaitTimeInMs: 100 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let seen = 0;
  let first = 0;
  let cpu = process.cpuUsage();
  const measured = await new Promise<{ elapsedMs: number; cpuUs: number }>((resolve) => {
    void consumer.run({
      partitionsConsumedConcurrently: KAFKA_PARTITIONS,
      eachMessage: async ({ message }) => {
        if (first === 0) {
          first = performance.now();
          cpu = process.cpuUsage();
        }
        await pool.query(`INSERT INTO ${ledger} (key) VALUES ($1)`, [String(message.headers?.['idempotency-key'])]);
        if (++seen === COUNT) {
          const d = process.cpuUsage(cpu);
          resolve({ elapsedMs: performance.now() - first, cpuUs: d.user + d.system });
        }
      },
    });
  });
  await consumer.disconnect();
  return measured;
}

async function runKafkaTwophase(kafka: Kafka, topic: string, claimer: Claimer, claimBatchSize: number, effect: (key: string, tx: PoolClient | undefined) => Promise<unknown>): Promise<{ elapsedMs: number; cpuUs: number }> {
  const source = new KafkaSource(
    { kafka },
    { topics: [topic], groupId: `twophase-bench-pg-${process.pid}-${Date.now()}`, fromBeginning: true, claimBatchSize, logger: silentLogger, consumer: { maxWaitTimeInMs: 100 } },
  );
  const consumer = new LedgerConsumer(
    { name: 'bench', claimer, source, concurrency: KAFKA_PARTITIONS * 2, leaseTtlMs: 30_000, doneTtlMs: 600_000, logger: silentLogger, deployment: { replicas: 1 } },
    effect,
  );
  await consumer.start();
  await new Promise<void>((resolve) => {
    const poll = setInterval(() => {
      if (source.stats.settled >= COUNT) {
        clearInterval(poll);
        resolve();
      }
    }, 1);
  });
  const d = process.cpuUsage(consumer.cpu);
  const measured = { elapsedMs: performance.now() - consumer.first, cpuUs: d.user + d.system };
  const stats = source.stats;
  if (stats.requeuedInPlace + stats.chunkRollbacks + stats.deadLettered > 0) throw new Error(`run not clean: ${JSON.stringify(stats)}`);
  await consumer.stop();
  return measured;
}

/** Median of each numeric field over the runs of one variant. */
function medianRow(variant: string, broker: string, runs: readonly Row[]): Row {
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  return {
    broker,
    variant,
    messages: COUNT,
    runs: runs.length,
    msgPerSec: median(runs.map((r) => r.msgPerSec)),
    cpuUsPerMsg: median(runs.map((r) => r.cpuUsPerMsg)),
    pgCommitsPerSec: median(runs.map((r) => r.pgCommitsPerSec)),
  };
}

async function main(): Promise<void> {
  const pgConfig = { host: process.env.PGHOST ?? '127.0.0.1', port: Number(process.env.PGPORT ?? 5432), user: process.env.PGUSER ?? 'postgres', database: process.env.PGDATABASE ?? 'postgres' };
  const pool = new Pool({ ...pgConfig, max: PREFETCH + 8 });
  const otherPools: Pool[] = [];
  const prismas: PrismaClient[] = [];
  const dataSources: DataSource[] = [];
  const schema = `tp_bench_${process.pid}`;
  const ledger = `${schema}.ledger`;
  const redis = new Redis({ host: '127.0.0.1', port: Number(process.env.REDIS_PORT ?? 6379), maxRetriesPerRequest: 1 });
  const admin = await amqp.connect(AMQP_URL);
  const kafka = new Kafka({ clientId: 'twophase-bench-pg', brokers: BROKERS, logLevel: logLevel.NOTHING });
  const kafkaAdmin = kafka.admin();
  await kafkaAdmin.connect();
  const topic = `twophase-bench-pg-${process.pid}`;
  const samples = new Map<string, { broker: string; rows: Row[] }>();
  try {
    await migrate(pool, { schema });
    await pool.query(`CREATE TABLE ${ledger} (id bigserial PRIMARY KEY, key text NOT NULL)`);
    // The claim records of the floor-batch rows.
    await pool.query(`CREATE TABLE ${schema}.claims (key text PRIMARY KEY, status text NOT NULL, created_at timestamptz NOT NULL DEFAULT clock_timestamp())`);
    // The Prisma test client's table (test/support/prisma/schema.prisma).
    await pool.query(`CREATE TABLE ${schema}.effect (id serial PRIMARY KEY, key text NOT NULL, amount integer NOT NULL, created_at timestamp(3) NOT NULL DEFAULT now())`);
    await kafkaAdmin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: KAFKA_PARTITIONS }, { topic: `${topic}.dlq`, numPartitions: 1 }] });
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    for (let i = 0; i < COUNT; i += 500) {
      const n = Math.min(500, COUNT - i);
      await producer.send({ topic, messages: Array.from({ length: n }, (_, j) => ({ key: `k${i + j}`, value: JSON.stringify({ i: i + j }), headers: { 'idempotency-key': `k-${i + j}` } })) });
    }
    await producer.disconnect();
    const transactional = (transactionBatch: 'per-record' | 'per-chunk') => new PostgresClaimer({ pool }, { schema, mode: 'transactional', transactionBatch });
    const txInsert = (key: string, tx: PoolClient | undefined) => tx!.query(`INSERT INTO ${ledger} (key) VALUES ($1)`, [key]);
    const ownInsert = (key: string) => pool.query(`INSERT INTO ${ledger} (key) VALUES ($1)`, [key]);
    const ledgerTable = pgSchema(schema).table('ledger', { id: bigserial('id', { mode: 'number' }).primaryKey(), key: text('key').notNull() });
    const drizzleClaimer = new PostgresClaimer({ pool, transactions: drizzleTransactions(drizzle(pool)) }, { schema, mode: 'transactional' });
    const drizzleInsert = (key: string, tx: unknown) => (tx as DrizzleTransaction<NodePgDatabase>).insert(ledgerTable).values({ key });
    interface KyselyLedger {
      ledger: { key: string };
    }
    const kyselyDb = new Kysely<KyselyLedger>({ dialect: new PostgresDialect({ pool }) });
    const kyselyClaimer = new PostgresClaimer({ pool, transactions: kyselyTransactions(kyselyDb, { pool }) }, { schema, mode: 'transactional' });
    const kyselyInsert = (key: string, tx: unknown) => (tx as Transaction<KyselyLedger>).withSchema(schema).insertInto('ledger').values({ key }).execute();
    // Second pools: idle clients close soon, so one variant's connections do not crowd the next's.
    const otherPool = new Pool({ ...pgConfig, max: PREFETCH + 2, idleTimeoutMillis: 1000 });
    otherPools.push(otherPool);
    const drizzleCallbackClaimer = new PostgresClaimer({ pool, transactions: drizzleTransactions(drizzle(otherPool)) }, { schema, mode: 'transactional' });
    const prisma = new PrismaClient({ adapter: new PrismaPg({ ...pgConfig, max: PREFETCH + 2, idleTimeoutMillis: 1000 }, { schema }) });
    prismas.push(prisma);
    // Prisma's first transactions start slowly (its client and pool warm up): not part of the measure.
    await prisma.$transaction(async (tx) => tx.$queryRawUnsafe('SELECT 1'));
    const prismaBusy = { busyRequeues: 0 };
    const prismaClaimer = new PostgresClaimer({ pool, transactions: prismaTransactions(prisma) }, { schema, mode: 'transactional' });
    const prismaInsert = (key: string, tx: unknown) => (tx as PrismaClient).effect.create({ data: { key, amount: 1 } });
    // Prisma through inboxAdapter(new PrismaPg(pool)), the claimer on that pool: the claim as without a port.
    const prismaPool = new Pool({ ...pgConfig, max: PREFETCH + 2, idleTimeoutMillis: 1000 });
    otherPools.push(prismaPool);
    const inbox = inboxAdapter(new PrismaPg(prismaPool, { schema }));
    const prismaOnPool = new PrismaClient({ adapter: inbox });
    prismas.push(prismaOnPool);
    await prismaOnPool.$transaction(async (tx) => tx.$queryRawUnsafe('SELECT 1'));
    const prismaPoolClaimer = new PostgresClaimer({ pool: prismaPool, transactions: prismaTransactions(prismaOnPool, { adapter: inbox }) }, { schema, mode: 'transactional' });
    // The same handlers in each library's own transaction, without twophase (the "alone" rows).
    const otherDrizzle = drizzle(otherPool);
    const pgAlone = async (key: string) => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await txInsert(key, client);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      } finally {
        client.release();
      }
    };
    const drizzleAlone = (key: string) => otherDrizzle.transaction(async (tx) => drizzleInsert(key, tx));
    const prismaAlone = (key: string) => prisma.$transaction(async (tx) => prismaInsert(key, tx));
    const LedgerEntity = new EntitySchema<{ id: number; key: string }>({
      name: 'Ledger',
      tableName: 'ledger',
      columns: { id: { type: 'bigint', primary: true, generated: true }, key: { type: String } },
    });
    const dataSource = await new DataSource({ type: 'postgres', host: pgConfig.host, port: pgConfig.port, username: pgConfig.user, database: pgConfig.database, schema, entities: [LedgerEntity], poolSize: PREFETCH + 2, extra: { idleTimeoutMillis: 1000 } }).initialize();
    dataSources.push(dataSource);
    const typeormClaimer = new PostgresClaimer({ pool, transactions: typeormTransactions(dataSource) }, { schema, mode: 'transactional' });
    // The claimer on the DataSource's own pool: the port's overPoolClient, the claim as without a port.
    const typeormPoolClaimer = new PostgresClaimer({ pool: typeormPool(dataSource), transactions: typeormTransactions(dataSource) }, { schema, mode: 'transactional' });
    const typeormInsert = (key: string, tx: unknown) => (tx as EntityManager).getRepository(LedgerEntity).insert({ key });
    const typeormAlone = (key: string) => dataSource.transaction(async (manager) => typeormInsert(key, manager));
    const variants: [string, string, (queue: string) => Promise<{ elapsedMs: number; cpuUs: number }>][] = [
      ['rabbitmq', 'floor (raw amqplib + INSERT, own transaction)', (queue) => runFloor(queue, pool, ledger)],
      ['rabbitmq', 'twophase transactional (PostgresClaimer inbox)', (queue) => runTwophase(queue, transactional('per-record'), txInsert)],
      ['rabbitmq', 'twophase + RedisClaimer + INSERT (own transaction)', (queue) => runTwophase(queue, new RedisClaimer({ redis }, { prefix: `bench-pg-${process.pid}-${Date.now()}` }), ownInsert)],
      ['kafka', 'floor (raw kafkajs + INSERT, own transaction)', () => runKafkaFloor(kafka, topic, pool, ledger)],
      ['kafka', 'twophase transactional, per-record transactions (claimBatchSize 1)', () => runKafkaTwophase(kafka, topic, transactional('per-record'), 1, txInsert)],
      ['kafka', 'twophase transactional, per-chunk transactions (claimBatchSize 64)', () => runKafkaTwophase(kafka, topic, transactional('per-chunk'), 64, txInsert)],
      ['rabbitmq', 'twophase transactional, batch mode (batchClaims, per-chunk), prefetch 32', (queue) => runTwophase(queue, transactional('per-chunk'), txInsert, { prefetch: 32, batchClaims: true })],
      ['rabbitmq', 'floor (raw amqplib + INSERT, own transaction), prefetch 100', (queue) => runFloor(queue, pool, ledger, 100)],
      ['rabbitmq', 'twophase transactional, batch mode (batchClaims, per-chunk), prefetch 100', (queue) => runTwophase(queue, transactional('per-chunk'), txInsert, { prefetch: 100, batchClaims: true })],
      ['rabbitmq', 'twophase transactional through the Drizzle port (drizzleTransactions)', (queue) => runTwophase(queue, drizzleClaimer as unknown as Claimer, drizzleInsert as never)],
      ['rabbitmq', 'twophase transactional through the Drizzle port, db on another pool (db.transaction)', (queue) => runTwophase(queue, drizzleCallbackClaimer as unknown as Claimer, drizzleInsert as never)],
      ['rabbitmq', 'twophase transactional through the Prisma port (prismaTransactions)', (queue) => runTwophase(queue, prismaClaimer as unknown as Claimer, prismaInsert as never, undefined, prismaBusy)],
      ['rabbitmq', 'pg alone (raw amqplib + BEGIN, the same INSERT on a pool client, COMMIT)', (queue) => runFloor(queue, pool, ledger, PREFETCH, pgAlone)],
      ['rabbitmq', 'Drizzle alone, another pool (raw amqplib + db.transaction, the same insert)', (queue) => runFloor(queue, pool, ledger, PREFETCH, drizzleAlone)],
      ['rabbitmq', 'Prisma alone (raw amqplib + prisma.$transaction, the same tx.effect.create)', (queue) => runFloor(queue, pool, ledger, PREFETCH, prismaAlone)],
      ['rabbitmq', 'twophase transactional through the Kysely port (kyselyTransactions), db on the claimer\'s pool', (queue) => runTwophase(queue, kyselyClaimer as unknown as Claimer, kyselyInsert as never)],
      ['rabbitmq', 'floor-batch (raw amqplib, one transaction per window: effects, one claim-record INSERT, COMMIT), prefetch 32', (queue) => runFloorBatch(queue, pool, ledger, `${schema}.claims`, 32, COUNT)],
      ['rabbitmq', 'floor-batch (raw amqplib, one transaction per window: effects, one claim-record INSERT, COMMIT), prefetch 100', (queue) => runFloorBatch(queue, pool, ledger, `${schema}.claims`, 100, COUNT)],
      ['rabbitmq', 'twophase transactional through the TypeORM port (typeormTransactions), its own pool', (queue) => runTwophase(queue, typeormClaimer as unknown as Claimer, typeormInsert as never)],
      ['rabbitmq', 'TypeORM alone (raw amqplib + dataSource.transaction, the same repository insert)', (queue) => runFloor(queue, pool, ledger, PREFETCH, typeormAlone)],
      ['rabbitmq', "twophase transactional through the TypeORM port, the claimer on the DataSource's pool (typeormPool)", (queue) => runTwophase(queue, typeormPoolClaimer as unknown as Claimer, typeormInsert as never)],
      ['rabbitmq', "twophase transactional through the Prisma port, the claimer on PrismaPg's pool (inboxAdapter)", (queue) => runTwophase(queue, prismaPoolClaimer as unknown as Claimer, prismaInsert as never)],
    ];
    const NATIVE = 1;
    const DRIZZLE = 9;
    const DRIZZLE_CALLBACK = 10;
    const PRISMA = 11;
    const PG_ALONE = 12;
    const DRIZZLE_ALONE = 13;
    const PRISMA_ALONE = 14;
    const KYSELY = 15;
    const FLOOR_BATCH_32 = 16;
    const FLOOR_BATCH_100 = 17;
    const TYPEORM = 18;
    const TYPEORM_ALONE = 19;
    const TYPEORM_POOL = 20;
    const PRISMA_POOL = 21;
    const selected = PORT_ONLY
      ? [NATIVE, DRIZZLE, KYSELY, TYPEORM_POOL, PRISMA_POOL, DRIZZLE_CALLBACK, PRISMA, TYPEORM, PG_ALONE, DRIZZLE_ALONE, PRISMA_ALONE, TYPEORM_ALONE].map((i) => variants[i]!)
      : RABBIT_BATCH_ONLY
        ? [0, 6, FLOOR_BATCH_32, 7, 8, FLOOR_BATCH_100].map((i) => variants[i]!)
        : variants;
    for (let run = 0; run < RUNS; run++) {
      // Rotated by one each run: a variant's place in the order (first after the fill, or after a
      // given neighbour) changes from run to run.
      const order = selected.map((_, i) => selected[(i + run) % selected.length]!);
      console.log(JSON.stringify({ run, order: order.map(([, variant]) => variant) }));
      for (const [broker, variant, measure] of order) {
        // The second pools close idle clients after 1 s: let the previous variant's close, so two
        // second pools (34 each) beside the claimer's pool (40) stay under a server's 100 connections.
        await new Promise((resolve) => setTimeout(resolve, 1500));
        // Unique keys per run: the inbox and the Redis claimer start empty for each variant.
        await pool.query(`TRUNCATE ${ledger}, ${schema}.effect, ${schema}.claims; TRUNCATE ${schema}.twophase_inbox, ${schema}.twophase_attempts`);
        const queue = `twophase-bench-pg-${process.pid}-${run}-${samples.size}`;
        if (broker === 'rabbitmq') {
          await declareQueue(admin, queue);
          await fill(admin, queue, COUNT, 64, `${queue}`);
        }
        const before = await commits(pool);
        const m = await measure(queue);
        const after = await commits(pool);
        if (broker === 'rabbitmq') await deleteTopology(admin, queue);
        const row: Row = {
          broker,
          variant,
          messages: COUNT,
          msgPerSec: Math.round((COUNT / m.elapsedMs) * 1000),
          cpuUsPerMsg: Math.round(m.cpuUs / COUNT),
          pgCommitsPerSec: Math.round(((after - before) / m.elapsedMs) * 1000),
        };
        console.log(JSON.stringify({ run, ...row }));
        const entry = samples.get(variant) ?? { broker, rows: [] };
        entry.rows.push(row);
        samples.set(variant, entry);
      }
    }
    const rows = [...samples.entries()].map(([variant, { broker, rows: runs }]) => medianRow(variant, broker, runs));
    // Ratios: the median over runs of each run's ratio (variants of one run ran back to back).
    const perRun = variants.map(([, variant]) => samples.get(variant)?.rows.map((r) => r.msgPerSec) ?? []);
    const rate = (i: number, j: number) => {
      const ratios = perRun[i]!.map((x, run) => x / perRun[j]![run]!).sort((a, b) => a - b);
      return Math.round(ratios[Math.floor(ratios.length / 2)]! * 100) / 100;
    };
    // Added time per message through a port: the median over runs of (1/port - 1/native) / (1/native).
    const addedPerMessage = (port = DRIZZLE) => {
      const added = perRun[port]!.map((x, run) => perRun[NATIVE]![run]! / x - 1).sort((a, b) => a - b);
      return Math.round(added[Math.floor(added.length / 2)]! * 1000) / 10;
    };
    // Twophase through a port against the same handler in the library's own transaction, per run:
    // time per message (alone rate / port rate), added wall µs per message (1/rate difference) and
    // added Node CPU µs per message; medians over runs.
    const vsAlone = (port: number, alone: number) => {
      const runsOf = (i: number) => samples.get(variants[i]![1])?.rows ?? [];
      const pairs = runsOf(port).map((r, run) => [r, runsOf(alone)[run]!] as const);
      const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
      return {
        timePerMessageRatio: Math.round(median(pairs.map(([p, a]) => a.msgPerSec / p.msgPerSec)) * 100) / 100,
        addedWallUsPerMessage: Math.round(median(pairs.map(([p, a]) => 1e6 / p.msgPerSec - 1e6 / a.msgPerSec))),
        addedCpuUsPerMessage: Math.round(median(pairs.map(([p, a]) => p.cpuUsPerMsg - a.cpuUsPerMsg))),
      };
    };
    const portRatios = () => ({
      nativeVsPgAlone: vsAlone(NATIVE, PG_ALONE),
      drizzleVsDrizzleAlone: vsAlone(DRIZZLE, DRIZZLE_ALONE),
      drizzleOtherPoolVsDrizzleAlone: vsAlone(DRIZZLE_CALLBACK, DRIZZLE_ALONE),
      prismaVsPrismaAlone: vsAlone(PRISMA, PRISMA_ALONE),
      typeormVsTypeormAlone: vsAlone(TYPEORM, TYPEORM_ALONE),
      typeormPoolVsTypeormAlone: vsAlone(TYPEORM_POOL, TYPEORM_ALONE),
      prismaPoolVsPrismaAlone: vsAlone(PRISMA_POOL, PRISMA_ALONE),
      // Each library alone against the same handler on twophase's transactional mode without a port
      // (rate ratio): above 1.1× time per message, the library alone already misses the port's 10 % goal.
      pgAloneVsNative: rate(PG_ALONE, NATIVE),
      drizzleAloneVsNative: rate(DRIZZLE_ALONE, NATIVE),
      prismaAloneVsNative: rate(PRISMA_ALONE, NATIVE),
      typeormAloneVsNative: rate(TYPEORM_ALONE, NATIVE),
      drizzleAddedTimePerMessagePercent: addedPerMessage(DRIZZLE),
      drizzleOtherPoolVsNative: rate(DRIZZLE_CALLBACK, NATIVE),
      drizzleOtherPoolAddedTimePerMessagePercent: addedPerMessage(DRIZZLE_CALLBACK),
      prismaPortVsNative: rate(PRISMA, NATIVE),
      prismaAddedTimePerMessagePercent: addedPerMessage(PRISMA),
      kyselyPortVsNative: rate(KYSELY, NATIVE),
      kyselyAddedTimePerMessagePercent: addedPerMessage(KYSELY),
      typeormPortVsNative: rate(TYPEORM, NATIVE),
      typeormAddedTimePerMessagePercent: addedPerMessage(TYPEORM),
      typeormPoolPortVsNative: rate(TYPEORM_POOL, NATIVE),
      typeormPoolAddedTimePerMessagePercent: addedPerMessage(TYPEORM_POOL),
      prismaPoolPortVsNative: rate(PRISMA_POOL, NATIVE),
      prismaPoolAddedTimePerMessagePercent: addedPerMessage(PRISMA_POOL),
    });
    const report = {
      at: new Date().toISOString(),
      prefetch: PREFETCH,
      kafkaPartitions: KAFKA_PARTITIONS,
      runs: RUNS,
      rows,
      prismaBusyRequeues: prismaBusy.busyRequeues,
      ratios: PORT_ONLY ? { drizzlePortVsNative: rate(DRIZZLE, NATIVE), ...portRatios() } : RABBIT_BATCH_ONLY ? {
        rabbitBatchVsFloorPrefetch32: rate(6, 0),
        rabbitBatchVsFloorPrefetch100: rate(8, 7),
        floorBatchVsFloorPrefetch32: rate(FLOOR_BATCH_32, 0),
        floorBatchVsFloorPrefetch100: rate(FLOOR_BATCH_100, 7),
        rabbitBatchVsFloorBatchPrefetch32: rate(6, FLOOR_BATCH_32),
        rabbitBatchVsFloorBatchPrefetch100: rate(8, FLOOR_BATCH_100),
      } : {
        ...portRatios(),
        transactionalVsFloor: rate(1, 0),
        redisVsFloor: rate(2, 0),
        kafkaPerRecordVsFloor: rate(4, 3),
        kafkaPerChunkVsFloor: rate(5, 3),
        kafkaPerChunkVsPerRecord: rate(5, 4),
        rabbitBatchVsFloorPrefetch32: rate(6, 0),
        rabbitBatchVsFloorPrefetch100: rate(8, 7),
        floorBatchVsFloorPrefetch32: rate(FLOOR_BATCH_32, 0),
        floorBatchVsFloorPrefetch100: rate(FLOOR_BATCH_100, 7),
        rabbitBatchVsFloorBatchPrefetch32: rate(6, FLOOR_BATCH_32),
        rabbitBatchVsFloorBatchPrefetch100: rate(8, FLOOR_BATCH_100),
        drizzlePortVsNative: rate(DRIZZLE, NATIVE),
      },
    };
    writeFileSync(OUT, `${JSON.stringify(report, null, 2)}\n`);
    console.log(JSON.stringify({ ...report.ratios, prismaBusyRequeues: prismaBusy.busyRequeues }));
  } finally {
    for (const prisma of prismas) await prisma.$disconnect().catch(() => undefined);
    for (const dataSource of dataSources) await dataSource.destroy().catch(() => undefined);
    for (const other of otherPools) await other.end().catch(() => undefined);
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await kafkaAdmin.deleteTopics({ topics: [topic, `${topic}.dlq`] }).catch(() => undefined);
    await kafkaAdmin.disconnect();
    await pool.end();
    await admin.close();
    redis.disconnect();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
