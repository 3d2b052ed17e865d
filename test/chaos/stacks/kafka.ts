/**
 * The Kafka stacks: the local Kafka broker (127.0.0.1:9092, `npm run kafka:start`), a topic and its
 * `.dlq` per run (6 partitions), one consumer group of worker processes (KafkaSource + the stack's
 * claimer on the run's claim store, see claim-store.ts), and a kafkajs producer in this process
 * keyed by the idempotency key. The workers consume with the client `run.ts --client` names.
 * Group joins and leaves are faults of their own; a SIGKILL leaves the group at the session
 * timeout (classic protocol: 6 s, the broker's minimum; KIP-848: the broker's
 * `group.consumer.session.timeout.ms`, 45 s by default, which no member can lower).
 */
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import { Pool } from 'pg';
import { SERVICES } from '../../support/services';
import { pgConfig } from '../ledger';
import type { ScenarioProfile } from '../profiles';
import { startClaimStore } from './claim-store';
import { isInbox, type StackSpec } from './registry';
import { Rng } from '../rng';
import { buildPlan, buildSchedule } from '../schedule';
import { injectFault, WorkerPool } from './process-workers';
import type { StackResult } from './stack';
import type { ChaosKafkaClient } from '../kafka-client';
import { createTopicsWithLeaders } from '../../../adapters/kafka/kafkajs-client';

const BROKERS = [`${SERVICES.kafka.host}:${SERVICES.kafka.port}`];
const PARTITIONS = 6;
const SESSION_TIMEOUT_MS = 6000;

/** `client`: what the worker processes consume with (the harness's producer, admin and dead-letter reader are kafkajs). */
export async function runKafkaStack(spec: StackSpec, runId: string, seed: number, s: ScenarioProfile, client: ChaosKafkaClient = 'kafkajs'): Promise<StackResult> {
  const startedAt = Date.now();
  const rng = new Rng(seed);
  const topic = `chaos-${runId}`;
  const groupId = `chaos-${runId}`;
  const kafka = new Kafka({ clientId: `chaos-${runId}-harness`, brokers: BROKERS, logLevel: logLevel.NOTHING, retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 2000 } });
  const admin = kafka.admin();
  await admin.connect();
  await createTopicsWithLeaders(admin, [{ topic, numPartitions: PARTITIONS }, { topic: `${topic}.dlq`, numPartitions: PARTITIONS }]);
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, idempotent: true });
  await producer.connect();
  const ledger = new Pool(pgConfig(2));
  const store = await startClaimStore(spec.store as Exclude<StackSpec['store'], 'memory'>, runId, ledger);
  const pool = new WorkerPool(
    {
      broker: 'kafka',
      store: store.config,
      runId,
      seed,
      // The inbox needs no held-back kills: a kill between the effect and the COMMIT rolls both back.
      strict: s.name === 'strict' && !isInbox(spec.store),
      leaseTtlMs: s.leaseTtlMs,
      concurrency: s.concurrency,
      handler: s.handler,
      runStartedAt: startedAt,
      kafka: { brokers: BROKERS, topic, groupId, sessionTimeoutMs: SESSION_TIMEOUT_MS, client },
    },
    s.workers,
    s.restartDelayMs,
    'k',
  );
  const plan = buildPlan(rng.fork('plan'), { runId, messages: s.messages, duplicateShare: s.duplicateShare, poisonShare: s.poisonShare, publishMs: s.publishMs });
  let drained = false;
  const lag = async (): Promise<number> => {
    const [high, [committed]] = await Promise.all([admin.fetchTopicOffsets(topic), admin.fetchOffsets({ groupId, topics: [topic] })]);
    const done = new Map((committed?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
    return high.reduce((sum, p) => sum + Math.max(0, Number(p.high) - Math.max(0, done.get(p.partition) ?? 0)), 0);
  };
  try {
    await pool.fill();
    const t0 = Date.now();
    const elapsed = () => Date.now() - t0;
    const schedule = buildSchedule(rng.fork('faults'), { ratesPerMinute: s.faultsPerMinute, fromMs: 2000, untilMs: Math.max(3000, s.publishMs - 2000), durationMs: s.outageMs });
    const targets = { pool, store, ledger, runId, startedAt: t0 };
    const faults = (async () => {
      for (const f of schedule) {
        const wait = f.atMs - elapsed();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        await injectFault(f, targets).catch((error: unknown) => process.stdout.write(`  fault ${f.kind} failed: ${String(error)}\n`));
      }
    })();
    let batch: { key: string; value: string; headers: Record<string, string> }[] = [];
    const flush = async () => {
      if (batch.length === 0) return;
      const messages = batch;
      batch = [];
      await producer.send({ topic, messages });
    };
    for (const m of plan) {
      if (m.atMs > elapsed()) {
        await flush();
        const wait = m.atMs - elapsed();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      }
      batch.push({ key: m.key, value: JSON.stringify({ k: m.key, ...(m.poison ? { p: 1 } : {}) }), headers: { 'idempotency-key': m.key } });
      if (batch.length >= 200) await flush();
    }
    await flush();
    await faults;
    process.stdout.write(`  published ${plan.length} messages in ${(elapsed() / 1000).toFixed(1)} s; draining\n`);
    const deadline = Date.now() + s.drainTimeoutMs;
    let quiet = 0;
    while (Date.now() < deadline) {
      quiet = (await lag()) === 0 && pool.idle() ? quiet + 1 : 0;
      if (quiet >= 4) {
        drained = true;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    if (!drained) process.stdout.write(await describeStall(admin, topic, groupId, pool));
  } finally {
    await pool.close();
    await producer.disconnect().catch(() => undefined);
  }
  const deadLetters = await readDeadLetters(kafka, admin, `${topic}.dlq`, runId);
  await admin.deleteTopics({ topics: [topic, `${topic}.dlq`], timeout: 10_000 }).catch(() => undefined);
  await admin.disconnect();
  await store.destroy();
  await ledger.end();
  return {
    published: plan.length,
    uniqueKeys: plan.filter((m) => !m.duplicate).map((m) => m.key),
    poison: plan.filter((m) => m.poison && !m.duplicate).map((m) => m.key),
    duplicatesInjected: plan.filter((m) => m.duplicate).length,
    ...(pool.gateTotals() ? { gate: pool.gateTotals() } : {}),
    killedWorkers: pool.killed,
    faults: {},
    deadLetters,
    drained,
    elapsedMs: Date.now() - startedAt,
  };
}

/** What a run that did not drain left behind: each partition's lag, the group's members and assignment, each worker's state. */
async function describeStall(admin: ReturnType<Kafka['admin']>, topic: string, groupId: string, pool: WorkerPool): Promise<string> {
  const [high, [committed], groups] = await Promise.all([
    admin.fetchTopicOffsets(topic),
    admin.fetchOffsets({ groupId, topics: [topic] }),
    admin.describeGroups([groupId]).catch((error: unknown) => ({ groups: [], error: String(error) })),
  ]);
  const done = new Map((committed?.partitions ?? []).map((p) => [p.partition, p.offset]));
  const lines = ['  stall: lag by partition ' + high.map((p) => `${p.partition}: high ${p.high}, committed ${done.get(p.partition) ?? 'none'}`).join('; ')];
  for (const g of groups.groups) {
    lines.push(`  stall: group ${g.state}, protocol ${g.protocolType}/${g.protocol}, ${g.members.length} members: ${g.members.map((m) => m.clientId).join(', ')}`);
  }
  lines.push(`  stall: workers ${pool.describe()}`);
  for (const line of pool.logTails(8)) lines.push(`  stall: log ${line}`);
  return lines.join('\n') + '\n';
}

/** Reads the dead-letter topic from the beginning up to its high watermarks. */
async function readDeadLetters(kafka: Kafka, admin: ReturnType<Kafka['admin']>, dlq: string, runId: string): Promise<{ key: string; reason: string }[]> {
  const high = new Map((await admin.fetchTopicOffsets(dlq)).map((p) => [p.partition, Number(p.high)]));
  const total = [...high.values()].reduce((a, b) => a + b, 0);
  const out: { key: string; reason: string }[] = [];
  if (total === 0) return out;
  const consumer = kafka.consumer({ groupId: `chaos-${runId}-dlq-reader`, sessionTimeout: SESSION_TIMEOUT_MS, heartbeatInterval: 500, maxWaitTimeInMs: 100 });
  await consumer.connect();
  await consumer.subscribe({ topics: [dlq], fromBeginning: true });
  const text = (v: unknown) => (Buffer.isBuffer(v) ? v.toString('utf8') : String(v));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`read ${out.length} of ${total} dead letters of ${dlq} in 60 s`)), 60_000);
    void consumer
      .run({
        eachMessage: async ({ message }) => {
          const h = message.headers ?? {};
          out.push({ key: text(h['idempotency-key']), reason: text(h['twophase-reason']) });
          if (out.length >= total) {
            clearTimeout(timer);
            resolve();
          }
        },
      })
      .catch(reject);
  });
  await consumer.disconnect();
  await admin.deleteGroups([`chaos-${runId}-dlq-reader`]).catch(() => undefined);
  return out;
}
