/**
 * The floor of a design that shares one transaction per claim window, with no SDK: raw amqplib at
 * `prefetch`; the deliveries that arrive in one event-loop turn (or until the unsettled deliveries
 * reach the prefetch) form a window; on one pool client: BEGIN, each delivery's effect INSERT (one
 * round trip each, as a handler's statement would be), ONE multi-row INSERT of the window's claim
 * records with COMMIT in the same round trip; then each delivery acked. No attempt counts, no
 * locks, no fencing: the least that window-shared claims can send. Used by bench/postgres/inbox.ts
 * and bench/postgres/rabbit-batch.ts.
 */
import { performance } from 'node:perf_hooks';
import amqp, { type ConsumeMessage } from 'amqplib';
import { escapeLiteral, type Pool, type PoolClient } from 'pg';
import { AMQP_URL } from '../rabbitmq/broker';

export interface FloorBatchMeasure {
  readonly elapsedMs: number;
  /** This process's CPU (user + system), µs, from the first delivery to the last ack. */
  readonly cpuUs: number;
  readonly systemUs: number;
  /** Windows (transactions) run. */
  readonly batches: number;
}

/** `claims` is a table (key text PRIMARY KEY, status text); `ledger` a table (key text). */
export async function runFloorBatch(queue: string, pool: Pool, ledger: string, claims: string, prefetch: number, count: number): Promise<FloorBatchMeasure> {
  const model = await amqp.connect(AMQP_URL);
  const ch = await model.createChannel();
  await ch.prefetch(prefetch, false);
  let seen = 0;
  let first = 0;
  let unsettled = 0;
  let batches = 0;
  let cpu = process.cpuUsage();
  let window: ConsumeMessage[] = [];
  let immediate: NodeJS.Immediate | undefined;
  let done!: (m: FloorBatchMeasure) => void;
  const measured = new Promise<FloorBatchMeasure>((resolve) => {
    done = resolve;
  });
  const runWindow = async (batch: ConsumeMessage[]) => {
    batches++;
    const keys = batch.map((m) => String(m.properties.headers?.['idempotency-key']));
    const client: PoolClient = await pool.connect();
    try {
      await client.query('BEGIN');
      for (const key of keys) await client.query(`INSERT INTO ${ledger} (key) VALUES ($1)`, [key]);
      // One simple query (the keys written in as one array literal): the claim records, COMMIT.
      const array = escapeLiteral(`{${keys.map((k) => `"${k.replace(/["\\]/g, '\\$&')}"`).join(',')}}`);
      await client.query(`INSERT INTO ${claims} (key, status) SELECT k, 'completed' FROM unnest(${array}::text[]) AS k; COMMIT`);
    } finally {
      client.release();
    }
    for (const m of batch) {
      ch.ack(m);
      unsettled--;
      if (++seen === count) {
        const d = process.cpuUsage(cpu);
        done({ elapsedMs: performance.now() - first, cpuUs: d.user + d.system, systemUs: d.system, batches });
      }
    }
  };
  const flush = () => {
    if (immediate) clearImmediate(immediate);
    immediate = undefined;
    const batch = window;
    window = [];
    if (batch.length > 0) void runWindow(batch);
  };
  await ch.consume(queue, (m) => {
    if (!m) return;
    if (first === 0) {
      first = performance.now();
      cpu = process.cpuUsage();
    }
    unsettled++;
    window.push(m);
    if (unsettled >= prefetch) flush();
    else if (window.length === 1) immediate = setImmediate(flush);
  });
  const result = await measured;
  await model.close();
  return result;
}
