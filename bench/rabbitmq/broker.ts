/**
 * Broker helpers of the RabbitMQ benchmark: queue setup, pre-filling a queue, clean-up.
 */
import amqp, { type ChannelModel } from 'amqplib';
import { planTopology, resolveSourceOptions } from '../../adapters/rabbitmq';

export const AMQP_URL = process.env.TWOPHASE_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

/** Delay tiers of the benchmark queues (no requeues happen; kept short and few). */
export const BENCH_DELAY_TIERS_MS = [1000];

/** Every queue and exchange twophase declares for `queue`, for clean-up. */
export function topologyNames(queue: string): { queues: string[]; exchanges: string[] } {
  const plan = planTopology(resolveSourceOptions({ url: AMQP_URL, queue, delayTiersMs: BENCH_DELAY_TIERS_MS }));
  return { queues: [plan.workQueue.name, plan.deadLetterQueue.name, ...plan.delayQueues.map((d) => d.name)], exchanges: [plan.deadLetterExchange] };
}

/** Declares the queue exactly as the twophase source would (so raw and twophase runs compare like for like). */
export async function declareQueue(model: ChannelModel, queue: string): Promise<void> {
  const plan = planTopology(resolveSourceOptions({ url: AMQP_URL, queue, delayTiersMs: BENCH_DELAY_TIERS_MS }));
  const ch = await model.createChannel();
  await ch.assertExchange(plan.deadLetterExchange, 'direct', { durable: true });
  await ch.assertQueue(plan.deadLetterQueue.name, { durable: true, arguments: plan.deadLetterQueue.arguments });
  await ch.bindQueue(plan.deadLetterQueue.name, plan.deadLetterExchange, plan.deadLetterRoutingKey);
  for (const d of plan.delayQueues) await ch.assertQueue(d.name, { durable: true, arguments: d.arguments });
  await ch.assertQueue(queue, { durable: true, arguments: plan.workQueue.arguments });
  await ch.close();
}

/**
 * Publishes `count` messages of `bodyBytes` bytes with unique message ids and idempotency keys,
 * with publisher confirms, and waits until the queue reports them all.
 */
export async function fill(model: ChannelModel, queue: string, count: number, bodyBytes: number, runId: string): Promise<void> {
  const ch = await model.createConfirmChannel();
  const body = Buffer.alloc(bodyBytes, 'x');
  const window = 2000;
  for (let i = 0; i < count; i++) {
    const id = `${runId}-${i}`;
    const ok = ch.publish('', queue, body, { messageId: id, headers: { 'idempotency-key': id }, contentType: 'application/octet-stream' });
    if (!ok) await new Promise((resolve) => ch.once('drain', resolve));
    if (i % window === window - 1) await ch.waitForConfirms();
  }
  await ch.waitForConfirms();
  for (;;) {
    const { messageCount } = await ch.checkQueue(queue);
    if (messageCount >= count) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await ch.close();
}

/** Deletes everything twophase declared for `queue`. */
export async function deleteTopology(model: ChannelModel, queue: string): Promise<void> {
  const { queues, exchanges } = topologyNames(queue);
  const ch = await model.createChannel();
  for (const q of queues) await ch.deleteQueue(q);
  for (const e of exchanges) await ch.deleteExchange(e);
  await ch.close();
}

export async function connectAdmin(): Promise<ChannelModel> {
  return amqp.connect(AMQP_URL, { clientProperties: { connection_name: 'twophase-bench-admin' } });
}
