/**
 * The RabbitMQ source with the Redis claimer, both real: duplicates, competing consumers, a
 * consumer process killed with SIGKILL, the broker closing connections (S01) and the broker's
 * consumer ack timeout (S05).
 */
import { fork } from 'node:child_process';
import { join } from 'node:path';
import { ack } from '../../../src';
import type { RabbitMqSourceEvents } from '../../../adapters/rabbitmq';
import { describeWithServices } from '../../support/services';
import { AMQP_URL } from './support/amqp';
import { closeConnectionsNamed, requireRabbitmqctl, withConsumerTimeout } from './support/broker-control';
import { applying, EffectLog, Harness } from './support/harness';
import { FreezableProxy } from './support/tcp-proxy';
import { gate, waitFor, work } from '../../support/wait';

describeWithServices(['rabbitmq', 'redis'], 'RabbitMQ + Redis claimer (real services)', () => {
  let h: Harness;
  let ctl = false;
  beforeAll(async () => {
    ctl = await requireRabbitmqctl();
  });
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  test('duplicates published with the same key give one effect', async () => {
    const queue = h.queue('r-dups');
    const effects = new EffectLog();
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('redis'), concurrency: 20 }, applying(effects));
    await consumer.start();
    for (let i = 0; i < 50; i++) {
      for (let c = 0; c < 3; c++) await h.admin.publish('', queue, { i }, { messageId: `m-${i}-${c}`, headers: { 'idempotency-key': `pay-${i}` } });
    }
    await waitFor(() => source.stats.acks === 150, { what: 'all deliveries acked' });
    expect(effects.keys).toBe(50);
    expect(effects.duplicated()).toEqual([]);
  });

  test('two consumers on one queue with injected duplicates → exactly one effect per key', async () => {
    const queue = h.queue('r-two');
    const effects = new EffectLog();
    const handler = async (m: { key: string }) => {
      await work(Math.floor(Math.random() * 20));
      effects.apply(m.key);
      return ack();
    };
    const s1 = h.source({ queue, connectionName: `${queue}.a` });
    const s2 = h.source({ queue, connectionName: `${queue}.b` });
    const c1 = h.consumer({ source: s1, claimer: h.claimer('redis'), concurrency: 20, deployment: { replicas: 2 } }, handler);
    const c2 = h.consumer({ source: s2, claimer: h.claimer('redis'), concurrency: 20, deployment: { replicas: 2 } }, handler);
    await c1.start();
    await c2.start();
    let published = 0;
    for (let i = 0; i < 300; i++) {
      const copies = 1 + (i % 3);
      for (let c = 0; c < copies; c++) {
        await h.admin.publish('', queue, { i }, { messageId: `k-${i}` });
        published++;
      }
    }
    await waitFor(() => s1.stats.acks + s2.stats.acks === published, { what: 'every copy acked', timeoutMs: 40_000 });
    expect(effects.keys).toBe(300);
    expect(effects.duplicated()).toEqual([]);
    expect(s1.stats.acks).toBeGreaterThan(0);
    expect(s2.stats.acks).toBeGreaterThan(0);
    expect(await h.admin.messageCount(`${queue}.dlq`)).toBe(0);
  });

  test('consumer process killed with SIGKILL mid-handler → redelivered, handled once after the lease expires', async () => {
    const queue = h.queue('r-crash');
    const redis = h.redis();
    const prefix = h.redisPrefix;
    // The child declares the topology; it runs the same code as this process.
    const child = fork(join(__dirname, 'fixtures', 'crash-child.ts'), [], {
      execArgv: ['-r', 'ts-node/register/transpile-only'],
      env: { ...process.env, QUEUE: queue, PREFIX: prefix, AMQP_URL, TS_NODE_PROJECT: join(__dirname, '..', '..', '..', 'tsconfig.json') },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
    let ready = false;
    child.once('message', () => {
      ready = true;
    });
    try {
      await waitFor(() => ready, { what: 'child ready', timeoutMs: 30_000 });
      await h.admin.publish('', queue, { pay: 1 }, { messageId: 'crash-1' });
      await waitFor(async () => Number(await redis.get(`${prefix}:started`)) === 1, { what: 'child handler started' });
    } finally {
      child.kill('SIGKILL');
    }
    expect(await exited).toBe('SIGKILL');
    const effects = new EffectLog();
    const source = h.source({ queue });
    const runs: { attempt: number; redelivered: boolean }[] = [];
    const consumer = h.consumer({ name: 'crash', source, claimer: h.claimer('redis'), leaseTtlMs: 1500 }, async (m, ctx) => {
      runs.push({ attempt: ctx.attempt, redelivered: m.metadata.redelivered });
      await redis.hincrby(`${prefix}:effects`, m.key, 1);
      effects.apply(m.key);
      return ack();
    });
    await consumer.start();
    await waitFor(() => effects.count('crash:crash-1') === 1, { what: 'redelivered message handled', timeoutMs: 20_000 });
    await waitFor(() => source.stats.acks === 1 && consumer.health().inFlight === 0, { what: 'acked' });
    // The child's lease (1.5 s) had to expire first: until then the claim was busy.
    expect(runs).toHaveLength(1);
    expect(runs[0]!.attempt).toBe(2);
    expect(await redis.hgetall(`${prefix}:effects`)).toEqual({ 'crash:crash-1': '1' });
    expect(await h.admin.messageCount(queue)).toBe(0);
    await redis.del(`${prefix}:started`, `${prefix}:effects`);
  });

  test('S01 with Redis: connection killed mid-handler → late ack skipped, redelivery acked as a done duplicate; effect once', async () => {
    if (!ctl) return;
    const queue = h.queue('r-s01');
    const connectionName = `${queue}.conn`;
    const effects = new EffectLog();
    const finish = gate();
    let runs = 0;
    const source = h.source({ queue, connectionName });
    const consumer = h.consumer({ source, claimer: h.claimer('redis'), concurrency: 1, leaseTtlMs: 2000 }, async (m) => {
      runs++;
      await finish.promise;
      effects.apply(m.key);
      return ack();
    });
    await consumer.start();
    await h.admin.publish('', queue, {}, { messageId: 'r-s01-1' });
    await waitFor(() => runs === 1, { what: 'handler started' });
    await closeConnectionsNamed(connectionName);
    await waitFor(() => source.stats.generation === 2 && source.isConsuming(), { what: 'generation 2 consuming' });
    finish.open();
    await waitFor(() => source.stats.acks === 1, { what: 'duplicate acked on generation 2' });
    expect(runs).toBe(1);
    expect(effects.count('test:r-s01-1')).toBe(1);
    expect(source.stats).toMatchObject({ staleSettlesSkipped: 1, channelsClosed: 1 });
  });

  test('S05: a handler outliving the broker ack timeout → A\'s channel closed, the message redelivered (to B or A\'s new channel) finds the lease busy; after the commit the copy is a duplicate; effect once', async () => {
    if (!ctl) return;
    const queue = h.queue('r-s05');
    await h.admin.ch(); // the admin connection opens outside the timeout window
    const effects = new EffectLog();
    const runs: string[] = [];
    const claimer = h.claimer('redis');
    const handler = (instance: string) => async (m: { key: string }) => {
      runs.push(instance);
      await work(7000); // longer than the 3 s ack timeout; keep-alive extends the 1.5 s lease
      effects.apply(m.key);
      return ack();
    };
    const closed: RabbitMqSourceEvents['channel_closed'][] = [];
    const { value: a, restore } = await withConsumerTimeout(3000, async () => {
      const source = h.source({ queue, connectionName: `${queue}.a` });
      source.on('channel_closed', (e) => closed.push(e));
      const consumer = h.consumer({ source, claimer, leaseTtlMs: 1500, busyRequeueDelayMs: 500, deployment: { replicas: 2 } }, handler('A'));
      await consumer.start();
      return { source, consumer };
    });
    try {
      await h.admin.publish('', queue, { long: true }, { messageId: 's05-1' });
      await waitFor(() => runs.length === 1, { what: 'A started the handler' });
      const bSource = h.source({ queue, connectionName: `${queue}.b` });
      const b = h.consumer({ source: bSource, claimer: h.claimer('redis'), leaseTtlMs: 1500, busyRequeueDelayMs: 500, deployment: { replicas: 2 } }, handler('B'));
      await b.start();
      await waitFor(() => closed.some((e) => /delivery acknowledgement on channel \d+ timed out/.test(String(e.error?.message))), { what: 'broker closed A\'s channel (ack timeout)', timeoutMs: 15_000 });
      await waitFor(() => a.source.stats.generation === 2 && a.source.isConsuming(), { what: 'A reconnected its channel' });
      await waitFor(() => a.source.stats.requeues.busy + bSource.stats.requeues.busy >= 1, { what: 'the redelivery found the lease busy', timeoutMs: 15_000 });
      await waitFor(() => effects.count('test:s05-1') === 1, { what: 'A committed', timeoutMs: 15_000 });
      await waitFor(() => a.source.stats.acks + bSource.stats.acks === 1, { what: 'a later copy acked as a duplicate', timeoutMs: 15_000 });
      expect(runs).toEqual(['A']);
      expect(a.source.stats.staleSettlesSkipped).toBe(1);
      expect(effects.count('test:s05-1')).toBe(1);
      await waitFor(async () => (await h.admin.messageCount(queue)) === 0, { what: 'queue empty' });
    } finally {
      await restore();
    }
  }, 60_000);

  test('S14: Redis unresponsive → no handler runs without a claim; deliveries are requeued through the delay path; when Redis answers again each key is applied once', async () => {
    const proxy = new FreezableProxy('127.0.0.1', Number(process.env.REDIS_PORT ?? 6379));
    const port = await proxy.listen();
    try {
      const queue = h.queue('r-s14');
      const effects = new EffectLog();
      let frozen = false;
      let runsWhileFrozen = 0;
      const source = h.source({ queue });
      const consumer = h.consumer(
        {
          source,
          claimer: h.claimer('redis', { port, operationTimeoutMs: 300 }),
          concurrency: 5,
          claimRetries: 1,
          claimBackoff: { initialDelayMs: 50, maxDelayMs: 50, jitter: 0 },
          unavailableRequeueDelayMs: 100,
        },
        async (m) => {
          if (frozen) runsWhileFrozen++;
          effects.apply(m.key);
          return ack();
        },
      );
      await consumer.start();
      proxy.freeze();
      frozen = true;
      for (let i = 0; i < 10; i++) await h.admin.publish('', queue, { i }, { messageId: `s14-${i}` });
      await waitFor(() => source.stats.requeues.claimer_unavailable >= 10, { what: 'every delivery requeued while Redis is unresponsive', timeoutMs: 20_000 });
      expect(effects.total).toBe(0);
      frozen = false;
      proxy.thaw();
      await waitFor(() => effects.keys === 10, { what: 'all keys applied after Redis answers again', timeoutMs: 20_000 });
      await waitFor(async () => consumer.health().inFlight === 0 && (await h.admin.messageCount(queue)) === 0, { what: 'drained' });
      expect(runsWhileFrozen).toBe(0);
      expect(effects.duplicated()).toEqual([]);
      expect(await h.admin.messageCount(`${queue}.dlq`)).toBe(0);
      expect(source.stats.requeues.retry).toBe(0);
    } finally {
      await h.cleanup();
      await proxy.close();
    }
  });
});
