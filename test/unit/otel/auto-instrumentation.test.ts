/**
 * S25(d): with a broker-client auto-instrumentation also active, one process span per delivery.
 * twophase's span wins; `dropInstrumentationProcessSpans` keeps the instrumentation's per-message
 * process span from being recorded. The instrumentations are simulated here with the span shapes
 * they create (instrumentation-amqplib 0.70: `<queue> process`, `messaging.operation=process`,
 * active during the consume callback, ended at ack; instrumentation-kafkajs 0.32:
 * `process <topic>`, `messaging.operation.type=process`). The real instrumentation-amqplib runs
 * against RabbitMQ in test/integration/otel.
 */
import { type Attributes, context, type Context, diag, type DiagLogger, DiagLogLevel, propagation, ROOT_CONTEXT, SpanKind, trace, type TracerProvider } from '@opentelemetry/api';
import {
  AlwaysOnSampler,
  BasicTracerProvider,
  InMemorySpanExporter,
  ParentBasedSampler,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { MemoryBroker, MemorySource } from '../../../adapters/memory';
import { createOtelObserver, dropInstrumentationProcessSpans, injectTraceHeaders, isInstrumentationProcessSpan } from '../../../adapters/otel';
import { ack, type Delivery, InMemoryClaimer, type MessageSource } from '../../../src';
import { type DeliverySink, settledSubmission } from '../../../src/adapter-kit';
import { FnConsumer } from '../helpers';
import { installOtel, type OtelHarness, RecordingObserver } from './otel-harness';

type Flavour = 'amqplib' | 'kafkajs';

/** The consumer span an instrumentation starts for one message, as it names and attributes it. */
function instrumentationSpanShape(flavour: Flavour, destination: string): { name: string; attributes: Attributes } {
  return flavour === 'amqplib'
    ? { name: `${destination} process`, attributes: { 'messaging.destination': '', 'messaging.rabbitmq.routing_key': destination, 'messaging.operation': 'process' } }
    : { name: `process ${destination}`, attributes: { 'messaging.system': 'kafka', 'messaging.destination.name': destination, 'messaging.operation.type': 'process', 'messaging.operation.name': 'process' } };
}

/**
 * Wraps a source the way a broker-client instrumentation wraps the consume callback: a CONSUMER
 * span parented on the message headers, active while the callback runs, ended when the message
 * is settled.
 */
class InstrumentedSource implements MessageSource {
  readonly system: string;
  constructor(
    private readonly inner: MessageSource,
    private readonly provider: TracerProvider,
    private readonly flavour: Flavour,
    private readonly destination: string,
  ) {
    this.system = inner.system;
  }
  start(sink: DeliverySink, options: { readonly concurrency: number }): Promise<void> {
    const tracer = this.provider.getTracer(`@opentelemetry/instrumentation-${this.flavour}`);
    const wrapped: DeliverySink = {
      claimBatch: (deliveries) => sink.claimBatch(deliveries),
      submit: (delivery, preclaimed) => settledSubmission(wrapped.dispatch(delivery, preclaimed)),
      dispatch: (delivery, preclaimed) => {
        const parent: Context = propagation.extract(ROOT_CONTEXT, delivery.headers);
        const { name, attributes } = instrumentationSpanShape(this.flavour, this.destination);
        const span = tracer.startSpan(name, { kind: SpanKind.CONSUMER, attributes }, parent);
        const end = <T>(fn: () => Promise<T>) => () => fn().finally(() => span.end());
        const settler = delivery.settler;
        const instrumented: Delivery = {
          ...delivery,
          settler: {
            ack: (info) => end(() => settler.ack(info))(),
            requeue: (delayMs, info) => end(() => settler.requeue(delayMs, info))(),
            reject: (info) => end(() => settler.reject(info))(),
          },
        };
        return context.with(trace.setSpan(parent, span), () => sink.dispatch(instrumented, preclaimed));
      },
    };
    return this.inner.start(wrapped, options);
  }
  stopIntake(): Promise<void> {
    return this.inner.stopIntake();
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

class CapturingDiag implements DiagLogger {
  readonly warnings: string[] = [];
  warn = (message: string) => void this.warnings.push(message);
  error = () => {};
  info = () => {};
  debug = () => {};
  verbose = () => {};
}

let otel: OtelHarness;
const sampler = dropInstrumentationProcessSpans(new ParentBasedSampler({ root: new AlwaysOnSampler() }));
const warnings = new CapturingDiag();
beforeAll(() => {
  otel = installOtel({ sampler });
  diag.setLogger(warnings, DiagLogLevel.WARN);
});
afterAll(async () => {
  diag.disable();
  await otel.shutdown();
});
beforeEach(() => {
  otel.exporter.reset();
  warnings.warnings.length = 0;
});

async function run(flavour: Flavour, provider: TracerProvider, name: string): Promise<{ producerSpanId: string; seenSpanId: string | undefined; baggage: string | undefined }> {
  const broker = new MemoryBroker();
  const recorder = new RecordingObserver();
  let seenSpanId: string | undefined;
  let baggage: string | undefined;
  const consumer = new FnConsumer(
    {
      name,
      claimer: new InMemoryClaimer(),
      source: new InstrumentedSource(new MemorySource({ broker, queue: 'orders' }), provider, flavour, 'orders'),
      observers: [createOtelObserver({ tracerProvider: provider, metrics: false }), recorder],
    },
    async () => {
      seenSpanId = trace.getSpan(context.active())?.spanContext().spanId;
      baggage = propagation.getBaggage(context.active())?.getEntry('tenant')?.value;
      return ack();
    },
  );
  await consumer.start();
  const withBaggage = propagation.setBaggage(ROOT_CONTEXT, propagation.createBaggage({ tenant: { value: 'acme' } }));
  const producerSpanId = context.with(withBaggage, () =>
    provider.getTracer('app').startActiveSpan('send orders', { kind: SpanKind.PRODUCER }, (span) => {
      broker.publish('orders', { body: '{}', headers: injectTraceHeaders({ 'idempotency-key': 'k1' }) });
      span.end();
      return span.spanContext().spanId;
    }),
  );
  await recorder.waitForResults(1);
  await consumer.stop();
  broker.close();
  return { producerSpanId, seenSpanId, baggage };
}

function consumerSpans(exporter: InMemorySpanExporter): ReadableSpan[] {
  return exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.CONSUMER);
}

describe('S25(d) broker-client auto-instrumentation beside twophase', () => {
  it.each<Flavour>(['amqplib', 'kafkajs'])('%s: with dropInstrumentationProcessSpans there is one process span, twophase\'s, child of the producer', async (flavour) => {
    const { producerSpanId, seenSpanId, baggage } = await run(flavour, otel.tracerProvider, `dedup-${flavour}`);
    const spans = consumerSpans(otel.exporter);
    expect(spans.map((s) => s.name)).toEqual(['process orders']);
    const [processSpan] = spans;
    expect(processSpan!.instrumentationScope.name).toBe('twophase');
    expect(processSpan!.parentSpanContext?.spanId).toBe(producerSpanId);
    expect(seenSpanId).toBe(processSpan!.spanContext().spanId);
    expect(baggage).toBe('acme');
    expect(otel.exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.PRODUCER).map((s) => s.name)).toEqual(['send orders']);
    expect(warnings.warnings).toEqual([]);
  });

  it('without the sampler wrapper both process spans are recorded, and twophase warns once', async () => {
    const exporter = new InMemorySpanExporter();
    const plain = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    await run('amqplib', plain, 'no-dedup-1');
    await run('amqplib', plain, 'no-dedup-2');
    const names = consumerSpans(exporter).map((s) => `${s.instrumentationScope.name}: ${s.name}`).sort();
    expect(names).toEqual([
      '@opentelemetry/instrumentation-amqplib: orders process',
      '@opentelemetry/instrumentation-amqplib: orders process',
      'twophase: process orders',
      'twophase: process orders',
    ]);
    // One warning per observer (each run builds its own).
    expect(warnings.warnings).toHaveLength(2);
    expect(warnings.warnings[0]).toContain('dropInstrumentationProcessSpans');
    await plain.shutdown();
  });
});

describe('isInstrumentationProcessSpan', () => {
  const amqp = instrumentationSpanShape('amqplib', 'orders');
  const kafka = instrumentationSpanShape('kafkajs', 'payments');

  it.each([
    ['instrumentation-amqplib process span', true, amqp.name, SpanKind.CONSUMER, amqp.attributes],
    ['instrumentation-kafkajs process span', true, kafka.name, SpanKind.CONSUMER, kafka.attributes],
    ['twophase process span', false, 'process orders', SpanKind.CONSUMER, { 'messaging.operation.type': 'process', 'twophase.consumer.name': 'c' }],
    ['publish span', false, 'publish orders', SpanKind.PRODUCER, { 'messaging.operation': 'publish' }],
    ['kafkajs eachBatch receive span', false, 'poll payments', SpanKind.CLIENT, { 'messaging.operation.type': 'receive' }],
    ['a consumer span that is not a process span', false, 'receive orders', SpanKind.CONSUMER, { 'messaging.operation.type': 'receive' }],
    ['a user consumer span without messaging attributes', false, 'my consumer', SpanKind.CONSUMER, {}],
  ] as const)('%s → %s', (_label, expected, name, kind, attributes) => {
    expect(isInstrumentationProcessSpan(name, kind, attributes)).toBe(expected);
  });

  it('with destinations, drops only theirs (amqplib: queue from the span name; kafkajs: topic)', () => {
    const only = new Set(['orders', 'payments']);
    expect(isInstrumentationProcessSpan(amqp.name, SpanKind.CONSUMER, amqp.attributes, only)).toBe(true);
    expect(isInstrumentationProcessSpan(kafka.name, SpanKind.CONSUMER, kafka.attributes, only)).toBe(true);
    const other = instrumentationSpanShape('amqplib', 'audit');
    expect(isInstrumentationProcessSpan(other.name, SpanKind.CONSUMER, other.attributes, only)).toBe(false);
  });

  it('the wrapper passes everything else to the wrapped sampler, and validates its input', () => {
    const calls: string[] = [];
    const delegate = { shouldSample: (_c: Context, _t: string, name: string) => (calls.push(name), { decision: 2 }), toString: () => 'Delegate' };
    const wrapped = dropInstrumentationProcessSpans(delegate, { destinations: ['orders'] });
    expect(wrapped.shouldSample(ROOT_CONTEXT, 't', amqp.name, SpanKind.CONSUMER, amqp.attributes, []).decision).toBe(0);
    expect(wrapped.shouldSample(ROOT_CONTEXT, 't', 'audit process', SpanKind.CONSUMER, { 'messaging.operation': 'process' }, []).decision).toBe(2);
    expect(wrapped.shouldSample(ROOT_CONTEXT, 't', 'publish orders', SpanKind.PRODUCER, {}, []).decision).toBe(2);
    expect(calls).toEqual(['audit process', 'publish orders']);
    expect(wrapped.toString()).toBe('DropInstrumentationProcessSpans{Delegate}');
    expect(() => dropInstrumentationProcessSpans({} as typeof delegate)).toThrow('needs a sampler');
    expect(() => dropInstrumentationProcessSpans(delegate, { destinations: 'orders' as unknown as string[] })).toThrow('destinations must be an array');
  });
});
