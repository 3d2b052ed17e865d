/**
 * createOutboxRelayTracer without a broker: what the publish span and the published headers look
 * like, the default exchange, a staged `tracestate` replaced with the `traceparent`, option
 * validation, the relay's check of its `tracer`, and headers left as staged without an SDK.
 */
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { createOutboxRelayTracer } from '../../../adapters/otel';
import { ConfigurationError, OutboxRelay, type OutboxPublisher, type OutboxRecord, type OutboxStore } from '../../../src';
import { installOtel, onlySpan, type OtelHarness } from './otel-harness';

const STAGED = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

function record(overrides: Partial<OutboxRecord> = {}): OutboxRecord {
  return {
    id: '7d7c1b7e-2b8f-4c39-9d4c-4e0f3f7a1a11',
    system: 'rabbitmq',
    destination: { exchange: 'orders', routingKey: 'placed' },
    body: Buffer.from('{}'),
    headers: { traceparent: STAGED, tracestate: 'vendor=staged', 'x-tenant': 't1' },
    properties: {},
    orderingKey: null,
    sequence: '1',
    attempts: 0,
    createdAt: new Date(),
    ...overrides,
  };
}

describe('createOutboxRelayTracer without an OpenTelemetry SDK', () => {
  test('the publish gets the record as staged, headers untouched', async () => {
    const sent: OutboxRecord[] = [];
    const r = record();
    await createOutboxRelayTracer().tracePublish(r, async (x) => void sent.push(x));
    expect(sent).toEqual([r]);
  });
});

describe('createOutboxRelayTracer', () => {
  let otel: OtelHarness;
  beforeAll(() => {
    otel = installOtel();
  });
  afterAll(async () => {
    await otel.shutdown();
  });
  beforeEach(() => otel.exporter.reset());

  test('a PRODUCER span linked to the staged context; the published headers carry the span context, no staged tracestate', async () => {
    const sent: OutboxRecord[] = [];
    await createOutboxRelayTracer().tracePublish(record(), async (x) => void sent.push(x));
    const span = onlySpan(otel.exporter, 'publish orders');
    expect(span.kind).toBe(SpanKind.PRODUCER);
    expect(span.links.map((l) => [l.context.traceId, l.context.spanId])).toEqual([['0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331']]);
    const { traceId, spanId } = span.spanContext();
    expect(traceId).not.toBe('0af7651916cd43dd8448eb211c80319c');
    expect(sent[0]!.headers).toEqual({ 'x-tenant': 't1', traceparent: `00-${traceId}-${spanId}-01` });
  });

  test('Kafka attributes; the default exchange names the span `publish`; no link without a staged context', async () => {
    await createOutboxRelayTracer().tracePublish(record({ system: 'kafka', destination: { topic: 'orders-t', key: 'k-1', partition: 3 }, headers: {} }), async () => undefined);
    expect(onlySpan(otel.exporter, 'publish orders-t').attributes).toMatchObject({ 'messaging.system.name': 'kafka', 'messaging.destination.name': 'orders-t', 'messaging.destination.partition.id': '3', 'kafka.message.key': 'k-1' });
    await createOutboxRelayTracer().tracePublish(record({ destination: { exchange: '', routingKey: 'q' }, headers: {} }), async () => undefined);
    expect(onlySpan(otel.exporter, 'publish').links).toEqual([]);
  });

  test('a failed publish: the error is rethrown, the span has status ERROR, error.type and an exception event', async () => {
    class BrokerRefused extends Error {
      override name = 'BrokerRefused';
    }
    await expect(createOutboxRelayTracer().tracePublish(record(), () => Promise.reject(new BrokerRefused('nack')))).rejects.toThrow(BrokerRefused);
    const span = onlySpan(otel.exporter, 'publish orders');
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'nack' });
    expect(span.attributes['error.type']).toBe('BrokerRefused');
    expect(span.events.map((e) => e.name)).toEqual(['exception']);
  });

  test('a misspelled option or a wrong-shaped provider is a ConfigurationError; so is a relay tracer without tracePublish', () => {
    expect(() => createOutboxRelayTracer({ tracerProvder: {} } as never)).toThrow(ConfigurationError);
    expect(() => createOutboxRelayTracer({ tracerProvider: {} as never })).toThrow(/getTracer/);
    const store = { claim: jest.fn() } as unknown as OutboxStore;
    const publisher: OutboxPublisher = { system: 'rabbitmq', publish: async () => undefined };
    expect(() => new OutboxRelay({ store, publisher, tracer: {} as never })).toThrow(/tracePublish/);
  });
});
