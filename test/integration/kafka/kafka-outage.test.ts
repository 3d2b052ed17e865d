/**
 * S14 on Kafka: the claim store becomes unresponsive (CLIENT PAUSE) and then goes down (process
 * killed, restarted from its append-only file) while records keep arriving. The handler never
 * runs without a claim; the affected partitions pause and retry in place with backoff; the
 * process does not crash; consumption resumes when Redis is back, and every effect happens once.
 */
import type { Kafka } from 'kafkajs';
import { ack } from '../../../src';
import { clients, describeEachClient } from './support/clients';
import { RedisServerProcess, redisCli } from '../redis/support/redis-process';
import { EffectLog, fastSource, keyedProducer, makeKafka, messages, recordEvents, TestConsumer, TopicFixture, unique } from './support/kafka-helpers';
import { waitFor } from '../../support/wait';
import { RedisFixture } from './support/redis-fixture';

describeEachClient(['kafka', 'redis'], 'Kafka adapter: S14 claim store unavailable', clients, (row) => {
  let kafka: Kafka;
  const client = row.make(`twophase-outage-suite-${row.name}`);
  let topics: TopicFixture;
  let redis: RedisFixture;
  let server: RedisServerProcess;
  const consumers: TestConsumer[] = [];

  beforeAll(async () => {
    kafka = makeKafka('twophase-outage-suite');
    topics = new TopicFixture(kafka);
    redis = new RedisFixture();
    // Persistence on, so records survive the kill below (as a production Redis would keep them).
    server = await RedisServerProcess.start(['--appendonly', 'yes', '--appendfsync', 'always']);
  }, 30_000);

  afterAll(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.stop()));
    await redis.destroy();
    await server.destroy();
    await topics.destroy();
  });

  test('S14: CLIENT PAUSE, then Redis killed and restarted: partitions pause, nothing runs unclaimed, every effect once', async () => {
    const topic = await topics.create('s14', 2);
    const groupId = unique('s14-group');
    const claimer = await redis.claimer('s14', { operationTimeoutMs: 300 }, server.port);
    const log = new EffectLog();
    let runs = 0;
    const source = fastSource(client, { topics: [topic], groupId, unavailableBackoff: { maxDelayMs: 2000 } });
    const events = recordEvents(source);
    const consumer = new TestConsumer(
      { name: groupId, claimer, source, claimRetries: 1, claimBackoff: { initialDelayMs: 50, maxDelayMs: 50 }, unavailableRequeueDelayMs: 250, commitDeadlineMs: 15_000 },
      async (message, context) => {
        runs++;
        log.apply(message.key, Number(context.metadata.attributes?.partition), String(context.metadata.attributes?.offset), message.body.seq);
        return ack();
      },
    );
    consumers.push(consumer);
    await consumer.start();

    const { producer, close } = await keyedProducer(kafka);
    const produced = new Set<string>();
    let producing = true;
    const production = (async () => {
      for (let round = 0; producing; round++) {
        const batch = messages(`r${round}`, 10);
        await producer.send(topic, batch);
        for (const m of batch) produced.add(`${groupId}:${m.idempotencyKey}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();

    try {
      await waitFor(() => log.applied.size >= 50, { what: 'consuming before the faults' });

      // 1. Unresponsive: every command waits 3 s. Claims pass their 300 ms deadline.
      const failedBefore = consumer.count('claim_failed');
      await redisCli(server.port, 'CLIENT', 'PAUSE', '3000', 'ALL');
      await waitFor(() => consumer.count('claim_failed') > failedBefore && source.paused().length > 0, { what: 'claims failing and a partition paused', timeoutMs: 10_000 });
      const appliedAfterPause = log.applied.size;
      await waitFor(() => log.applied.size > appliedAfterPause + 20, { what: 'consumption resumed after CLIENT PAUSE', timeoutMs: 20_000 });

      // 2. Down: the process is killed and stays down for 4 s (the fault's duration, not a wait
      // on an outcome). Claims fail fast meanwhile; a commit in flight retries within its
      // deadline (commitDeadlineMs 15 s) and holds its partition until it lands.
      await server.stop();
      await new Promise((resolve) => setTimeout(resolve, 4000));
      await server.startAgain();
      const appliedAfterStop = log.applied.size;
      await waitFor(() => log.applied.size > appliedAfterStop + 20, { what: 'consumption resumed after the restart', timeoutMs: 30_000 });
    } finally {
      producing = false;
      await production;
      await close();
    }

    await waitFor(async () => [...produced].every((k) => log.applied.has(k)) && (await topics.fullyCommitted(groupId, topic)), { what: 'every produced key applied and committed', timeoutMs: 40_000, intervalMs: 100 });
    expect(log.duplicated()).toEqual([]);
    expect(log.applied.size).toBe(produced.size);
    // The handler ran only under an acquired claim.
    expect(runs).toBe(log.applied.size);
    expect(runs).toBeLessThanOrEqual(consumer.count('acquired'));
    expect(consumer.count('claim_failed')).toBeGreaterThan(0);
    expect(source.stats.requeuedInPlace).toBeGreaterThan(0);
    expect(events.some((e) => e.type === 'paused')).toBe(true);
    expect(events.filter((e) => e.type === 'crash')).toEqual([]);
    expect(consumer.health().live).toBe(true);
  }, 120_000);
});
