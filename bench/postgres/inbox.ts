/**
 * The PostgreSQL inbox benchmark (`npm run bench:postgres`), RabbitMQ, one run, side by side.
 * Each variant drains a pre-filled queue of `count` messages (unique keys) with prefetch 32 and
 * writes one ledger row per message:
 *
 *   floor          raw amqplib + one INSERT of the effect in its own transaction (autocommit), then ack
 *   transactional  twophase + PostgresClaimer (mode transactional): claim + effect + complete + COMMIT, then ack
 *   redis          twophase + RedisClaimer + the same INSERT in its own transaction
 *
 * Reports throughput (msg/s), this process's CPU per message (µs) and PostgreSQL commits per
 * second (`pg_stat_database.xact_commit` of the database, so other clients' commits count too on a
 * shared server). Writes bench/results/postgres.json (or `--out`). Not a test: nothing fails on a number.
 *
 *   npx ts-node --transpile-only bench/postgres/inbox.ts [--count 5000] [--out file.json]
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import amqp from 'amqplib';
import Redis from 'ioredis';
import { Pool, type PoolClient } from 'pg';
import { ack, type Claimer, ConsumerBase, type Disposition, type HandlerContext, type Message, silentLogger } from '../../src';
import { migrate, PostgresClaimer } from '../../adapters/postgres';
import { RabbitMqSource } from '../../adapters/rabbitmq';
import { RedisClaimer } from '../../adapters/redis';
import { AMQP_URL, BENCH_DELAY_TIERS_MS, declareQueue, deleteTopology, fill } from '../rabbitmq/broker';

const PREFETCH = 32;

interface Row {
  readonly variant: string;
  readonly messages: number;
  readonly msgPerSec: number;
  readonly cpuUsPerMsg: number;
  readonly pgCommitsPerSec: number;
}

const countArg = process.argv.indexOf('--count');
const COUNT = countArg >= 0 ? Number(process.argv[countArg + 1]) : 5000;
const outArg = process.argv.indexOf('--out');
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

async function runFloor(queue: string, pool: Pool, ledger: string): Promise<{ elapsedMs: number; cpuUs: number }> {
  const model = await amqp.connect(AMQP_URL);
  const ch = await model.createChannel();
  await ch.prefetch(PREFETCH, false);
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
      void pool.query(`INSERT INTO ${ledger} (key) VALUES ($1)`, [String(m.properties.headers?.['idempotency-key'])]).then(() => {
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

async function runTwophase(queue: string, claimer: Claimer, effect: (key: string, tx: PoolClient | undefined) => Promise<unknown>): Promise<{ elapsedMs: number; cpuUs: number }> {
  const source = new RabbitMqSource({ url: AMQP_URL, queue, delayTiersMs: BENCH_DELAY_TIERS_MS, logger: silentLogger });
  const consumer = new LedgerConsumer(
    { name: 'bench', claimer, source, concurrency: PREFETCH, leaseTtlMs: 30_000, doneTtlMs: 600_000, logger: silentLogger, deployment: { replicas: 1 } },
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
  if (stats.requeues.busy + stats.requeues.retry + stats.requeues.claimer_unavailable + stats.rejects > 0) throw new Error(`run not clean: ${JSON.stringify(stats)}`);
  await consumer.stop();
  return measured;
}

async function main(): Promise<void> {
  const pool = new Pool({ host: process.env.PGHOST ?? '127.0.0.1', port: Number(process.env.PGPORT ?? 5432), user: process.env.PGUSER ?? 'postgres', database: process.env.PGDATABASE ?? 'postgres', max: PREFETCH + 8 });
  const schema = `tp_bench_${process.pid}`;
  const ledger = `${schema}.ledger`;
  const redis = new Redis({ host: '127.0.0.1', port: Number(process.env.REDIS_PORT ?? 6379), maxRetriesPerRequest: 1 });
  const admin = await amqp.connect(AMQP_URL);
  const rows: Row[] = [];
  try {
    await migrate(pool, { schema });
    await pool.query(`CREATE TABLE ${ledger} (id bigserial PRIMARY KEY, key text NOT NULL)`);
    const variants: [string, () => Promise<{ elapsedMs: number; cpuUs: number }>][] = [
      ['floor (raw amqplib + INSERT, own transaction)', () => runFloor(queueName, pool, ledger)],
      [
        'twophase transactional (PostgresClaimer inbox)',
        () => runTwophase(queueName, new PostgresClaimer({ pool }, { schema, mode: 'transactional' }), (key, tx) => tx!.query(`INSERT INTO ${ledger} (key) VALUES ($1)`, [key])),
      ],
      [
        'twophase + RedisClaimer + INSERT (own transaction)',
        () => runTwophase(queueName, new RedisClaimer({ redis }, { prefix: `bench-pg-${process.pid}` }), (key) => pool.query(`INSERT INTO ${ledger} (key) VALUES ($1)`, [key])),
      ],
    ];
    let queueName = '';
    for (const [variant, run] of variants) {
      queueName = `twophase-bench-pg-${process.pid}-${rows.length}`;
      await declareQueue(admin, queueName);
      await fill(admin, queueName, COUNT, 64, `${queueName}`);
      const before = await commits(pool);
      const m = await run();
      const after = await commits(pool);
      await deleteTopology(admin, queueName);
      const row = {
        variant,
        messages: COUNT,
        msgPerSec: Math.round((COUNT / m.elapsedMs) * 1000),
        cpuUsPerMsg: Math.round(m.cpuUs / COUNT),
        pgCommitsPerSec: Math.round(((after - before) / m.elapsedMs) * 1000),
      };
      rows.push(row);
      console.log(JSON.stringify(row));
    }
    const floor = rows[0]!.msgPerSec;
    const report = { at: new Date().toISOString(), prefetch: PREFETCH, rows, ratios: { transactionalVsFloor: rows[1]!.msgPerSec / floor, redisVsFloor: rows[2]!.msgPerSec / floor } };
    writeFileSync(OUT, `${JSON.stringify(report, null, 2)}\n`);
    console.log(JSON.stringify(report.ratios));
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await pool.end();
    await admin.close();
    redis.disconnect();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
