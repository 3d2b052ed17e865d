/**
 * The outbox relay to real Kafka: records carry the outbox id in the `idempotency-key` header,
 * the record key, value and headers as staged, in staging order per ordering key, with the
 * publisher on each client of the clients table; a downstream twophase Kafka consumer applies a
 * record produced twice once.
 */
import { ack, InMemoryClaimer, OutboxRelay } from '../../../src';
import { PostgresOutboxStore, stageOutbox, transactionOutbox } from '../../../adapters/postgres';
import { KafkaOutboxPublisher } from '../../../adapters/kafka';
import { describeWithServices } from '../../support/services';
import { waitFor } from '../../support/wait';
import { fastSource, makeKafka, TestConsumer, TopicFixture, unique } from '../kafka/support/kafka-helpers';
import { clients, describeEachClient } from '../kafka/support/clients';
import { freshSchema, type SchemaFixture } from './support/pg-helpers';

describeWithServices(['kafka', 'postgres'], 'transactional outbox: PostgreSQL + Kafka', () => {
  const kafka = makeKafka('twophase-outbox-test');
  let topics: TopicFixture;
  let db: SchemaFixture;
  const stops: { stop(): Promise<void> }[] = [];
  beforeEach(async () => {
    topics = new TopicFixture(kafka);
    db = await freshSchema('outbox_kafka');
  });
  afterEach(async () => {
    for (const s of stops.splice(0)) await s.stop().catch(() => undefined);
    await topics.destroy().catch(() => undefined);
    await db.cleanup();
  });

  test('a downstream twophase Kafka consumer applies a record produced twice once', async () => {
    const topic = await topics.create('outbox-dup', 1);
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      await stageOutbox(client, { to: { topic, key: 'k' }, body: JSON.stringify({ id: 'x' }) }, { schema: db.schema });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const store = new PostgresOutboxStore({ pool: db.pool }, { schema: db.schema });
    const claim = await store.claim({ owner: 'test', limit: 1, leaseMs: 5000, systems: ['kafka'], deadKeyPolicy: 'hold' });
    const publisher = new KafkaOutboxPublisher({ kafka });
    await publisher.start();
    try {
      await publisher.publish(claim.records[0]!);
      await publisher.publish(claim.records[0]!);
    } finally {
      await publisher.close();
    }
    const applied: string[] = [];
    const groupId = unique('outbox-down');
    const consumer = new TestConsumer(
      { name: groupId, claimer: new InMemoryClaimer(), source: fastSource(kafka, { topics: [topic], groupId }) },
      async (m) => {
        applied.push(m.key);
        return ack();
      },
    );
    stops.push(consumer);
    await consumer.start();
    await waitFor(() => consumer.count('committed') === 1 && consumer.count('done_duplicate') === 1, { what: 'one applied, one duplicate', timeoutMs: 30_000 });
    expect(applied).toHaveLength(1);
    expect(applied[0]).toContain(claim.records[0]!.id);
  });
});

// The publisher built from each client of the clients table (`{ client }`): kafkajs through the
// client port, @platformatic/kafka classic and KIP-848 (the group protocol does not touch a
// producer; the row is kept so every row of the table runs here).
describeEachClient(['kafka', 'postgres'], 'transactional outbox: PostgreSQL + Kafka, KafkaOutboxPublisher({ client })', clients, (row) => {
  const kafka = makeKafka('twophase-outbox-test');
  let topics: TopicFixture;
  let db: SchemaFixture;
  const stops: { stop(): Promise<void> }[] = [];
  beforeEach(async () => {
    topics = new TopicFixture(kafka);
    db = await freshSchema('outbox_kafka');
  });
  afterEach(async () => {
    for (const s of stops.splice(0)) await s.stop().catch(() => undefined);
    await topics.destroy().catch(() => undefined);
    await db.cleanup();
  });

  function relay(publisher: KafkaOutboxPublisher): OutboxRelay {
    const r = new OutboxRelay({ store: new PostgresOutboxStore({ pool: db.pool }, { schema: db.schema }), publisher }, { pollIntervalMs: 50, statsIntervalMs: 0 });
    stops.push(r);
    return r;
  }

  test('records carry the outbox id as idempotency-key, key, value and headers as staged, in staging order per key (publisher on the client)', async () => {
    const topic = await topics.create('outbox', 3);
    const client = await db.pool.connect();
    let ids: string[];
    try {
      await client.query('BEGIN');
      const outbox = transactionOutbox(client, { schema: db.schema });
      for (let n = 0; n < 6; n++) {
        await outbox.stage({ to: { topic, key: n % 2 === 0 ? 'even' : 'odd' }, body: Buffer.from([n, 0xff]), headers: { 'x-n': String(n) } });
      }
      await client.query('COMMIT');
      ids = [...outbox.stagedIds];
    } finally {
      client.release();
    }
    await relay(new KafkaOutboxPublisher({ client: row.make('twophase-outbox-relay') })).start();
    const seen: { key: string; n: number; id: string; headers: Record<string, string> }[] = [];
    const reader = kafka.consumer({ groupId: unique('outbox-reader'), maxWaitTimeInMs: 100 });
    await reader.connect();
    await reader.subscribe({ topic, fromBeginning: true });
    await reader.run({
      eachMessage: async ({ message }) => {
        const headers = Object.fromEntries(Object.entries(message.headers ?? {}).map(([k, v]) => [k, String(v)]));
        seen.push({ key: String(message.key), n: message.value![0]!, id: headers['idempotency-key']!, headers });
        expect(message.value!.equals(Buffer.from([message.value![0]!, 0xff]))).toBe(true);
      },
    });
    try {
      await waitFor(() => seen.length === 6, { what: 'six records', timeoutMs: 30_000 });
    } finally {
      await reader.disconnect();
    }
    expect(seen.filter((s) => s.key === 'even').map((s) => s.n)).toEqual([0, 2, 4]);
    expect(seen.filter((s) => s.key === 'odd').map((s) => s.n)).toEqual([1, 3, 5]);
    expect(seen.map((s) => s.id).sort()).toEqual([...ids].sort());
    for (const s of seen) expect(s.headers).toEqual({ 'x-n': String(s.n), 'idempotency-key': ids[s.n] });
    await waitFor(async () => (await db.pool.query(`SELECT 1 FROM ${db.schema}.twophase_outbox`)).rowCount === 0, { what: 'rows removed' });
  });
});
