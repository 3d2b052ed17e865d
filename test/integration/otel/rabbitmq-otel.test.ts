/**
 * twophase/otel against the real RabbitMQ (127.0.0.1:5672) with the RabbitMQ adapter: trace
 * context through AMQP headers from a traced publish to the process span, duplicates, dead
 * letters and the metrics of a run. S25(a) and (c) on the real broker.
 */
import { context, propagation, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { RabbitMqPublisher } from '../../../adapters/rabbitmq';
import { createOtelObserver, injectTraceHeaders } from '../../../adapters/otel';
import { ack, type Disposition, type JsonValue, type Message, PermanentError } from '../../../src';
import { describeWithServices } from '../../support/services';
import { AMQP_URL, Harness } from '../rabbitmq/support/harness';
import { childrenOf, counterBy, histogramCountBy, installOtel, onlySpan, type OtelHarness, RecordingObserver, spansNamed } from '../../unit/otel/otel-harness';

describeWithServices(['rabbitmq'], 'OpenTelemetry on the real RabbitMQ', () => {
  let otel: OtelHarness;
  let h: Harness;
  let publisher: RabbitMqPublisher;
  const tracer = () => trace.getTracer('test');

  beforeAll(async () => {
    otel = installOtel();
    // The publisher helper injects the active trace context and baggage into every message.
    publisher = new RabbitMqPublisher({ url: AMQP_URL, connectionName: 'twophase-test:otel-publisher', injectContext: injectTraceHeaders });
    await publisher.connect();
  });
  afterAll(async () => {
    await publisher.close();
    await otel.shutdown();
  });
  beforeEach(() => {
    h = new Harness();
    otel.exporter.reset();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  /** Publishes through the adapter's publisher inside a PRODUCER span carrying baggage `tenant=acme`. */
  async function tracedPublish(queue: string, key: string, body: JsonValue = {}): Promise<Span> {
    const withBaggage = propagation.setBaggage(context.active(), propagation.createBaggage({ tenant: { value: 'acme' } }));
    return context.with(withBaggage, () =>
      tracer().startActiveSpan(`send ${queue}`, { kind: SpanKind.PRODUCER }, async (span) => {
        try {
          await publisher.sendToQueue(queue, body, { idempotencyKey: key });
          return span;
        } finally {
          span.end();
        }
      }),
    );
  }

  async function start(queue: string, name: string, handler: (m: Message<Record<string, unknown>>) => Promise<Disposition>) {
    const recorder = new RecordingObserver();
    const consumer = h.consumer(
      {
        name,
        source: h.source({ queue }),
        claimer: h.claimer('memory'),
        observers: [createOtelObserver({ meterProvider: otel.meterProvider }), recorder],
      },
      (message) =>
        tracer().startActiveSpan('handler-work', async (span) => {
          try {
            return await handler(message);
          } finally {
            span.end();
          }
        }),
    );
    await consumer.start();
    return { consumer, recorder };
  }

  test('S25(a): a traced publish then consume gives a process span whose parent is the publisher span; baggage reaches the handler', async () => {
    const queue = h.queue('otel-parent');
    const baggage: (string | undefined)[] = [];
    const { recorder } = await start(queue, 'otel-parent', async () => {
      baggage.push(propagation.getBaggage(context.active())?.getEntry('tenant')?.value);
      return ack();
    });
    const producer = await tracedPublish(queue, 'k1');
    await recorder.waitForResults(1);

    const processSpan = onlySpan(otel.exporter, `process ${queue}`);
    expect(processSpan.kind).toBe(SpanKind.CONSUMER);
    expect(processSpan.spanContext().traceId).toBe(producer.spanContext().traceId);
    expect(processSpan.parentSpanContext?.spanId).toBe(producer.spanContext().spanId);
    expect(processSpan.attributes).toMatchObject({
      'messaging.system.name': 'rabbitmq',
      'messaging.operation.name': 'process',
      'messaging.operation.type': 'process',
      'messaging.destination.name': queue,
      'messaging.message.id': 'k1',
      'rabbitmq.destination.routing_key': queue,
      'rabbitmq.message.delivery_tag': expect.any(Number),
      'twophase.outcome': 'committed',
      'twophase.claim.state': 'acquired',
      'twophase.settle.action': 'ack',
    });
    expect(onlySpan(otel.exporter, 'handler-work').parentSpanContext?.spanId).toBe(processSpan.spanContext().spanId);
    expect(childrenOf(otel.exporter, processSpan).map((s) => s.name).sort()).toEqual([`ack ${queue}`, `claim ${queue}`, `commit ${queue}`, 'handler-work']);
    expect(baggage).toEqual(['acme']);
  });

  test('S25(c): a duplicate delivery gives a span with outcome done_duplicate and no handler span', async () => {
    const queue = h.queue('otel-dup');
    let runs = 0;
    const { recorder } = await start(queue, 'otel-dup', async () => {
      runs++;
      return ack();
    });
    await tracedPublish(queue, 'same');
    await recorder.waitForResults(1);
    otel.exporter.reset();
    const producer = await tracedPublish(queue, 'same');
    await recorder.waitForResults(2);

    expect(runs).toBe(1);
    const duplicate = onlySpan(otel.exporter, `process ${queue}`);
    expect(duplicate.parentSpanContext?.spanId).toBe(producer.spanContext().spanId);
    expect(duplicate.attributes).toMatchObject({ 'twophase.outcome': 'done_duplicate', 'twophase.claim.state': 'done', 'twophase.handled': false });
    expect(spansNamed(otel.exporter, 'handler-work')).toHaveLength(0);
  });

  test('a dead-lettered message has error status and the reason; the message reaches the DLQ', async () => {
    const queue = h.queue('otel-dlq');
    const { recorder } = await start(queue, 'otel-dlq', async () => {
      throw new PermanentError('malformed payment');
    });
    await tracedPublish(queue, 'poison');
    await recorder.waitForResults(1);
    const span = onlySpan(otel.exporter, `process ${queue}`);
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'dead-lettered (permanent_error): malformed payment' });
    expect(span.attributes).toMatchObject({ 'twophase.outcome': 'rejected', 'twophase.reason': 'permanent_error', 'error.type': 'PermanentError' });
    expect(onlySpan(otel.exporter, `reject ${queue}`).parentSpanContext?.spanId).toBe(span.spanContext().spanId);
    expect(await h.admin.messageCount(`${queue}.dlq`)).toBe(1);
  });

  test('the counters match the outcomes of a run', async () => {
    const queue = h.queue('otel-run');
    const { recorder } = await start(queue, 'otel-run', async (message) => {
      if (message.body.poison) throw new PermanentError('poison');
      return ack();
    });
    for (let i = 0; i < 6; i++) await tracedPublish(queue, `k-${i}`);
    await tracedPublish(queue, 'bad', { poison: true });
    await recorder.waitForResults(7);
    for (let i = 0; i < 3; i++) await tracedPublish(queue, `k-${i}`);
    await recorder.waitForResults(10);

    const where = { 'twophase.consumer.name': 'otel-run' };
    const events = recorder.events.filter((e) => e.type !== 'acquired' && e.type !== 'lease_extended').map((e) => e.type);
    const outcomes = await counterBy(otel.reader, 'twophase.outcomes', 'twophase.outcome', where);
    expect(outcomes).toEqual(recorder.countBy(events));
    expect(outcomes).toEqual({ committed: 6, done_duplicate: 3, released: 1, rejected: 1 });
    expect(await counterBy(otel.reader, 'twophase.claims', 'twophase.claim.state', where)).toEqual({ acquired: 7, done: 3 });
    const processed = await histogramCountBy(otel.reader, 'messaging.process.duration', 'twophase.outcome', where);
    expect(processed).toEqual(recorder.countBy(recorder.results.map((r) => r.outcome)));
    expect(processed).toEqual({ committed: 6, done_duplicate: 3, rejected: 1 });
    expect(spansNamed(otel.exporter, `process ${queue}`)).toHaveLength(10);
  });
});
