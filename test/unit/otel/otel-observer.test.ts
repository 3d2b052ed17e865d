/**
 * The OpenTelemetry observer on the in-process broker: the process span and its parent, child
 * spans, baggage in the handler, attributes, error status, span events and metrics.
 * Scenario S25 (a)-(c) of ../shared/cases/failure-scenarios.md; (d) is in auto-instrumentation.test.ts.
 */
import { context, propagation, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { MemoryBroker, MemorySource } from '../../../adapters/memory';
import { createOtelObserver, injectTraceHeaders, type OtelObserverOptions } from '../../../adapters/otel';
import {
  ack,
  type Claimer,
  type ConsumerObserver,
  type Delivery,
  type DeliveryMetadata,
  type Disposition,
  type HandlerContext,
  InMemoryClaimer,
  LeaseLostError,
  type Message,
  namespaceKey,
  PermanentError,
  reject,
  type Receipt,
} from '../../../src';
import { FlakyClaimer, FnConsumer, type Handler, WrappingClaimer } from '../helpers';
import { childrenOf, counterBy, dataPoints, histogramCountBy, installOtel, type OtelHarness, onlySpan, RecordingObserver, spansNamed } from './otel-harness';

const QUEUE = 'orders';
const tracer = () => trace.getTracer('test');

let otel: OtelHarness;
beforeAll(() => {
  otel = installOtel();
});
afterAll(async () => {
  await otel.shutdown();
});
beforeEach(async () => {
  otel.exporter.reset();
  await otel.reader.collect(); // cumulative: tests compare deltas via fresh consumer names
});

/** What the handler saw, per delivery. */
interface Seen {
  key: string;
  baggage: string | undefined;
  activeSpanId: string | undefined;
  fencingToken: number;
}

/** A handler that records what it sees and opens a child span `handler-work`. */
function tracingHandler(seen: Seen[], then: (message: Message<unknown>, ctx: HandlerContext) => Promise<Disposition> = async () => ack()): Handler {
  return async (message, ctx) => {
    seen.push({
      key: message.key,
      baggage: propagation.getBaggage(context.active())?.getEntry('tenant')?.value,
      activeSpanId: trace.getSpan(context.active())?.spanContext().spanId,
      fencingToken: ctx.fencingToken,
    });
    return tracer().startActiveSpan('handler-work', async (span) => {
      try {
        return await then(message, ctx);
      } finally {
        span.end();
      }
    });
  };
}

/** Publishes inside a PRODUCER span with baggage `tenant=acme`; returns the producer span. */
function tracedPublish(broker: MemoryBroker, key: string, body: unknown = { key }): Span {
  const withBaggage = propagation.setBaggage(context.active(), propagation.createBaggage({ tenant: { value: 'acme' } }));
  return context.with(withBaggage, () =>
    tracer().startActiveSpan(`send ${QUEUE}`, { kind: SpanKind.PRODUCER }, (span) => {
      broker.publish(QUEUE, { body: JSON.stringify(body), headers: injectTraceHeaders({ 'idempotency-key': key }), messageId: `m-${key}` });
      span.end();
      return span;
    }),
  );
}

interface Rig {
  broker: MemoryBroker;
  consumer: FnConsumer;
  recorder: RecordingObserver;
  stop(): Promise<void>;
}

async function startRig(name: string, handler: Handler, options: { otel?: OtelObserverOptions; claimer?: Claimer; observers?: ConsumerObserver[]; consumer?: Record<string, unknown> } = {}): Promise<Rig> {
  const broker = new MemoryBroker();
  const recorder = new RecordingObserver();
  const consumer = new FnConsumer(
    {
      name,
      claimer: options.claimer ?? new InMemoryClaimer(),
      source: new MemorySource({ broker, queue: QUEUE }),
      deployment: { replicas: 1 },
      leaseTtlMs: 1000,
      retryBackoff: { initialDelayMs: 1, maxDelayMs: 2, jitter: 0 },
      observers: [createOtelObserver({ meterProvider: otel.meterProvider, ...options.otel }), ...(options.observers ?? []), recorder],
      ...options.consumer,
    },
    handler,
  );
  await consumer.start();
  return {
    broker,
    consumer,
    recorder,
    async stop() {
      await consumer.stop();
      broker.close();
    },
  };
}

function processSpans(): ReadableSpan[] {
  return otel.exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.CONSUMER);
}

function childNames(span: ReadableSpan): string[] {
  return childrenOf(otel.exporter, span).map((s) => s.name).sort();
}

describe('process span', () => {
  it('S25(a) parent mode: the process span is a CONSUMER child of the producer span, the handler span its child, baggage visible in the handler', async () => {
    const seen: Seen[] = [];
    const rig = await startRig('parent-mode', tracingHandler(seen));
    const producer = tracedPublish(rig.broker, 'k1');
    await rig.recorder.waitForResults(1);
    await rig.stop();

    const processSpan = onlySpan(otel.exporter, `process ${QUEUE}`);
    expect(processSpan.kind).toBe(SpanKind.CONSUMER);
    expect(processSpan.spanContext().traceId).toBe(producer.spanContext().traceId);
    expect(processSpan.parentSpanContext?.spanId).toBe(producer.spanContext().spanId);
    expect(processSpan.links).toHaveLength(0);

    const handlerSpan = onlySpan(otel.exporter, 'handler-work');
    expect(handlerSpan.parentSpanContext?.spanId).toBe(processSpan.spanContext().spanId);
    expect(seen).toEqual([{ key: namespaceKey('parent-mode', 'k1'), baggage: 'acme', activeSpanId: processSpan.spanContext().spanId, fencingToken: expect.any(Number) }]);

    expect(childNames(processSpan)).toEqual([`ack ${QUEUE}`, `claim ${QUEUE}`, `commit ${QUEUE}`, 'handler-work']);
    expect(processSpan.status.code).toBe(SpanStatusCode.UNSET);
    expect(processSpan.attributes).toMatchObject({
      'messaging.system.name': 'memory',
      'messaging.operation.name': 'process',
      'messaging.operation.type': 'process',
      'messaging.destination.name': QUEUE,
      'messaging.message.id': 'm-k1',
      'twophase.consumer.name': 'parent-mode',
      'twophase.key': namespaceKey('parent-mode', 'k1'),
      'twophase.claim.state': 'acquired',
      'twophase.outcome': 'committed',
      'twophase.settle.action': 'ack',
      'twophase.attempt': 1,
      'twophase.fencing_token': seen[0]!.fencingToken,
      'twophase.handled': true,
      'twophase.redelivered': false,
    });
    expect(processSpan.attributes['error.type']).toBeUndefined();
    expect(processSpan.events.map((e) => e.name)).toEqual(['twophase.acquired', 'twophase.committed']);
  });

  it('S25(a) link mode: a new trace linked to the producer span, baggage still visible in the handler', async () => {
    const seen: Seen[] = [];
    const rig = await startRig('link-mode', tracingHandler(seen), { otel: { useLinks: true } });
    const producer = tracedPublish(rig.broker, 'k1');
    await rig.recorder.waitForResults(1);
    await rig.stop();

    const processSpan = onlySpan(otel.exporter, `process ${QUEUE}`);
    expect(processSpan.parentSpanContext).toBeUndefined();
    expect(processSpan.spanContext().traceId).not.toBe(producer.spanContext().traceId);
    expect(processSpan.links.map((l) => l.context.spanId)).toEqual([producer.spanContext().spanId]);
    expect(onlySpan(otel.exporter, 'handler-work').parentSpanContext?.spanId).toBe(processSpan.spanContext().spanId);
    expect(seen[0]!.baggage).toBe('acme');
  });

  it('a message without trace headers starts a new trace; the handler still runs inside the process span', async () => {
    const seen: Seen[] = [];
    const rig = await startRig('no-context', tracingHandler(seen));
    rig.broker.publish(QUEUE, { body: '{}', headers: { 'idempotency-key': 'plain' } });
    await rig.recorder.waitForResults(1);
    await rig.stop();
    const processSpan = onlySpan(otel.exporter, `process ${QUEUE}`);
    expect(processSpan.parentSpanContext).toBeUndefined();
    expect(seen[0]).toMatchObject({ baggage: undefined, activeSpanId: processSpan.spanContext().spanId });
  });

  it('the active context at delivery time is not the parent (a handler that publishes does not nest the next delivery)', async () => {
    const rig = await startRig('leak', async (message) => {
      // Publishing from inside the handler schedules the broker's next pump in this context.
      if (message.key.endsWith('first')) rig.broker.publish(QUEUE, { body: '{}', headers: { 'idempotency-key': 'second' } });
      return ack();
    });
    tracedPublish(rig.broker, 'first');
    await rig.recorder.waitForResults(2);
    await rig.stop();
    const [first, second] = processSpans().sort((a, b) => String(a.attributes['twophase.key']).localeCompare(String(b.attributes['twophase.key'])));
    expect(first!.attributes['twophase.key']).toContain('first');
    expect(second!.parentSpanContext).toBeUndefined();
  });
});

describe('S25(b) headers as Buffers (Kafka)', () => {
  function kafkaDelivery(headers: Record<string, unknown>, facts: DeliveryMetadata['attributes'] = {}): Delivery {
    return {
      body: Buffer.from('{}'),
      headers,
      metadata: { system: 'kafka', destination: 'payments', redelivered: false, consumerGroup: 'billing', attributes: facts },
      settler: { ack: async () => {}, requeue: async () => {}, reject: async () => {} },
    };
  }

  function producerHeaders(): { headers: Record<string, string>; spanId: string; traceId: string } {
    return tracer().startActiveSpan('send payments', { kind: SpanKind.PRODUCER }, (span) => {
      const ctx = propagation.setBaggage(context.active(), propagation.createBaggage({ tenant: { value: 'acme' } }));
      const headers = injectTraceHeaders({}, { context: ctx }) as Record<string, string>;
      span.end();
      return { headers, spanId: span.spanContext().spanId, traceId: span.spanContext().traceId };
    });
  }

  async function dispatchOne(name: string, delivery: Delivery): Promise<{ span: ReadableSpan; seen: Seen }> {
    const seen: Seen[] = [];
    const consumer = new FnConsumer({ name, claimer: new InMemoryClaimer(), observers: [createOtelObserver({ meterProvider: otel.meterProvider })] }, tracingHandler(seen));
    await consumer.start();
    await consumer.dispatch(delivery);
    await consumer.stop();
    return { span: onlySpan(otel.exporter, 'process payments'), seen: seen[0]! };
  }

  it.each([
    ['Buffer', (v: string) => Buffer.from(v)],
    ['Buffer[]', (v: string) => [Buffer.from(v)]],
    ['string[]', (v: string) => [v]],
  ])('header values as %s: UTF-8 decoded, parent and baggage correct', async (_label, wrap) => {
    const producer = producerHeaders();
    const headers: Record<string, unknown> = { 'idempotency-key': Buffer.from('k-buf') }; // the core reads a repeated key header as invalid_key
    for (const [k, v] of Object.entries(producer.headers)) headers[k] = wrap(v);
    const { span, seen } = await dispatchOne(`kafka-${_label}`, kafkaDelivery(headers, { partition: 3, offset: '42', key: 'customer-7' }));
    expect(span.parentSpanContext?.spanId).toBe(producer.spanId);
    expect(span.spanContext().traceId).toBe(producer.traceId);
    expect(seen.baggage).toBe('acme');
    expect(span.attributes).toMatchObject({
      'messaging.system.name': 'kafka',
      'messaging.destination.name': 'payments',
      'messaging.consumer.group.name': 'billing',
      'messaging.destination.partition.id': '3',
      'kafka.offset': 42,
      'kafka.message.key': 'customer-7',
    });
    expect(Object.keys(span.attributes).filter((k) => k.startsWith('rabbitmq.'))).toEqual([]);
  });

  it.each([
    ['garbage', 'not-a-traceparent'],
    ['all-zero trace id', '00-00000000000000000000000000000000-0000000000000001-01'],
    ['bad version', 'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'],
  ])('a malformed traceparent (%s) gives a new root span and no throw', async (_label, value) => {
    const { span, seen } = await dispatchOne(`malformed-${_label.replace(/\W/g, '')}`, kafkaDelivery({ 'idempotency-key': 'k', traceparent: Buffer.from(value) }));
    expect(span.parentSpanContext).toBeUndefined();
    expect(span.attributes['twophase.outcome']).toBe('committed');
    expect(seen.activeSpanId).toBe(span.spanContext().spanId);
  });

  it('RabbitMQ facts map to the rabbitmq attributes, never the kafka ones', async () => {
    const consumer = new FnConsumer({ name: 'amqp-facts', claimer: new InMemoryClaimer(), observers: [createOtelObserver({ meterProvider: otel.meterProvider })] }, async () => ack());
    await consumer.start();
    await consumer.dispatch({
      body: Buffer.from('{}'),
      headers: { 'idempotency-key': 'r1' },
      messageId: 'mid-1',
      metadata: { system: 'rabbitmq', destination: 'orders', redelivered: true, attributes: { routingKey: 'orders.created', deliveryTag: 17, offset: 5, key: 'x' } },
      settler: { ack: async () => {}, requeue: async () => {}, reject: async () => {} },
    });
    await consumer.stop();
    const span = onlySpan(otel.exporter, 'process orders');
    expect(span.attributes).toMatchObject({
      'messaging.system.name': 'rabbitmq',
      'rabbitmq.destination.routing_key': 'orders.created',
      'rabbitmq.message.delivery_tag': 17,
      'messaging.message.id': 'mid-1',
      'twophase.redelivered': true,
    });
    expect(span.attributes['kafka.offset']).toBeUndefined();
    expect(span.attributes['kafka.message.key']).toBeUndefined();
  });
});

describe('S25(c) outcomes on the span', () => {
  it('a duplicate delivery yields a span with outcome done_duplicate and no handler span', async () => {
    const seen: Seen[] = [];
    const rig = await startRig('dup', tracingHandler(seen));
    tracedPublish(rig.broker, 'same');
    await rig.recorder.waitForResults(1);
    otel.exporter.reset();
    const producer = tracedPublish(rig.broker, 'same');
    await rig.recorder.waitForResults(2);
    await rig.stop();

    expect(seen).toHaveLength(1);
    const duplicate = onlySpan(otel.exporter, `process ${QUEUE}`);
    expect(duplicate.parentSpanContext?.spanId).toBe(producer.spanContext().spanId);
    expect(duplicate.attributes).toMatchObject({ 'twophase.outcome': 'done_duplicate', 'twophase.claim.state': 'done', 'twophase.settle.action': 'ack', 'twophase.handled': false });
    expect(duplicate.status.code).toBe(SpanStatusCode.UNSET);
    expect(spansNamed(otel.exporter, 'handler-work')).toHaveLength(0);
    expect(childNames(duplicate)).toEqual([`ack ${QUEUE}`, `claim ${QUEUE}`]);
    expect(onlySpan(otel.exporter, `claim ${QUEUE}`).attributes['twophase.claim.state']).toBe('done');
    expect(duplicate.events.map((e) => e.name)).toEqual(['twophase.done_duplicate']);
  });

  it('a fenced commit (lease_lost) is an ERROR span with a twophase.lease_lost event; the commit span says why', async () => {
    const rig = await startRig('fenced', async () => ack(), { claimer: new FencedClaimer(new InMemoryClaimer()) });
    tracedPublish(rig.broker, 'k');
    await rig.recorder.waitForResults(1);
    await rig.stop();
    const span = onlySpan(otel.exporter, `process ${QUEUE}`);
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
    expect(span.attributes).toMatchObject({ 'twophase.outcome': 'lease_lost', 'error.type': 'LeaseLostError', 'twophase.settle.action': 'ack' });
    const event = span.events.find((e) => e.name === 'twophase.lease_lost');
    expect(event?.attributes).toMatchObject({ 'error.type': 'LeaseLostError', 'twophase.attempt': 1 });
    const commit = onlySpan(otel.exporter, `commit ${QUEUE}`);
    expect(commit.status.code).toBe(SpanStatusCode.ERROR);
    expect(commit.attributes).toMatchObject({ 'twophase.outcome': 'lease_lost', 'error.type': 'LeaseLostError' });
  });

  it('a dead-lettered message has error status, error.type and the reason, and a reject span', async () => {
    const rig = await startRig('dlq', async () => {
      throw new PermanentError('card number malformed');
    });
    tracedPublish(rig.broker, 'poison');
    await rig.recorder.waitForResults(1);
    await rig.stop();
    expect(rig.broker.deadLetters(QUEUE)).toHaveLength(1);
    const span = onlySpan(otel.exporter, `process ${QUEUE}`);
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'dead-lettered (permanent_error): card number malformed' });
    expect(span.attributes).toMatchObject({ 'twophase.outcome': 'rejected', 'twophase.reason': 'permanent_error', 'error.type': 'PermanentError', 'twophase.settle.action': 'reject' });
    // dead-letter first, then release (the attempt count is reset only once the DLQ copy exists)
    expect(span.events.map((e) => e.name)).toEqual(['twophase.acquired', 'twophase.rejected', 'twophase.released']);
    expect(span.events[1]!.attributes).toMatchObject({ 'twophase.reason': 'permanent_error', 'error.type': 'PermanentError' });
    const settle = onlySpan(otel.exporter, `reject ${QUEUE}`);
    expect(settle.kind).toBe(SpanKind.CLIENT);
    expect(settle.attributes).toMatchObject({ 'messaging.operation.type': 'settle', 'messaging.operation.name': 'reject', 'twophase.reason': 'permanent_error' });
    expect(onlySpan(otel.exporter, `release ${QUEUE}`).status.code).toBe(SpanStatusCode.UNSET);
  });

  it('a handler reject without an error uses the reason as error.type; a message without a key is rejected as missing_key', async () => {
    const rig = await startRig('reasons', async () => reject('out_of_stock'));
    rig.broker.publish(QUEUE, { body: '{}', headers: { 'idempotency-key': 'a' } });
    rig.broker.publish(QUEUE, { body: '{}' });
    await rig.recorder.waitForResults(2);
    await rig.stop();
    const byReason = Object.fromEntries(processSpans().map((s) => [s.attributes['twophase.reason'], s]));
    expect(byReason.out_of_stock!.attributes['error.type']).toBe('out_of_stock');
    expect(byReason.missing_key!.attributes).toMatchObject({ 'error.type': 'InvalidMessageError', 'twophase.outcome': 'rejected', 'twophase.handled': false });
    expect(byReason.missing_key!.status.code).toBe(SpanStatusCode.ERROR);
    expect(byReason.missing_key!.attributes['twophase.claim.state']).toBeUndefined();
  });

  it('a busy claim requeues without error and records the delay', async () => {
    const claimer = new InMemoryClaimer();
    await claimer.claim(namespaceKey('busy', 'held'), { leaseTtlMs: 60_000, doneTtlMs: 60_000 });
    const consumer = new FnConsumer({ name: 'busy', claimer, busyRequeueDelayMs: 250, observers: [createOtelObserver({ meterProvider: otel.meterProvider })] }, async () => ack());
    await consumer.start();
    const result = await consumer.dispatch(delivery('held'));
    await consumer.stop();
    expect(result.outcome).toBe('busy');
    const span = onlySpan(otel.exporter, 'process q');
    expect(span.status.code).toBe(SpanStatusCode.UNSET);
    expect(span.attributes).toMatchObject({ 'twophase.outcome': 'busy', 'twophase.claim.state': 'busy', 'twophase.settle.action': 'requeue', 'twophase.requeue.delay_ms': 250, 'twophase.reason': 'busy' });
    expect(onlySpan(otel.exporter, 'requeue q').status.code).toBe(SpanStatusCode.UNSET);
  });

  it('a claim store outage: claim span and process span ERROR with ClaimerUnavailableError, the handler never runs', async () => {
    const claimer = new FlakyClaimer(new InMemoryClaimer());
    claimer.failClaims = 1;
    let ran = false;
    const consumer = new FnConsumer({ name: 'outage', claimer, claimRetries: 0, observers: [createOtelObserver({ meterProvider: otel.meterProvider })] }, async () => {
      ran = true;
      return ack();
    });
    await consumer.start();
    await consumer.dispatch(delivery('k'));
    await consumer.stop();
    expect(ran).toBe(false);
    const span = onlySpan(otel.exporter, 'process q');
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
    expect(span.attributes).toMatchObject({ 'twophase.outcome': 'claim_failed', 'error.type': 'ClaimerUnavailableError', 'twophase.claim.state': 'failed' });
    const claim = onlySpan(otel.exporter, 'claim q');
    expect(claim.status.code).toBe(SpanStatusCode.ERROR);
    expect(claim.attributes['error.type']).toBe('ClaimerUnavailableError');
    expect(await counterBy(otel.reader, 'twophase.claims', 'twophase.claim.state', { 'twophase.consumer.name': 'outage' })).toEqual({ failed: 1 });
  });

  it('a failed broker ack: the ack span and the process span are ERROR, ack_failed is counted', async () => {
    const consumer = new FnConsumer({ name: 'ack-fails', claimer: new InMemoryClaimer(), observers: [createOtelObserver({ meterProvider: otel.meterProvider })] }, async () => ack());
    await consumer.start();
    const failing = delivery('k');
    await consumer.dispatch({ ...failing, settler: { ...failing.settler, ack: async () => Promise.reject(new ChannelClosedError()) } });
    await consumer.stop();
    const span = onlySpan(otel.exporter, 'process q');
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
    expect(span.attributes).toMatchObject({ 'twophase.outcome': 'committed', 'error.type': 'ChannelClosedError' });
    expect(onlySpan(otel.exporter, 'ack q').status.code).toBe(SpanStatusCode.ERROR);
    expect(await counterBy(otel.reader, 'twophase.outcomes', 'twophase.outcome', { 'twophase.consumer.name': 'ack-fails' })).toEqual({ committed: 1, ack_failed: 1 });
  });
});

describe('metrics', () => {
  it('counters match the outcomes of a run', async () => {
    const attempts = new Map<string, number>();
    const rig = await startRig(
      'run',
      async (message) => {
        const n = (attempts.get(message.key) ?? 0) + 1;
        attempts.set(message.key, n);
        const body = message.body as { kind?: string };
        if (body.kind === 'poison') throw new PermanentError('poison');
        if (body.kind === 'flaky' && n === 1) throw new Error('transient');
        if (body.kind === 'slow') await new Promise((r) => setTimeout(r, 200));
        return ack();
      },
      { consumer: { leaseTtlMs: 150 } },
    );
    for (let i = 1; i <= 5; i++) tracedPublish(rig.broker, `ok-${i}`);
    tracedPublish(rig.broker, 'flaky', { kind: 'flaky' });
    tracedPublish(rig.broker, 'poison', { kind: 'poison' });
    tracedPublish(rig.broker, 'slow', { kind: 'slow' });
    await rig.recorder.waitForResults(9);
    tracedPublish(rig.broker, 'ok-1');
    tracedPublish(rig.broker, 'ok-2');
    await rig.recorder.waitForResults(11);
    await rig.stop();

    const where = { 'twophase.consumer.name': 'run' };
    const { events, results } = rig.recorder;
    const outcomeEvents = events.filter((e) => e.type !== 'acquired' && e.type !== 'lease_extended' && e.type !== 'fail_open').map((e) => e.type);
    const outcomes = await counterBy(otel.reader, 'twophase.outcomes', 'twophase.outcome', where);
    expect(outcomes).toEqual(rig.recorder.countBy(outcomeEvents));
    expect(outcomes).toEqual({ committed: 7, done_duplicate: 2, released: 2, rejected: 1 });

    const claims = await counterBy(otel.reader, 'twophase.claims', 'twophase.claim.state', where);
    expect(claims).toEqual({ acquired: events.filter((e) => e.type === 'acquired').length, done: 2 });
    expect(claims.acquired).toBe(9);
    expect(await histogramCountBy(otel.reader, 'twophase.claim.duration', 'twophase.claim.state', where)).toEqual(claims);

    const processed = await histogramCountBy(otel.reader, 'messaging.process.duration', 'twophase.outcome', where);
    expect(processed).toEqual(rig.recorder.countBy(results.map((r) => r.outcome)));
    expect(processed).toEqual({ committed: 7, done_duplicate: 2, released: 1, rejected: 1 });
    const runDurations = (await dataPoints(otel.reader, 'messaging.process.duration')).filter((p) => p.attributes['twophase.consumer.name'] === 'run');
    expect(runDurations.reduce((n, p) => n + (p.value as { count: number }).count, 0)).toBe(11);
    expect(runDurations.every((p) => p.attributes['messaging.operation.name'] === 'process' && p.attributes['messaging.system.name'] === 'memory')).toBe(true);
    const failed = runDurations.filter((p) => p.attributes['error.type'] !== undefined).map((p) => [p.attributes['twophase.outcome'], p.attributes['error.type']]);
    expect(failed.sort()).toEqual([
      ['rejected', 'PermanentError'],
      ['released', 'Error'],
    ]);

    const extensions = await counterBy(otel.reader, 'twophase.lease.extensions', 'twophase.consumer.name', where);
    expect(extensions.run).toBe(events.filter((e) => e.type === 'lease_extended').length);
    expect(extensions.run).toBeGreaterThanOrEqual(1);
  });

  it('the meter comes from the global provider by default', async () => {
    const consumer = new FnConsumer({ name: 'global-meter', claimer: new InMemoryClaimer(), observers: [createOtelObserver()] }, async () => ack());
    await consumer.start();
    await consumer.dispatch(delivery('g'));
    await consumer.stop();
    expect(await counterBy(otel.reader, 'twophase.outcomes', 'twophase.outcome', { 'twophase.consumer.name': 'global-meter' })).toEqual({ committed: 1 });
    expect(onlySpan(otel.exporter, 'process q').instrumentationScope).toMatchObject({ name: 'twophase', version: '0.1.0' });
  });
});

describe('options', () => {
  it('traces: false records metrics only and leaves the context alone', async () => {
    const seen: Seen[] = [];
    const consumer = new FnConsumer({ name: 'no-traces', claimer: new InMemoryClaimer(), observers: [createOtelObserver({ traces: false, meterProvider: otel.meterProvider })] }, tracingHandler(seen));
    await consumer.start();
    await consumer.dispatch(delivery('k'));
    await consumer.stop();
    expect(otel.exporter.getFinishedSpans().map((s) => s.name)).toEqual(['handler-work']);
    expect(seen[0]!.activeSpanId).toBeUndefined();
    expect(await counterBy(otel.reader, 'twophase.outcomes', 'twophase.outcome', { 'twophase.consumer.name': 'no-traces' })).toEqual({ committed: 1 });
  });

  it('metrics: false records spans only; recordKey: false leaves the key out', async () => {
    const consumer = new FnConsumer({ name: 'no-metrics', claimer: new InMemoryClaimer(), observers: [createOtelObserver({ metrics: false, recordKey: false })] }, async () => ack());
    await consumer.start();
    await consumer.dispatch(delivery('k'));
    await consumer.stop();
    expect(onlySpan(otel.exporter, 'process q').attributes['twophase.key']).toBeUndefined();
    expect(await counterBy(otel.reader, 'twophase.outcomes', 'twophase.outcome', { 'twophase.consumer.name': 'no-metrics' })).toEqual({});
  });

  it('a given tracer provider and propagator are used instead of the globals', async () => {
    const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = await import('@opentelemetry/sdk-trace-base');
    const own = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(own)] });
    const extracted: string[] = [];
    const propagator = {
      inject: () => {},
      extract: (ctx: ReturnType<typeof context.active>, carrier: unknown) => {
        extracted.push(Object.keys(carrier as object).join(','));
        return ctx;
      },
      fields: () => [],
    };
    const consumer = new FnConsumer({ name: 'explicit', claimer: new InMemoryClaimer(), observers: [createOtelObserver({ tracerProvider: provider, propagator, metrics: false })] }, async () => ack());
    await consumer.start();
    await consumer.dispatch(delivery('k', { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }));
    await consumer.stop();
    expect(extracted).toEqual(['traceparent,idempotency-key']);
    expect(otel.exporter.getFinishedSpans()).toHaveLength(0);
    expect(own.getFinishedSpans().map((s) => s.name).sort()).toEqual(['ack q', 'claim q', 'commit q', 'process q']);
    expect(own.getFinishedSpans().find((s) => s.name === 'process q')!.parentSpanContext).toBeUndefined();
    await provider.shutdown();
  });

  it.each([
    [{ traces: 'yes' }, 'traces must be a boolean'],
    [{ useLinks: 1 }, 'useLinks must be a boolean'],
    [{ tracerProvider: {} }, 'tracerProvider must be'],
    [{ meterProvider: {} }, 'meterProvider must be'],
    [{ propagator: { extract: () => undefined } }, 'propagator must be'],
  ])('rejects invalid options %j at construction', (options, message) => {
    expect(() => createOtelObserver(options as OtelObserverOptions)).toThrow(message);
  });

  it('a throwing propagator yields a new root span, never a failed delivery', async () => {
    const propagator = { inject: () => {}, extract: () => { throw new Error('boom'); }, fields: () => [] };
    const consumer = new FnConsumer({ name: 'bad-propagator', claimer: new InMemoryClaimer(), observers: [createOtelObserver({ propagator, metrics: false })] }, async () => ack());
    await consumer.start();
    const result = await consumer.dispatch(delivery('k'));
    await consumer.stop();
    expect(result.outcome).toBe('committed');
    expect(onlySpan(otel.exporter, 'process q').parentSpanContext).toBeUndefined();
  });
});

/** A delivery from the `q` queue of a test source with key `key`. */
function delivery(key: string, headers: Record<string, unknown> = {}): Delivery {
  return {
    body: Buffer.from('{}'),
    headers: { ...headers, 'idempotency-key': key },
    metadata: { system: 'memory', destination: 'q', redelivered: false },
    settler: { ack: async () => {}, requeue: async () => {}, reject: async () => {} },
  };
}


class ChannelClosedError extends Error {
  override name = 'ChannelClosedError';
}

/** A claimer whose receipts lose their lease before the commit: every commit is fenced. */
class FencedClaimer extends WrappingClaimer {
  protected wrap(receipt: Receipt): Receipt {
    return { ...receipt, commit: async () => Promise.reject(new LeaseLostError(receipt.key, receipt.fencingToken, 'commit')) };
  }
}

