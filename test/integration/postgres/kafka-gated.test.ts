/**
 * End to end on Kafka: two consumers in one group with a GatedClaimer (a RedisClaimer gate on the
 * shared Redis, a unique prefix; a transactional PostgresClaimer truth). Three copies of every key
 * across partitions book each key exactly once through `ctx.transaction`, and later copies are
 * answered by the gate.
 */
import type Redis from 'ioredis';
import { GatedClaimer } from '../../../adapters/gated';
import { PostgresClaimer } from '../../../adapters/postgres';
import { RedisClaimer } from '../../../adapters/redis';
import { describeWithServices } from '../../support/services';
import { fastSource, keyedProducer, makeKafka, messages, TopicFixture, unique} from '../kafka/support/kafka-helpers';
import { waitFor } from '../../support/wait';
import { connectRedis, silentLogger, uniquePrefix } from '../redis/support/redis-helpers';
import { InboxConsumer, type InboxFixture, inboxFixture, ledgerHandler } from './support/inbox-fixture';

describeWithServices(['kafka', 'postgres', 'redis'], 'GatedClaimer end to end: Kafka + Redis gate + PostgreSQL inbox', () => {
  const kafka = makeKafka('twophase-gated');
  const topics = new TopicFixture(kafka);
  let f: InboxFixture;
  let redis: Redis;
  const consumers: InboxConsumer[] = [];
  const gates: RedisClaimer[] = [];
  beforeEach(async () => {
    f = await inboxFixture('kgated');
    redis = await connectRedis();
  });
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.stop()));
    for (const g of gates.splice(0)) await g.close();
    redis.disconnect();
    await f.cleanup();
  });
  afterAll(() => topics.destroy());

  test('duplicates across partitions, two consumers in one group: one ledger row per key, the gate answers duplicates', async () => {
    const topic = await topics.create('gated', 3);
    const groupId = unique('gated-group');
    const prefix = uniquePrefix('kgated');
    const claimers: GatedClaimer[] = [];
    const start = async () => {
      const gate = new RedisClaimer({ redis, logger: silentLogger }, { prefix, operationTimeoutMs: 200 });
      gates.push(gate);
      const claimer = new GatedClaimer({ gate, truth: new PostgresClaimer({ pool: f.pool }, { schema: f.schema, mode: 'transactional' }), logger: silentLogger });
      claimers.push(claimer);
      const c = new InboxConsumer(
        // claimBatchSize 1: each early claim may open a transaction (docs/postgres.md, docs/gated.md).
        { name: groupId, claimer, source: fastSource(kafka, { topics: [topic], groupId, claimBatchSize: 1 }), concurrency: 6, leaseTtlMs: 10_000, busyRequeueDelayMs: 50 },
        ledgerHandler(f.ledger),
      );
      consumers.push(c);
      await c.start();
    };
    const { producer, raw, close } = await keyedProducer(kafka);
    const batch = messages('gpay', 40);
    await producer.send(topic, [...batch, ...batch]);
    await raw.send({ topic, messages: batch.map((m, i) => ({ value: m.value, partition: i % 3, headers: { 'idempotency-key': m.idempotencyKey } })) });
    await close();
    await start();
    await start();
    await waitFor(async () => (await f.counts()).size === 40 && (await topics.fullyCommitted(groupId, topic)), { what: 'every key booked and every offset committed', timeoutMs: 90_000 });
    expect([...(await f.counts()).values()].every((n) => n === 1)).toBe(true);
    expect(claimers.reduce((n, c) => n + c.stats.gateAnswers, 0)).toBeGreaterThan(0);
  }, 120_000);
});
