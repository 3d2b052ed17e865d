/**
 * twophase/otel and the transactional outbox on real PostgreSQL + RabbitMQ: a message staged
 * inside a span (its context put in the staged headers) is published by the relay under a
 * PRODUCER `publish <exchange>` span linked to the staging span, and the downstream twophase
 * consumer's process span is a child of that publish span. Without the relay tracer, the staged
 * context goes through unchanged; a failed publish ends its span with status ERROR.
 */
import { type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { createOtelObserver, createOutboxRelayTracer, injectTraceHeaders } from '../../../adapters/otel';
import { stageOutbox } from '../../../adapters/postgres';
import { ack, type OutboxMessage, type OutboxRelayEvent } from '../../../src';
import { describeWithServices } from '../../support/services';
import { waitFor } from '../../support/wait';
import { OutboxFixture } from '../postgres/support/outbox-fixture';
import { Harness } from '../rabbitmq/support/harness';
import { installOtel, type OtelHarness, spansNamed } from '../../unit/otel/otel-harness';

describeWithServices(['rabbitmq', 'postgres'], 'OpenTelemetry through the transactional outbox (PostgreSQL + RabbitMQ)', () => {
  let otel: OtelHarness;
  let f: OutboxFixture;
  let h: Harness;
  const tracer = () => trace.getTracer('test');

  beforeAll(() => {
    otel = installOtel();
  });
  afterAll(async () => {
    await otel.shutdown();
  });
  beforeEach(async () => {
    otel.exporter.reset();
    f = await OutboxFixture.create('outbox_otel');
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
    await f.cleanup();
  });

  /** Stages `message` in a committed transaction run inside a `place-order` span, its context in the staged headers. */
  function stageInSpan(message: Omit<OutboxMessage, 'headers'>): Promise<Span> {
    return tracer().startActiveSpan('place-order', async (span) => {
      try {
        await f.inTransaction((c) => stageOutbox(c, { ...message, headers: injectTraceHeaders({ 'x-tenant': 't1' }) }, { schema: f.schema }));
        return span;
      } finally {
        span.end();
      }
    });
  }

  /** Starts a downstream twophase consumer of routing key `otel` with the OpenTelemetry observer; `processSpan()` waits for its process span. */
  async function downstream(): Promise<{ processSpan: () => Promise<ReadableSpan> }> {
    const queue = h.queue('outbox-otel-down', [f.exchange]);
    const source = h.source({ queue, bindings: [{ exchange: f.exchange, routingKey: 'otel' }] });
    const consumer = h.consumer({ name: 'downstream', source, claimer: h.claimer('memory'), observers: [createOtelObserver({ metrics: false })] }, async () => ack());
    await consumer.start();
    return { processSpan: () => waitFor(() => spansNamed(otel.exporter, `process ${queue}`)[0], { what: 'the consumer process span' }) };
  }

  test('the publish span is linked to the staging span; the consumer process span is its child (same trace)', async () => {
    const consumer = await downstream();
    const staging = await stageInSpan({ to: { exchange: f.exchange, routingKey: 'otel' }, body: { orderId: 'o-1' } });
    const [row] = await f.rows();
    await f.relay({ tracer: createOutboxRelayTracer() }).start();
    const processSpan = await consumer.processSpan();

    // The publish span ends at the broker's confirm, which may come after the consumer's process span ended.
    await waitFor(() => spansNamed(otel.exporter, `publish ${f.exchange}`).length > 0, { what: 'the publish span' });
    const [publish, ...more] = spansNamed(otel.exporter, `publish ${f.exchange}`);
    expect(more).toHaveLength(0);
    expect(publish!.kind).toBe(SpanKind.PRODUCER);
    expect(publish!.links.map((l) => l.context)).toEqual([expect.objectContaining({ traceId: staging.spanContext().traceId, spanId: staging.spanContext().spanId })]);
    expect(publish!.attributes).toMatchObject({
      'messaging.system.name': 'rabbitmq',
      'messaging.operation.name': 'publish',
      'messaging.operation.type': 'send',
      'messaging.destination.name': f.exchange,
      'rabbitmq.destination.routing_key': 'otel',
      'messaging.message.id': row!.id,
      'twophase.attempt': 1,
    });
    expect(publish!.status.code).not.toBe(SpanStatusCode.ERROR);

    expect(processSpan.kind).toBe(SpanKind.CONSUMER);
    expect(processSpan.parentSpanContext?.spanId).toBe(publish!.spanContext().spanId);
    expect(processSpan.spanContext().traceId).toBe(publish!.spanContext().traceId);
  });

  test('the published headers carry the publish span context in place of the staged one; other headers as staged', async () => {
    await stageInSpan({ to: { exchange: f.exchange, routingKey: 'placed' }, body: 'b' });
    await f.relay({ tracer: createOutboxRelayTracer() }).start();
    const [m] = await waitFor(async () => {
      const got = await f.drain();
      return got.length > 0 ? got : undefined;
    }, { what: 'the relayed message' });
    const publish = await waitFor(() => spansNamed(otel.exporter, `publish ${f.exchange}`)[0], { what: 'the publish span' });
    const { traceId, spanId } = publish.spanContext();
    expect(m!.properties.headers).toEqual({ 'x-tenant': 't1', traceparent: `00-${traceId}-${spanId}-01`, 'idempotency-key': m!.properties.messageId });
  });

  test('without the relay tracer the staged context goes through unchanged: the process span is a child of the staging span', async () => {
    const consumer = await downstream();
    const staging = await stageInSpan({ to: { exchange: f.exchange, routingKey: 'otel' }, body: { orderId: 'o-2' } });
    await f.relay().start();
    const processSpan = await consumer.processSpan();
    expect(spansNamed(otel.exporter, `publish ${f.exchange}`)).toHaveLength(0);
    expect(processSpan.parentSpanContext?.spanId).toBe(staging.spanContext().spanId);
    expect(processSpan.spanContext().traceId).toBe(staging.spanContext().traceId);
  });

  test('a failed publish (unroutable) ends its span with status ERROR and error.type; the failure is still recorded', async () => {
    await stageInSpan({ to: { exchange: f.exchange, routingKey: 'nobody-bound' }, body: 'lost?' });
    const failed: OutboxRelayEvent[] = [];
    const relay = f.relay({ tracer: createOutboxRelayTracer(), observer: { onEvent: (e) => e.type === 'failed' && failed.push(e) } }, { retryBackoff: { initialDelayMs: 60_000, maxDelayMs: 60_000, multiplier: 1, jitter: 0 } });
    await relay.start();
    const publish = await waitFor(() => spansNamed(otel.exporter, `publish ${f.exchange}`)[0], { what: 'the failed publish span' });
    expect(publish.status.code).toBe(SpanStatusCode.ERROR);
    expect(publish.attributes['error.type']).toBe('UnroutableError');
    await waitFor(() => failed.length > 0, { what: 'the failure recorded' });
  });
});
