/**
 * The transactional inbox on real Kafka + PostgreSQL: duplicates across partitions and two
 * consumers in one group book each key exactly once through `ctx.transaction`; a handler that
 * fails after writing its effect leaves no trace of the failed attempts.
 */
import { ack } from '../../../src';
import { PostgresClaimer } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { fastSource, keyedProducer, makeKafka, messages, TopicFixture, unique } from '../kafka/support/kafka-helpers';
import { waitFor } from '../../support/wait';
import { InboxConsumer, type InboxFixture, inboxFixture, type InboxHandler, ledgerHandler, writeLedger } from './support/inbox-fixture';

describeWithServices(['kafka', 'postgres'], 'transactional inbox: Kafka + PostgreSQL', () => {
  const kafka = makeKafka('twophase-pg-inbox');
  const topics = new TopicFixture(kafka);
  let f: InboxFixture;
  const consumers: InboxConsumer[] = [];
  beforeEach(async () => {
    f = await inboxFixture('kafka');
  });
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.stop()));
    await f.cleanup();
  });
  afterAll(() => topics.destroy());

  function consumer(topic: string, groupId: string, handler: InboxHandler): InboxConsumer {
    const c = new InboxConsumer(
      {
        name: groupId,
        claimer: new PostgresClaimer({ pool: f.pool }, { schema: f.schema, mode: 'transactional' }),
        // claimBatchSize 1: each early claim opens a transaction (docs/postgres.md).
        source: fastSource(kafka, { topics: [topic], groupId, claimBatchSize: 1 }),
        concurrency: 6,
        leaseTtlMs: 10_000,
        busyRequeueDelayMs: 50,
        retryBackoff: { initialDelayMs: 50, maxDelayMs: 200, jitter: 0 },
      },
      handler,
    );
    consumers.push(c);
    return c;
  }

  test('duplicates across partitions, two consumers in one group: one ledger row per key', async () => {
    const topic = await topics.create('pg-inbox', 3);
    const groupId = unique('pg-inbox-group');
    const { producer, raw, close } = await keyedProducer(kafka);
    const batch = messages('pay', 40);
    await producer.send(topic, [...batch, ...batch]);
    // a third copy of each key on another partition, so copies are claimed concurrently
    await raw.send({ topic, messages: batch.map((m, i) => ({ value: m.value, partition: i % 3, headers: { 'idempotency-key': m.idempotencyKey } })) });
    await close();
    await consumer(topic, groupId, ledgerHandler(f.ledger)).start();
    await consumer(topic, groupId, ledgerHandler(f.ledger)).start();
    await waitFor(async () => (await f.counts()).size === 40 && (await topics.fullyCommitted(groupId, topic)), { what: 'every key booked and every offset committed', timeoutMs: 90_000 });
    expect([...(await f.counts()).values()].every((n) => n === 1)).toBe(true);
  }, 120_000);

  test('a handler that throws after writing its effect: the failed attempts leave nothing, the successful one books once', async () => {
    const topic = await topics.create('pg-inbox-retry', 1);
    const groupId = unique('pg-inbox-retry-group');
    const { producer, close } = await keyedProducer(kafka);
    await producer.send(topic, messages('retry', 5));
    await close();
    const runs = new Map<string, number>();
    await consumer(topic, groupId, async (m, ctx) => {
      await writeLedger(ctx.transaction, f.ledger, m.key);
      runs.set(m.key, (runs.get(m.key) ?? 0) + 1);
      if (ctx.attempt < 2) throw new Error('flaky');
      return ack();
    }).start();
    await waitFor(async () => (await f.counts()).size === 5 && (await topics.fullyCommitted(groupId, topic)), { what: 'all booked', timeoutMs: 60_000 });
    expect([...(await f.counts()).values()].every((n) => n === 1)).toBe(true);
    expect([...runs.values()].every((n) => n === 2)).toBe(true);
  }, 120_000);
});
