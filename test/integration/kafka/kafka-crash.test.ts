/**
 * A consumer process killed with SIGKILL in the middle of a batch (no LeaveGroup, no offset
 * commit, a handler holding a lease): after the broker evicts it, a new member resumes and every
 * effect happens exactly once.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import type { Kafka } from 'kafkajs';
import { ack } from '../../../src';
import { SERVICES } from '../../support/services';
import { clients, describeEachClient } from './support/clients';
import { fastSource, keyedProducer, makeKafka, messages, TestConsumer, TopicFixture, unique } from './support/kafka-helpers';
import { waitFor } from '../../support/wait';
import { RedisFixture } from './support/redis-fixture';
import { recordKey } from '../../../adapters/redis';
import { uniquePrefix } from '../redis/support/redis-helpers';

describeEachClient(['kafka', 'redis'], 'Kafka adapter: a consumer process killed mid-batch', clients, (row) => {
  let kafka: Kafka;
  let topics: TopicFixture;
  let redis: RedisFixture;
  let child: ChildProcess | undefined;
  const consumers: TestConsumer[] = [];

  beforeAll(async () => {
    kafka = makeKafka('twophase-crash-suite');
    topics = new TopicFixture(kafka);
    redis = new RedisFixture();
  });

  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await Promise.all(consumers.splice(0).map((c) => c.stop()));
    await topics.destroy();
    await redis.destroy();
  });

  test('SIGKILL mid-batch: the next member resumes from the committed offsets and applies every effect once', async () => {
    const topic = await topics.create('crash', 3);
    const groupId = unique('crash-group');
    const prefix = uniquePrefix('kafka-crash');
    const effects = `${prefix}:effects`;
    const perPartition = 100;
    const { producer, close } = await keyedProducer(kafka);
    for (const partition of [0, 1, 2]) await producer.send(topic, messages(`p${partition}`, perPartition).map((m) => ({ ...m, partition })));
    await close();
    const sink = await redis.client();

    const config = { topic, groupId, prefix, effects, slowKey: 'p0-50', leaseTtlMs: 3000, redisPort: SERVICES.redis.port, client: row.name };
    child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, 'support', 'crash-child.ts'), JSON.stringify(config)], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, TS_NODE_TRANSPILE_ONLY: 'true' },
    });
    const exited = new Promise<void>((resolve) => child!.once('exit', () => resolve()));
    const alive = () => {
      if (child!.exitCode !== null || child!.signalCode !== null) throw new Error('the child process exited on its own');
    };
    try {
      // Wait until everything before the hanging handler is applied (p0-0…p0-49, all of p1 and
      // p2) and the hanging handler holds its lease: the kill then interrupts no effect.
      await Promise.race([
        exited.then(alive),
        waitFor(async () => (await sink.get(`${effects}:slow-started`)) !== null && (await sink.hlen(effects)) === 2 * perPartition + 50, { what: 'the child mid-batch', timeoutMs: 40_000, intervalMs: 100 }),
      ]);
      // …and their claims are committed (the commit follows the effect).
      const applied = Object.keys(await sink.hgetall(effects));
      await waitFor(async () => (await sink.mget(applied.map((key) => recordKey(prefix, key)))).every((r) => r?.startsWith('D|')), { what: 'the applied claims committed', timeoutMs: 10_000, intervalMs: 50 });
      expect((await topics.committed(groupId, topic))[0]).toBe('-1');
    } finally {
      child.kill('SIGKILL');
      await exited;
    }

    const claimer = await redis.claimer('crash', { prefix });
    const consumer = new TestConsumer({ name: groupId, claimer, source: fastSource(row.make(`twophase-crash-suite-${row.name}`), { topics: [topic], groupId }), leaseTtlMs: 3000, busyRequeueDelayMs: 250 }, async (message) => {
      await sink.hincrby(effects, message.key, 1);
      return ack();
    });
    consumers.push(consumer);
    await consumer.start();
    await waitFor(async () => (await sink.hlen(effects)) === 3 * perPartition && topics.fullyCommitted(groupId, topic), { what: 'every key applied and committed', timeoutMs: 90_000, intervalMs: 100 });

    const counts = Object.values(await sink.hgetall(effects)).map(Number);
    expect(counts.filter((n) => n !== 1)).toEqual([]);
    // The records the killed process applied came again and were skipped on their claims; the
    // hanging one was taken over once its lease ended (the broker's eviction, after
    // sessionTimeout, outlasts the 3 s lease; under KIP-848 the broker's own session timeout,
    // 45 s by default, applies), as attempt 2, and applied once.
    expect(consumer.count('done_duplicate')).toBe(2 * perPartition + 50);
    const takeover = consumer.events.find((e) => e.type === 'acquired' && e.key === `${groupId}:p0-50`);
    expect(takeover?.attempt).toBe(2);
    await sink.del(effects, `${effects}:slow-started`, `${effects}:child-ready`);
  }, 180_000);
});
