/**
 * The transactional outbox stacks (`rabbitmq-outbox`, `kafka-outbox`), end to end:
 *
 * - the outbox and inbox tables migrated into a schema of the run (claim-store.ts `postgres`);
 * - a producer in this process: lanes of pg clients, each transaction INSERTs an order row
 *   (`chaos_outbox_orders`, the producer's effect) and stages one message with `stageOutbox`
 *   (ordering key `g<k>`, body `{ g, n }`), then COMMITs, or ROLLs BACK on purpose (a share of
 *   them): the rolled-back ids must never reach the broker. An ordering key belongs to one lane,
 *   so its commit order is its `n` order;
 * - relay processes (relay-worker.ts, several at once, LISTEN/NOTIFY) publishing to the local
 *   RabbitMQ (the default exchange, routing key = the run's queue) or Kafka (the run's topic,
 *   record key = ordering key), SIGKILLed at their claim, publish and confirm steps, and at
 *   random; their PostgreSQL sessions ended mid-transaction; their RabbitMQ connections closed;
 * - one downstream consumer process (outbox-consumer.ts) with the inbox, applying each message.
 *
 * The harness judges the ledger with the strict verdict (every committed id applied exactly
 * once), and this driver adds what only an outbox can get wrong: phantoms (an effect of a
 * rolled-back id), the order of each ordering key at the consumer, rows left dead or pending.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';
import { Pool, type PoolClient } from 'pg';
import { stageOutbox } from '../../../adapters/postgres';
import type { OutboxMessage } from '../../../src';
import { SERVICES } from '../../support/services';
import { logFault, pgConfig } from '../ledger';
import type { ScenarioProfile } from '../profiles';
import type { FromWorker, OutboxConsumerConfig, RelayWorkerConfig } from '../protocol';
import { Rng } from '../rng';
import { buildSchedule } from '../schedule';
import { type ClaimStore, startClaimStore } from './claim-store';
import { injectFault, WorkerPool } from './process-workers';
import type { StackSpec } from './registry';
import { closeConnectionsNamed } from './rabbitmq';
import { forkTs, logDir, type StackResult } from './stack';
import type { ChaosKafkaClient } from '../kafka-client';
import { createTopicsWithLeaders } from '../../../adapters/kafka/kafkajs-client';

const AMQP_URL = process.env.TWOPHASE_AMQP_URL ?? `amqp://guest:guest@${SERVICES.rabbitmq.host}:${SERVICES.rabbitmq.port}`;
const KAFKA_BROKERS = [`${SERVICES.kafka.host}:${SERVICES.kafka.port}`];
/** Producer lanes (concurrent staging transactions). */
const LANES = 4;
/** Ordering keys; key `g<k>` is staged by lane `k % LANES` only. */
const ORDERING_KEYS = 24;
/** Share of staging transactions rolled back on purpose. */
const ROLLBACK_SHARE = 0.1;

/** What only an outbox run finds (added to the ledger's verdict by the harness). */
export interface OutboxFindings {
  /** Staging transactions committed (their ids are the run's published keys). */
  readonly committed: number;
  readonly rolledBack: number;
  /** Ids of rolled-back transactions that were applied downstream. */
  readonly phantoms: readonly string[];
  /** `g<k>: n after m` where the consumer applied a key's messages out of staging order. */
  readonly orderViolations: readonly string[];
  /** Republished messages the downstream inbox found already done (no effect). */
  readonly republishesDeduplicated: number;
  /** Rows left in the outbox table after the drain (dead or pending). */
  readonly rowsLeft: number;
  readonly deadRows: number;
}

/** `client`: what the downstream consumer of `kafka-outbox` consumes with (the relays publish with kafkajs). */
export async function runOutboxStack(spec: StackSpec, runId: string, seed: number, s: ScenarioProfile, client: ChaosKafkaClient = 'kafkajs'): Promise<StackResult & { readonly outbox: OutboxFindings }> {
  const startedAt = Date.now();
  const rng = new Rng(seed);
  const broker = spec.broker as 'rabbitmq' | 'kafka';
  const ledger = new Pool(pgConfig(3));
  ledger.on('error', () => undefined);
  const store = await startClaimStore('postgres', runId, ledger);
  if (store.config.kind !== 'postgres') throw new Error('the outbox stacks run on the postgres store');
  const { schema, sessionPrefix } = store.config;
  const queue = `chaos.${runId}`;
  const topic = `chaos-${runId}`;
  const faultFile = join(logDir(runId), 'relay-faults.jsonl');
  const kafka = broker === 'kafka' ? new Kafka({ clientId: `chaos-${runId}-harness`, brokers: KAFKA_BROKERS, logLevel: logLevel.NOTHING }) : undefined;
  const admin = kafka?.admin();
  if (admin) {
    await admin.connect();
    await createTopicsWithLeaders(admin, [{ topic, numPartitions: 6 }, { topic: `${topic}.dlq`, numPartitions: 6 }]);
  }

  // The downstream consumer first: on RabbitMQ it declares the queue the relays publish to.
  const consumerConfig: OutboxConsumerConfig = {
    broker,
    schema,
    runId,
    workerId: 'consumer',
    ...(broker === 'rabbitmq' ? { amqp: { url: AMQP_URL, queue } } : { kafka: { brokers: KAFKA_BROKERS, topic, groupId: `chaos-${runId}`, client } }),
  };
  const consumer = forkTs(join(__dirname, '..', 'outbox-consumer.ts'), [JSON.stringify(consumerConfig)], runId, 'consumer');
  let consumerStats: Extract<FromWorker, { t: 'stats' }> | undefined;
  await new Promise<void>((resolve, reject) => {
    consumer.on('message', (m: FromWorker) => {
      if (m.t === 'ready') resolve();
      else if (m.t === 'stats') consumerStats = m;
    });
    consumer.once('exit', (code) => reject(new Error(`the outbox consumer exited (${code}) before it was ready: see .tmp/chaos/${runId}/consumer.log`)));
  });

  const relayConfig: Omit<RelayWorkerConfig, 'workerId'> = {
    broker,
    schema,
    sessionPrefix,
    runId,
    leaseMs: 2000,
    batchSize: 50,
    faultFile,
    runStartedAt: startedAt,
    ...(broker === 'rabbitmq' ? { amqpUrl: AMQP_URL } : { kafkaBrokers: KAFKA_BROKERS }),
  };
  const relays = new WorkerPool(relayConfig, s.workers, s.restartDelayMs, 'relay-', join(__dirname, '..', 'relay-worker.ts'));
  const producerPool = new Pool({ ...pgConfig(LANES), application_name: `chaos-${runId}-producer`.slice(0, 63) });
  producerPool.on('error', () => undefined);
  const rolledBack = new Set<string>();
  let committed = 0;
  let drained = false;
  try {
    await relays.fill();
    const t0 = Date.now();
    const elapsed = () => Date.now() - t0;
    const schedule = buildSchedule(rng.fork('faults'), { ratesPerMinute: s.faultsPerMinute, fromMs: 2000, untilMs: Math.max(3000, s.publishMs - 2000), durationMs: s.outageMs });
    const targets = {
      pool: relays,
      // A relay is in a transaction only for its short claim and DELETE statements: when none of
      // its sessions is, pg_terminate ends one of its idle sessions (the LISTEN one, or a pooled one).
      store: { ...store, terminateSession: (workerId: string) => terminateRelaySession(ledger, store, sessionPrefix, workerId) },
      ledger,
      runId,
      startedAt: t0,
      ...(broker === 'rabbitmq' ? { closeConnections: (id: string) => closeConnectionsNamed(`chaos-${runId}-${id}`) } : {}),
    };
    const faults = (async () => {
      for (const f of schedule) {
        const wait = f.atMs - elapsed();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        await injectFault(f, targets).catch((error: unknown) => process.stdout.write(`  fault ${f.kind} failed: ${String(error)}\n`));
      }
    })();
    const plan = rng.fork('rollbacks');
    const lane = async (laneIndex: number) => {
      const client = await producerPool.connect();
      try {
        // ORDERING_KEYS is a multiple of LANES: every i of a lane has an ordering key of that lane.
        for (let i = laneIndex; i < s.messages; i += LANES) {
          const key = i % ORDERING_KEYS;
          const rollback = plan.fork(`m${i}`).next() < ROLLBACK_SHARE;
          const wait = Math.floor((i / s.messages) * s.publishMs) - elapsed();
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
          const id = await stageOne(client, { schema, runId, i, grp: `g${key}`, rollback, broker, queue, topic });
          if (rollback) rolledBack.add(id);
          else committed++;
        }
      } finally {
        client.release();
      }
    };
    await Promise.all(Array.from({ length: LANES }, (_, k) => lane(k)));
    await faults;
    process.stdout.write(`  staged ${committed} committed and ${rolledBack.size} rolled-back messages in ${(elapsed() / 1000).toFixed(1)} s; draining\n`);
    const deadline = Date.now() + s.drainTimeoutMs;
    let quiet = 0;
    while (Date.now() < deadline) {
      const r = await ledger.query<{ left: string; applied: string }>(
        `SELECT (SELECT count(*) FROM ${schema}.twophase_outbox) AS left, (SELECT count(DISTINCT key) FROM chaos_effects WHERE run_id = $1) AS applied`,
        [runId],
      );
      const done = Number(r.rows[0]!.left) === 0 && Number(r.rows[0]!.applied) >= committed && (consumerStats?.inFlight ?? 0) === 0;
      // A few quiet checks in a row: a republish still on its way would show up as a duplicate.
      quiet = done ? quiet + 1 : 0;
      if (quiet >= 4) {
        drained = true;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  } finally {
    await relays.close();
    await new Promise<void>((resolve) => {
      if (consumer.exitCode !== null || consumer.signalCode !== null) return resolve();
      const timer = setTimeout(() => consumer.kill('SIGKILL'), 15_000);
      consumer.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      consumer.send({ t: 'stop' });
    });
    await producerPool.end().catch(() => undefined);
  }
  // The relays' own kills, logged before each SIGKILL.
  if (existsSync(faultFile)) {
    for (const line of readFileSync(faultFile, 'utf8').split('\n').filter(Boolean)) {
      const f = JSON.parse(line) as { elapsedMs: number; kind: string; target: string; detail: string };
      await logFault(ledger, runId, f.elapsedMs, f.kind, f.target, f.detail);
    }
  }
  const findings = await readFindings(ledger, runId, schema, rolledBack, committed, consumerStats?.duplicates ?? 0);
  const committedIds = await ledger.query<{ id: string }>('SELECT id FROM chaos_outbox_orders WHERE run_id = $1', [runId]);
  if (broker === 'rabbitmq') await deleteQueues(queue);
  if (admin) {
    await admin.deleteTopics({ topics: [topic, `${topic}.dlq`], timeout: 10_000 }).catch(() => undefined);
    await admin.deleteGroups([`chaos-${runId}`]).catch(() => undefined);
    await admin.disconnect();
  }
  await store.destroy();
  await ledger.end();
  return {
    published: committed + rolledBack.size,
    uniqueKeys: committedIds.rows.map((r) => r.id),
    poison: [],
    duplicatesInjected: 0,
    killedWorkers: relays.killed,
    faults: {},
    deadLetters: [],
    drained,
    elapsedMs: Date.now() - startedAt,
    outbox: findings,
  };
}

async function terminateRelaySession(ledger: Pool, store: ClaimStore, sessionPrefix: string, workerId: string): Promise<{ ended: boolean; detail: string }> {
  const inTransaction = await store.terminateSession!(workerId);
  if (inTransaction.ended) return inTransaction;
  const r = await ledger.query<{ pid: number; query: string; terminated: boolean }>(
    `SELECT pid, query, pg_terminate_backend(pid) AS terminated FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid() ORDER BY random() LIMIT 1`,
    [`${sessionPrefix}-${workerId}`],
  );
  const row = r.rows[0];
  return row?.terminated ? { ended: true, detail: `backend ${row.pid} ended between transactions (last statement: ${row.query.slice(0, 40)})` } : inTransaction;
}

interface StageOne {
  readonly schema: string;
  readonly runId: string;
  readonly i: number;
  readonly grp: string;
  readonly rollback: boolean;
  readonly broker: 'rabbitmq' | 'kafka';
  readonly queue: string;
  readonly topic: string;
}

/** One staging transaction: the order row and its message, committed or rolled back. Returns the message's id. */
async function stageOne(client: PoolClient, o: StageOne): Promise<string> {
  const message: OutboxMessage = {
    to: o.broker === 'rabbitmq' ? { exchange: '', routingKey: o.queue } : { topic: o.topic, key: o.grp },
    body: { g: o.grp, n: o.i },
    orderingKey: o.grp,
  };
  await client.query('BEGIN');
  try {
    const [id] = await stageOutbox(client, message, { schema: o.schema, idScope: `${o.runId}:${o.i}`, notify: true });
    await client.query('INSERT INTO chaos_outbox_orders (run_id, id, grp, n) VALUES ($1, $2, $3, $4)', [o.runId, id, o.grp, o.i]);
    await client.query(o.rollback ? 'ROLLBACK' : 'COMMIT');
    return id!;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

async function readFindings(ledger: Pool, runId: string, schema: string, rolledBack: ReadonlySet<string>, committed: number, republishesDeduplicated: number): Promise<OutboxFindings> {
  const effects = await ledger.query<{ key: string }>('SELECT DISTINCT key FROM chaos_effects WHERE run_id = $1', [runId]);
  const phantoms = effects.rows.map((r) => r.key).filter((k) => rolledBack.has(k));
  const applied = await ledger.query<{ grp: string; n: number }>('SELECT grp, n FROM chaos_outbox_applied WHERE run_id = $1 ORDER BY seq', [runId]);
  const last = new Map<string, number>();
  const orderViolations: string[] = [];
  for (const { grp, n } of applied.rows) {
    const before = last.get(grp);
    if (before !== undefined && n <= before) orderViolations.push(`${grp}: ${n} after ${before}`);
    last.set(grp, Math.max(before ?? -1, n));
  }
  const rows = await ledger.query<{ left: string; dead: string }>(`SELECT count(*) AS left, count(*) FILTER (WHERE state = 'dead') AS dead FROM ${schema}.twophase_outbox`);
  return {
    committed,
    rolledBack: rolledBack.size,
    phantoms,
    orderViolations,
    republishesDeduplicated,
    rowsLeft: Number(rows.rows[0]!.left),
    deadRows: Number(rows.rows[0]!.dead),
  };
}

/** Deletes the queues the downstream consumer declared for the run. */
async function deleteQueues(queue: string): Promise<void> {
  const connection = await amqp.connect(AMQP_URL);
  const channel = await connection.createChannel();
  channel.on('error', () => undefined);
  for (const q of [queue, `${queue}.dlq`, `${queue}.delay.200ms`, `${queue}.delay.1000ms`]) await channel.deleteQueue(q).catch(() => undefined);
  await channel.deleteExchange(`${queue}.dlx`).catch(() => undefined);
  await connection.close().catch(() => undefined);
}
