/**
 * The demo on real services: RabbitMQ (amqplib, via twophase/rabbitmq) or Kafka (kafkajs, via
 * twophase/kafka, in ./kafka.ts), and/or Redis (ioredis, via twophase/redis). Each RabbitMQ worker
 * gets its own connection, so "crashing" a worker destroys its socket and the broker redelivers
 * its unacked messages.
 *
 * TWOPHASE_AMQP_URL (default amqp://guest:guest@127.0.0.1:5672), TWOPHASE_REDIS_URL (default
 * redis://127.0.0.1:6379) and TWOPHASE_KAFKA_BROKERS (default 127.0.0.1:9092) point elsewhere
 * (../../shared/env.ts).
 */
import { randomUUID } from 'node:crypto';
import amqplib from 'amqplib';
import { Redis } from 'ioredis';
import { InMemoryClaimer, MemoryBroker, MemorySource } from '../../../adapters/memory';
import { delayQueueName, HEADERS, RabbitMqPublisher, RabbitMqSource } from '../../../adapters/rabbitmq';
import { RedisClaimer } from '../../../adapters/redis';
import { type Claimer, silentLogger } from '../../../src';
import { databaseUrl, serviceSettings } from '../../shared/env';
import type { CrashableSource, DemoMessage, DemoStack } from '../stack';
import { kafkaStack } from './kafka';
import { type InboxStore, postgresInbox } from './postgres';

export type ClaimerKind = 'memory' | 'redis' | 'postgres';

/** The label of each claimer kind in the report. */
const CLAIMER_LABEL: Readonly<Record<ClaimerKind, string>> = {
  memory: 'InMemoryClaimer',
  redis: 'RedisClaimer (Redis)',
  postgres: 'PostgresClaimer (transactional inbox)',
};

/**
 * @param connectionsPerWorker the PostgreSQL pool size of each worker (inbox only)
 */
export async function realStack(broker: 'memory' | 'rabbitmq' | 'kafka', claimerKind: ClaimerKind, connectionsPerWorker = 20): Promise<DemoStack> {
  const { amqpUrl: AMQP_URL, redisUrl: REDIS_URL, kafkaBrokers } = serviceSettings();
  const run = randomUUID().slice(0, 8);
  let redis: Redis | undefined;
  let claimer: Claimer | undefined;
  let store: InboxStore | undefined;
  if (claimerKind === 'postgres') {
    store = await postgresInbox(run, databaseUrl(), connectionsPerWorker);
  } else if (claimerKind === 'redis') {
    // The claimer's client: no offline queue, bounded retries per command (see docs/redis.md).
    redis = new Redis(REDIS_URL, { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: true });
    const redisClaimer = new RedisClaimer({ redis, logger: silentLogger }, { prefix: `twophase-demo-${run}` });
    await redisClaimer.ready();
    claimer = redisClaimer;
  } else {
    claimer = new InMemoryClaimer();
  }
  const replicas = claimerKind === 'memory' ? 1 : 4;
  const brokerLabel = { memory: 'in-process broker', rabbitmq: 'RabbitMQ', kafka: 'Kafka' }[broker];
  const label = `${brokerLabel} + ${CLAIMER_LABEL[claimerKind]}`;
  const inbox = store;
  const closeClaimer = async () => {
    await store?.close();
    if (redis) {
      // Leave nothing behind: the demo's keys live under their own prefix.
      const keys = await redis.keys(`twophase-demo-${run}:*`);
      for (let i = 0; i < keys.length; i += 500) await redis.del(...keys.slice(i, i + 500));
      redis.disconnect();
    }
  };

  if (broker === 'kafka') return kafkaStack({ run, brokers: kafkaBrokers, claimer, ...(inbox ? { inbox } : {}), replicas, label, closeClaimer });

  if (broker === 'memory') {
    const memory = new MemoryBroker();
    const queue = 'demo.payments';
    return {
      label,
      claimer,
      ...(inbox ? { inbox } : {}),
      replicas,
      makeSource: () => new MemorySource({ broker: memory, queue }),
      publish: async (messages) => {
        for (const m of messages) memory.publish(queue, { body: m.body, headers: m.key === undefined ? {} : { 'idempotency-key': m.key } });
      },
      waiting: async () => memory.depth(queue) + memory.pending(queue),
      deadLetters: async () => memory.deadLetters(queue).map((d) => ({ key: d.message.headers['idempotency-key'] as string | undefined, reason: String(d.reason.reason) })),
      close: async () => {
        memory.close();
        await closeClaimer();
      },
    };
  }

  const queue = `twophase-demo-${run}`;
  const sourceOptions = { url: AMQP_URL, queue, delayTiersMs: [100, 500, 2000], logger: silentLogger, heartbeatSeconds: 5 };
  // Declare the topology once before the workers start.
  const first = new RabbitMqSource(sourceOptions);
  const publisher = new RabbitMqPublisher({ url: AMQP_URL, logger: silentLogger });
  await publisher.connect();
  const inspector = await amqplib.connect(AMQP_URL);
  const inspect = await inspector.createChannel();
  inspect.on('error', () => undefined);
  return {
    label,
    claimer,
    ...(inbox ? { inbox } : {}),
    replicas,
    makeSource: (worker: number): CrashableSource => {
      const source = worker === 1 ? first : new RabbitMqSource({ ...sourceOptions, connectionName: `twophase-demo-${run}-${worker}` });
      return Object.assign(source, { crash: () => source.destroy() });
    },
    publish: async (messages: readonly DemoMessage[]) => {
      const keyless = messages.filter((m) => m.key === undefined);
      const keyed = messages.filter((m) => m.key !== undefined);
      for (let i = 0; i < keyed.length; i += 500) {
        await Promise.all(keyed.slice(i, i + 500).map((m) => publisher.sendToQueue(queue, m.body, { idempotencyKey: m.key, messageId: `${m.key}-${randomUUID().slice(0, 8)}` })));
      }
      if (keyless.length > 0) {
        // The publisher helper always sets a message id; a message with no key at all needs a raw publish.
        const connection = await amqplib.connect(AMQP_URL);
        const channel = await connection.createConfirmChannel();
        for (const m of keyless) channel.sendToQueue(queue, m.body, { persistent: true });
        await channel.waitForConfirms();
        await connection.close();
      }
    },
    waiting: async () => {
      let n = 0;
      for (const q of [queue, ...sourceOptions.delayTiersMs.map((ms) => delayQueueName(queue, ms))]) n += (await inspect.checkQueue(q)).messageCount;
      return n;
    },
    deadLetters: async () => {
      const connection = await amqplib.connect(AMQP_URL);
      const channel = await connection.createChannel();
      const out: { key: string | undefined; reason: string }[] = [];
      for (;;) {
        const msg = await channel.get(`${queue}.dlq`, { noAck: true });
        if (!msg) break;
        const headers = msg.properties.headers ?? {};
        out.push({ key: headers['idempotency-key'] as string | undefined, reason: String(headers[HEADERS.reason]) });
      }
      await channel.deleteQueue(`${queue}.dlq`).catch(() => undefined);
      await connection.close();
      return out;
    },
    close: async () => {
      await publisher.close();
      await inspector.close().catch(() => undefined);
      const connection = await amqplib.connect(AMQP_URL);
      const channel = await connection.createChannel();
      for (const q of [queue, `${queue}.dlq`, ...sourceOptions.delayTiersMs.map((ms) => delayQueueName(queue, ms))]) await channel.deleteQueue(q).catch(() => undefined);
      await channel.deleteExchange(`${queue}.dlx`).catch(() => undefined);
      await connection.close().catch(() => undefined);
      await closeClaimer();
    },
  };
}
