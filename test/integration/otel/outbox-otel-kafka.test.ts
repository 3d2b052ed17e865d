/**
 * twophase/otel and the transactional outbox on real PostgreSQL + Kafka: a message staged inside a
 * span is published by the relay (KafkaOutboxPublisher) under a PRODUCER `publish <topic>` span
 * linked to the staging span, the record's headers carry that span's context, and the downstream
 * twophase Kafka consumer's process span is its child.
 */
import { type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { ack, ConsumerBase, type Disposition, InMemoryClaimer, type Message, OutboxRelay, silentLogger } from '../../../src';
import { KafkaOutboxPublisher } from '../../../adapters/kafka';
import { createOtelObserver, createOutboxRelayTracer, injectTraceHeaders } from '../../../adapters/otel';
import { PostgresOutboxStore, stageOutbox } from '../../../adapters/postgres';
import { installOtel, type OtelHarness, spansNamed } from '../../unit/otel/otel-harness';
import { describeWithServices } from '../../support/services';
import { waitFor } from '../../support/wait';
import { fastSource, makeKafka, TopicFixture, unique } from '../kafka/support/kafka-helpers';
import { freshSchema, type SchemaFixture } from '../postgres/support/pg-helpers';

describeWithServices(['kafka', 'postgres'], 'OpenTelemetry through the transactional outbox (PostgreSQL + Kafka)', () => {
  const kafka = makeKafka('twophase-outbox-otel');
  let otel: OtelHarness;
  let topics: TopicFixture;
  let db: SchemaFixture;
  const stops: { stop(): Promise<void> }[] = [];

  beforeAll(() => {
    otel = installOtel();
  });
  afterAll(async () => {
    await otel.shutdown();
  });
  beforeEach(async () => {
    otel.exporter.reset();
    topics = new TopicFixture(kafka);
    db = await freshSchema('outbox_otel_kafka');
  });
  afterEach(async () => {
    for (const s of stops.splice(0)) await s.stop().catch(() => undefined);
    await topics.destroy().catch(() => undefined);
    await db.cleanup();
  });

  test('the publish span is linked to the staging span and sent in the record headers; the consumer process span is its child', async () => {
    const topic = await topics.create('outbox-otel', 1);
    const headersSeen: Record<string, string>[] = [];
    class Downstream extends ConsumerBase<unknown> {
      async handle(message: Message<unknown>): Promise<Disposition> {
        headersSeen.push(Object.fromEntries(Object.entries(message.headers).map(([k, v]) => [k, String(v)])));
        return ack();
      }
    }
    const groupId = unique('outbox-otel-down');
    const consumer = new Downstream({ name: groupId, claimer: new InMemoryClaimer(), source: fastSource(kafka, { topics: [topic], groupId }), logger: silentLogger, observers: [createOtelObserver({ metrics: false })] });
    stops.push(consumer);
    await consumer.start();

    const staging = await trace.getTracer('test').startActiveSpan('place-order', async (span: Span) => {
      try {
        const client = await db.pool.connect();
        try {
          await client.query('BEGIN');
          await stageOutbox(client, { to: { topic, key: 'order-1' }, body: { orderId: 'o-1' }, headers: injectTraceHeaders({ 'x-tenant': 't1' }) }, { schema: db.schema });
          await client.query('COMMIT');
        } finally {
          client.release();
        }
        return span;
      } finally {
        span.end();
      }
    });
    const [row] = (await db.pool.query<{ id: string }>(`SELECT id FROM ${db.schema}.twophase_outbox`)).rows;
    const relay = new OutboxRelay(
      { store: new PostgresOutboxStore({ pool: db.pool }, { schema: db.schema }), publisher: new KafkaOutboxPublisher({ kafka }), tracer: createOutboxRelayTracer(), logger: silentLogger },
      { pollIntervalMs: 50, statsIntervalMs: 0 },
    );
    stops.push(relay);
    await relay.start();

    const processSpan = await waitFor(() => spansNamed(otel.exporter, `process ${topic}`)[0], { what: 'the consumer process span', timeoutMs: 30_000 });
    const publish = await waitFor(() => spansNamed(otel.exporter, `publish ${topic}`)[0], { what: 'the publish span' });
    expect(spansNamed(otel.exporter, `publish ${topic}`)).toHaveLength(1);
    expect(publish.kind).toBe(SpanKind.PRODUCER);
    expect(publish.links.map((l) => l.context)).toEqual([expect.objectContaining({ traceId: staging.spanContext().traceId, spanId: staging.spanContext().spanId })]);
    expect(publish.attributes).toMatchObject({
      'messaging.system.name': 'kafka',
      'messaging.operation.name': 'publish',
      'messaging.operation.type': 'send',
      'messaging.destination.name': topic,
      'kafka.message.key': 'order-1',
      'messaging.message.id': row!.id,
      'twophase.attempt': 1,
    });
    expect(publish.status.code).not.toBe(SpanStatusCode.ERROR);

    expect(processSpan.kind).toBe(SpanKind.CONSUMER);
    expect(processSpan.spanContext().traceId).toBe(publish.spanContext().traceId);
    expect(processSpan.parentSpanContext?.spanId).toBe(publish.spanContext().spanId);

    // The record carries the publish span's context in place of the staged one; other headers as staged.
    const { traceId, spanId } = publish.spanContext();
    expect(headersSeen[0]).toMatchObject({ 'x-tenant': 't1', traceparent: `00-${traceId}-${spanId}-01`, 'idempotency-key': row!.id });
  });
});
