/**
 * twophase with OpenTelemetry: the Node SDK, a console span exporter and a console metric
 * exporter, on the in-process broker (no services needed).
 *
 *   npx ts-node --transpile-only examples/otel/main.ts
 *
 * A checkout publishes three orders inside a span, with baggage `tenant=acme`; one order is
 * published twice and one is poison. The consumer's handler opens its own span and reads the
 * baggage. Printed: every span as the console exporter writes it, then the metrics, then a short
 * trace outline. What to look for: each `process orders` span is a child of the checkout's
 * `send orders` span; the duplicate's span has `twophase.outcome: 'done_duplicate'` and no
 * `charge card` child; the poison message's span has status ERROR and `twophase.reason`.
 */
import { context, propagation, SpanKind, trace } from '@opentelemetry/api';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { ConsoleMetricExporter, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import {
  AlwaysOnSampler,
  ConsoleSpanExporter,
  InMemorySpanExporter,
  ParentBasedSampler,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { MemoryBroker, MemorySource } from '../../adapters/memory';
import { createOtelObserver, dropInstrumentationProcessSpans, injectTraceHeaders } from '../../adapters/otel';
import {
  ack,
  ConsumerBase,
  type DeliveryResult,
  type Disposition,
  type HandlerContext,
  InMemoryClaimer,
  type Message,
  PermanentError,
  silentLogger,
} from '../../src';

interface Order {
  readonly orderId: string;
  readonly amountCents: number;
  readonly poison?: boolean;
}

const QUEUE = 'orders';
const tracer = trace.getTracer('otel-example');

/** Charges each order once; its span `charge card` is a child of twophase's process span. */
class OrderConsumer extends ConsumerBase<Order> {
  readonly charged: string[] = [];

  async handle(message: Message<Order>, context_: HandlerContext): Promise<Disposition> {
    return tracer.startActiveSpan('charge card', async (span) => {
      try {
        const tenant = propagation.getBaggage(context.active())?.getEntry('tenant')?.value;
        span.setAttributes({ 'order.id': message.body.orderId, 'order.tenant': tenant ?? '(none)', 'twophase.fencing_token': context_.fencingToken });
        if (message.body.poison) throw new PermanentError(`order ${message.body.orderId} has no card on file`);
        this.charged.push(message.body.orderId);
        return ack({ chargedCents: message.body.amountCents });
      } finally {
        span.end();
      }
    });
  }
}

async function main(): Promise<void> {
  // A second, in-memory copy of the spans feeds the outline printed at the end.
  const outline = new InMemorySpanExporter();
  const sdk = new NodeSDK({
    serviceName: 'twophase-otel-example',
    autoDetectResources: false,
    spanProcessors: [new SimpleSpanProcessor(new ConsoleSpanExporter()), new SimpleSpanProcessor(outline)],
    metricReader: new PeriodicExportingMetricReader({ exporter: new ConsoleMetricExporter(), exportIntervalMillis: 60_000 }),
    // One process span per delivery even when instrumentation-amqplib or -kafkajs is installed.
    sampler: dropInstrumentationProcessSpans(new ParentBasedSampler({ root: new AlwaysOnSampler() })),
    instrumentations: [],
  });
  sdk.start();

  const broker = new MemoryBroker();
  let finished = 0;
  let allDone: () => void = () => {};
  const done = new Promise<void>((resolve) => (allDone = resolve));
  const expected = 5;
  const consumer = new OrderConsumer({
    name: 'orders',
    claimer: new InMemoryClaimer(),
    source: new MemorySource({ broker, queue: QUEUE }),
    deployment: { replicas: 1 },
    logger: silentLogger,
    observers: [
      createOtelObserver(),
      {
        onDelivery: () => ({
          end: (_result: DeliveryResult) => {
            if (++finished === expected) allDone();
          },
        }),
      },
    ],
  });
  await consumer.start();

  // The producer side: a checkout publishes its orders inside one span, with baggage.
  const checkout = propagation.setBaggage(context.active(), propagation.createBaggage({ tenant: { value: 'acme' } }));
  await context.with(checkout, () =>
    tracer.startActiveSpan(`send ${QUEUE}`, { kind: SpanKind.PRODUCER }, async (span) => {
      const orders: Order[] = [
        { orderId: 'o-1', amountCents: 1200 },
        { orderId: 'o-2', amountCents: 800 },
        { orderId: 'o-3', amountCents: 450, poison: true },
      ];
      for (const order of orders) {
        broker.publish(QUEUE, { body: JSON.stringify(order), messageId: order.orderId, headers: injectTraceHeaders({ 'idempotency-key': order.orderId }) });
      }
      span.end();
    }),
  );
  // A producer retry: o-1 again (after the first copy was processed) and o-2 again.
  await waitFor(() => finished >= 3);
  for (const id of ['o-1', 'o-2']) broker.publish(QUEUE, { body: JSON.stringify({ orderId: id, amountCents: 0 }), messageId: id, headers: { 'idempotency-key': id } });

  await done;
  await consumer.stop();
  broker.close();
  const spans = outline.getFinishedSpans(); // before shutdown, which empties the in-memory exporter
  await sdk.shutdown(); // flushes the metrics to the console

  printOutline(spans);
  console.log(`\ncharged: ${consumer.charged.join(', ')} (each once); dead-lettered: ${broker.deadLetters(QUEUE).length}`);
  if (consumer.charged.length !== 2) process.exitCode = 1;
}

async function waitFor(predicate: () => boolean): Promise<void> {
  while (!predicate()) await new Promise((resolve) => setImmediate(resolve));
}

/** Prints spans as indented trees: name, then twophase's outcome and the status where set. */
function printOutline(spans: readonly ReadableSpan[]): void {
  const ids = new Set(spans.map((s) => s.spanContext().spanId));
  const children = new Map<string, ReadableSpan[]>();
  for (const s of spans) {
    const parent = s.parentSpanContext?.spanId;
    const key = parent && ids.has(parent) ? parent : 'root';
    children.set(key, [...(children.get(key) ?? []), s]);
  }
  const line = (s: ReadableSpan, depth: number): void => {
    const outcome = s.attributes['twophase.outcome'];
    const status = s.status.code === 2 ? ` ERROR(${s.status.message ?? ''})` : '';
    console.log(`${'  '.repeat(depth)}${s.name}${outcome ? ` [${String(outcome)}]` : ''}${status}`);
    for (const c of children.get(s.spanContext().spanId) ?? []) line(c, depth + 1);
  };
  console.log('\ntrace outline:');
  for (const root of children.get('root') ?? []) line(root, 0);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
