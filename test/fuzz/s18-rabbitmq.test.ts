/**
 * S18 (../shared/cases/failure-scenarios.md): lease TTL shorter than the handler, on the real
 * RabbitMQ (127.0.0.1:5672) with two consumers, each with its own RabbitMqSource, and both the
 * Redis claimer (one client per consumer, as two processes would have) and InMemoryClaimer (one
 * shared instance, both consumers in this process). Lease TTL 1 s, handler 3 s, the same
 * message id published again at t = 1.5 s.
 *
 * - keep-alive on (default): the duplicate finds the claim held, is requeued as busy until the
 *   first run commits, then acked as a done duplicate; one effect, no lease lost.
 * - keep-alive off (test hook): the duplicate takes the expired lease and runs concurrently; the
 *   first run's commit is fenced (`lease_lost`), the second commits; two effects.
 */
import Redis from 'ioredis';
import { RabbitMqSource } from '../../adapters/rabbitmq';
import { RedisClaimer } from '../../adapters/redis';
import { type Claimer, type ConsumerEvent, InMemoryClaimer, silentLogger } from '../../src';
import { sleep } from '../../src/adapter-kit';
import { type Run, SlowConsumer } from './support/slow-consumer';
import { describeWithServices, SERVICES } from '../support/services';
import amqp from 'amqplib';
import { waitFor } from '../support/wait';

const AMQP_URL = process.env.TWOPHASE_AMQP_URL ?? `amqp://guest:guest@${SERVICES.rabbitmq.host}:${SERVICES.rabbitmq.port}`;
const DELAY_TIERS_MS = [250, 500, 1000];

type ClaimerKind = 'redis' | 'memory';

async function scenario(kind: ClaimerKind, keepAlive: boolean) {
  const queue = `tp-test.s18.${kind}.${keepAlive ? 'ka' : 'noka'}.${Date.now().toString(36)}`;
  const prefix = `tp-test-s18-${Date.now().toString(36)}`;
  const clients: Redis[] = [];
  const shared = new InMemoryClaimer();
  const claimerFor = (): Claimer => {
    if (kind === 'memory') return shared;
    const client = new Redis({ host: SERVICES.redis.host, port: SERVICES.redis.port, maxRetriesPerRequest: 1 });
    clients.push(client);
    return new RedisClaimer({ redis: client, logger: silentLogger }, { prefix });
  };
  const runs: Run[] = [];
  const events: { consumer: number; type: ConsumerEvent['type']; fencingToken?: number; at: number }[] = [];
  const consumers = [1, 2].map(
    (n) =>
      new SlowConsumer(
        {
          name: 'S18',
          claimer: claimerFor(),
          source: new RabbitMqSource({ url: AMQP_URL, queue, delayTiersMs: DELAY_TIERS_MS, connectionName: `twophase-s18-${n}`, logger: silentLogger }),
          concurrency: 1,
          leaseTtlMs: 1000,
          busyRequeueDelayMs: 500,
          keepAlive,
          deployment: { replicas: kind === 'memory' ? 1 : 2 },
          logger: silentLogger,
          observers: [{ onEvent: (e) => events.push({ consumer: n, type: e.type, fencingToken: e.fencingToken, at: Date.now() }) }],
        },
        n,
        runs,
      ),
  );
  const connection = await amqp.connect(AMQP_URL);
  const channel = await connection.createConfirmChannel();
  const publish = () =>
    new Promise<void>((resolve, reject) => channel.sendToQueue(queue, Buffer.from('{}'), { messageId: `M-${queue}`, persistent: true }, (err) => (err ? reject(err) : resolve())));
  const count = (t: ConsumerEvent['type']) => events.filter((e) => e.type === t).length;
  try {
    for (const c of consumers) await c.start();
    const t0 = Date.now();
    await publish();
    await sleep(1500 - (Date.now() - t0));
    await publish();
    if (keepAlive) await waitFor(() => count('done_duplicate') === 1, { timeoutMs: 15_000, what: 'the duplicate to be acked as done' });
    else await waitFor(() => count('committed') + count('lease_lost') === 2, { timeoutMs: 15_000, what: 'both runs to settle' });
    return { runs, events, t0 };
  } finally {
    await Promise.all(consumers.map((c) => c.stop()));
    for (const q of [queue, `${queue}.dlq`, ...DELAY_TIERS_MS.map((t) => `${queue}.delay.${t}ms`)]) await channel.deleteQueue(q).catch(() => undefined);
    await channel.deleteExchange(`${queue}.dlx`).catch(() => undefined);
    await connection.close().catch(() => undefined);
    for (const c of clients) {
      const keys = await c.keys(`${prefix}:*`);
      if (keys.length > 0) await c.unlink(...keys);
      await c.quit();
    }
  }
}

describeWithServices(['rabbitmq', 'redis'], 'S18: lease TTL 1 s shorter than a 3 s handler, duplicate at 1.5 s (RabbitMQ, 2 consumers)', () => {
  for (const kind of ['redis', 'memory'] as const) {
    test(`S18 ${kind} claimer, keep-alive on: the duplicate is busy, requeued, then acked as a done duplicate; one effect`, async () => {
      const { runs, events, t0 } = await scenario(kind, true);
      const of = (t: ConsumerEvent['type']) => events.filter((e) => e.type === t);
      expect(runs).toHaveLength(1);
      expect(of('lease_extended').length).toBeGreaterThanOrEqual(4);
      expect(of('busy').length).toBeGreaterThanOrEqual(1);
      expect(of('busy').every((e) => e.at - t0 >= 1400 && e.consumer !== runs[0]!.consumer)).toBe(true);
      expect(of('committed')).toHaveLength(1);
      expect(of('done_duplicate')[0]!.at).toBeGreaterThanOrEqual(of('committed')[0]!.at);
      expect(of('lease_lost')).toHaveLength(0);
    }, 30_000);

    test(`S18 ${kind} claimer, keep-alive off (test hook): the duplicate runs concurrently and the first commit is fenced; two effects`, async () => {
      const { runs, events, t0 } = await scenario(kind, false);
      expect(runs).toHaveLength(2);
      const [first, second] = runs as [Run, Run];
      expect(second.consumer).not.toBe(first.consumer);
      expect(second.startedAt - t0).toBeGreaterThanOrEqual(1400);
      expect(second.startedAt).toBeLessThan(first.endedAt!);
      expect(second.fencingToken).toBeGreaterThan(first.fencingToken);
      expect(events.filter((e) => e.type === 'lease_lost')).toEqual([expect.objectContaining({ consumer: first.consumer, fencingToken: first.fencingToken })]);
      expect(events.filter((e) => e.type === 'committed')).toEqual([expect.objectContaining({ consumer: second.consumer, fencingToken: second.fencingToken })]);
    }, 30_000);
  }
});
