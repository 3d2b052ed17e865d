/**
 * The RabbitMQ stacks: the local RabbitMQ (127.0.0.1:5672, a queue per run), the run's claim store
 * (claim-store.ts: a private redis-server, or the PostgreSQL inbox in a schema of the run), worker
 * processes with RabbitMqSource and the stack's claimer, and a confirmed amqplib producer in this
 * process.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import amqp, { type ConfirmChannel } from 'amqplib';
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

const run = promisify(execFile);
const AMQP_URL = process.env.TWOPHASE_AMQP_URL ?? `amqp://guest:guest@${SERVICES.rabbitmq.host}:${SERVICES.rabbitmq.port}`;
const DELAY_TIERS_MS = [200, 1000, 3000];

/** Closes every broker connection whose client-given name starts with `namePrefix` (rabbitmqctl). */
export async function closeConnectionsNamed(namePrefix: string): Promise<string> {
  const { stdout } = await run('rabbitmqctl', ['list_connections', 'pid', 'client_properties', '--formatter', 'json', '-q'], { timeout: 30_000 });
  const rows = JSON.parse(stdout) as { pid: string; client_properties: [string, string, unknown][] }[];
  const targets = rows.filter((r) => {
    const name = r.client_properties.find(([k]) => k === 'connection_name')?.[2];
    return typeof name === 'string' && (name === namePrefix || name.startsWith(`${namePrefix}:`));
  });
  for (const t of targets) await run('rabbitmqctl', ['close_connection', t.pid, 'chaos: broker closed the connection'], { timeout: 30_000 }).catch(() => undefined);
  return `${targets.length} connection(s) closed`;
}

export async function runRabbitMqStack(spec: StackSpec, runId: string, seed: number, s: ScenarioProfile): Promise<StackResult> {
  const startedAt = Date.now();
  const rng = new Rng(seed);
  const queue = `chaos.${runId}`;
  const ledger = new Pool(pgConfig(2));
  const store = await startClaimStore(spec.store as Exclude<StackSpec['store'], 'memory'>, runId, ledger);
  const connection = await amqp.connect(AMQP_URL, { clientProperties: { connection_name: `chaos-${runId}-producer` } });
  connection.on('error', () => undefined);
  const channel: ConfirmChannel = await connection.createConfirmChannel();
  channel.on('error', () => undefined);
  const pool = new WorkerPool(
    {
      broker: 'rabbitmq',
      store: store.config,
      runId,
      seed,
      // The inbox needs no held-back kills: a kill between the effect and the COMMIT rolls both back.
      strict: s.name === 'strict' && !isInbox(spec.store),
      leaseTtlMs: s.leaseTtlMs,
      concurrency: s.concurrency,
      handler: s.handler,
      runStartedAt: startedAt,
      amqp: { url: AMQP_URL, queue, delayTiersMs: DELAY_TIERS_MS },
    },
    s.workers,
    s.restartDelayMs,
    'r',
  );
  const plan = buildPlan(rng.fork('plan'), { runId, messages: s.messages, duplicateShare: s.duplicateShare, poisonShare: s.poisonShare, publishMs: s.publishMs });
  let drained = false;
  try {
    await pool.fill(); // the workers declare the topology
    const t0 = Date.now();
    const elapsed = () => Date.now() - t0;
    const schedule = buildSchedule(rng.fork('faults'), { ratesPerMinute: s.faultsPerMinute, fromMs: 2000, untilMs: Math.max(3000, s.publishMs - 2000), durationMs: s.outageMs });
    const targets = { pool, store, ledger, runId, startedAt: t0, closeConnections: (id: string) => closeConnectionsNamed(`chaos-${runId}-${id}`) };
    const faults = (async () => {
      for (const f of schedule) {
        const wait = f.atMs - elapsed();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        await injectFault(f, targets).catch((error: unknown) => process.stdout.write(`  fault ${f.kind} failed: ${String(error)}\n`));
      }
    })();
    let pending: Promise<void>[] = [];
    for (const m of plan) {
      const wait = m.atMs - elapsed();
      if (wait > 0) {
        await Promise.all(pending);
        pending = [];
        if (m.atMs - elapsed() > 0) await new Promise((resolve) => setTimeout(resolve, m.atMs - elapsed()));
      }
      const body = Buffer.from(JSON.stringify({ k: m.key, ...(m.poison ? { p: 1 } : {}) }));
      pending.push(
        new Promise<void>((resolve, reject) =>
          channel.sendToQueue(queue, body, { persistent: true, contentType: 'application/json', headers: { 'idempotency-key': m.key } }, (err) => (err ? reject(err) : resolve())),
        ),
      );
      if (pending.length >= 200) {
        await Promise.all(pending);
        pending = [];
      }
    }
    await Promise.all(pending);
    await faults;
    process.stdout.write(`  published ${plan.length} messages in ${(elapsed() / 1000).toFixed(1)} s; draining\n`);
    const deadline = Date.now() + s.drainTimeoutMs;
    let quiet = 0;
    while (Date.now() < deadline) {
      let waiting = 0;
      for (const q of [queue, ...DELAY_TIERS_MS.map((t) => `${queue}.delay.${t}ms`)]) waiting += (await channel.checkQueue(q)).messageCount;
      quiet = waiting === 0 && pool.idle() && pool.live.length >= 1 ? quiet + 1 : 0;
      if (quiet >= 4) {
        drained = true;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  } finally {
    await pool.close();
  }
  const deadLetters: { key: string; reason: string }[] = [];
  for (;;) {
    const m = await channel.get(`${queue}.dlq`, { noAck: true });
    if (!m) break;
    const h = m.properties.headers ?? {};
    const text = (v: unknown) => (typeof v === 'string' ? v : Buffer.isBuffer(v) ? v.toString('utf8') : String(v));
    deadLetters.push({ key: text(h['idempotency-key']), reason: text(h['twophase-reason']) });
  }
  for (const q of [queue, `${queue}.dlq`, ...DELAY_TIERS_MS.map((t) => `${queue}.delay.${t}ms`)]) await channel.deleteQueue(q).catch(() => undefined);
  await channel.deleteExchange(`${queue}.dlx`).catch(() => undefined);
  await connection.close().catch(() => undefined);
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
