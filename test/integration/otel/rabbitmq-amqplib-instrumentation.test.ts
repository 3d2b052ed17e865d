/**
 * S25(d) on the real RabbitMQ: @opentelemetry/instrumentation-amqplib active beside twophase.
 * With the SDK sampler wrapped in `dropInstrumentationProcessSpans`, each delivery has one process
 * span, twophase's, whose parent is the instrumentation's publish span; the handler sees the
 * producer's baggage whether the instrumentation continues the trace or links to it
 * (`useLinksForConsume`, the mode in which the instrumentation itself loses baggage:
 * opentelemetry-js-contrib#2772).
 *
 * Jest loads modules through its own registry, which require-in-the-middle cannot hook, so the
 * instrumentation's patch for `amqplib/lib/channel_model.js` is applied by hand to the module
 * instance the adapter uses (the same instance: one registry per test file).
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { context, propagation, SpanKind, trace } from '@opentelemetry/api';
import { AmqplibInstrumentation } from '@opentelemetry/instrumentation-amqplib';
import {
  AlwaysOnSampler,
  BasicTracerProvider,
  InMemorySpanExporter,
  ParentBasedSampler,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { RabbitMqPublisher } from '../../../adapters/rabbitmq';
import { createOtelObserver, dropInstrumentationProcessSpans, injectTraceHeaders } from '../../../adapters/otel';
import { ack } from '../../../src';
import { describeWithServices } from '../../support/services';
import { AMQP_URL, Harness } from '../rabbitmq/support/harness';
import { installOtel, type OtelHarness, RecordingObserver } from '../../unit/otel/otel-harness';

const CHANNEL_MODEL = 'amqplib/lib/channel_model.js';

describeWithServices(['rabbitmq'], 'instrumentation-amqplib beside twophase (real RabbitMQ)', () => {
  let otel: OtelHarness;
  let instrumentation: AmqplibInstrumentation;
  let channelModel: unknown;
  let h: Harness;

  beforeAll(async () => {
    otel = installOtel({ sampler: dropInstrumentationProcessSpans(new ParentBasedSampler({ root: new AlwaysOnSampler() })) });
    instrumentation = new AmqplibInstrumentation({ enabled: false });
    instrumentation.setTracerProvider(otel.tracerProvider);
    // amqplib 2.x's `exports` map closes its files to package paths; the instrumentation hooks them
    // by file name, so they are loaded here by file path.
    const amqplibDir = dirname(require.resolve('amqplib'));
    channelModel = await import(join(amqplibDir, 'lib', 'channel_model.js'));
    const { version } = JSON.parse(readFileSync(join(amqplibDir, 'package.json'), 'utf8')) as { version: string };
    channelFile().patch(channelModel, version);
  });
  afterAll(async () => {
    channelFile().unpatch?.(channelModel);
    await otel.shutdown();
  });
  beforeEach(() => {
    h = new Harness();
    otel.exporter.reset();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  function channelFile() {
    const file = instrumentation.getModuleDefinitions().flatMap((d) => d.files).find((f) => f.name === CHANNEL_MODEL);
    if (!file) throw new Error(`instrumentation-amqplib no longer patches ${CHANNEL_MODEL}`);
    return file;
  }

  /** Consumes two messages published inside a `checkout` span with baggage; returns what the handler saw. */
  async function run(name: string, observerProvider?: BasicTracerProvider): Promise<{ baggage?: string; spanId?: string }[]> {
    const queue = h.queue(name);
    const recorder = new RecordingObserver();
    const seen: { baggage?: string; spanId?: string }[] = [];
    const consumer = h.consumer(
      { name, source: h.source({ queue }), claimer: h.claimer('memory'), observers: [createOtelObserver({ tracerProvider: observerProvider, meterProvider: otel.meterProvider }), recorder] },
      async () => {
        seen.push({ baggage: propagation.getBaggage(context.active())?.getEntry('tenant')?.value, spanId: trace.getSpan(context.active())?.spanContext().spanId });
        return ack();
      },
    );
    await consumer.start();
    const publisher = new RabbitMqPublisher({ url: AMQP_URL, connectionName: 'twophase-test:otel-amqplib' });
    await publisher.connect();
    try {
      const withBaggage = propagation.setBaggage(context.active(), propagation.createBaggage({ tenant: { value: 'acme' } }));
      await context.with(withBaggage, () =>
        (observerProvider ?? otel.tracerProvider).getTracer('test').startActiveSpan('checkout', async (span) => {
          try {
            for (const key of ['a', 'b']) await publisher.sendToQueue(queue, { key }, { idempotencyKey: key, headers: injectTraceHeaders() });
          } finally {
            span.end();
          }
        }),
      );
      await recorder.waitForResults(2);
    } finally {
      await publisher.close();
    }
    return seen;
  }

  const scope = (s: ReadableSpan) => `${s.instrumentationScope.name}: ${s.name}`;

  it.each([false, true])("useLinksForConsume=%s: one process span per delivery (twophase's), parent = the publish span, baggage in the handler", async (useLinksForConsume) => {
    instrumentation.setConfig({ useLinksForConsume });
    const seen = await run('otel-amqplib');

    const spans = otel.exporter.getFinishedSpans();
    const consumerSpans = spans.filter((s) => s.kind === SpanKind.CONSUMER);
    expect(consumerSpans.map(scope)).toEqual([expect.stringMatching(/^twophase: process tp-test\.otel-amqplib\./), expect.stringMatching(/^twophase: process /)]);
    const publishSpans = spans.filter((s) => s.kind === SpanKind.PRODUCER && s.instrumentationScope.name === '@opentelemetry/instrumentation-amqplib');
    expect(publishSpans).toHaveLength(2);
    const checkout = spans.find((x) => x.name === 'checkout')!;
    expect(publishSpans.map((p) => p.parentSpanContext?.spanId)).toEqual([checkout.spanContext().spanId, checkout.spanContext().spanId]);
    const byId = new Map<string, ReadableSpan>(publishSpans.map((s) => [s.spanContext().spanId, s]));
    for (const processSpan of consumerSpans) {
      // instrumentation-amqplib injects its publish span's context, replacing the one twophase injected.
      expect(byId.has(processSpan.parentSpanContext?.spanId ?? '')).toBe(true);
      expect(processSpan.attributes['twophase.outcome']).toBe('committed');
    }
    expect(seen.map((s) => s.baggage)).toEqual(['acme', 'acme']);
    expect(seen.map((s) => s.spanId).sort()).toEqual(consumerSpans.map((s) => s.spanContext().spanId).sort());
  });

  it('control: without the sampler wrapper the instrumentation records its own process span too (the patch is live)', async () => {
    const exporter = new InMemorySpanExporter();
    const plain = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    instrumentation.setConfig({ useLinksForConsume: false });
    instrumentation.setTracerProvider(plain);
    try {
      await run('otel-amqplib-control', plain);
    } finally {
      instrumentation.setTracerProvider(otel.tracerProvider);
    }
    const consumerSpans = exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.CONSUMER).map(scope).sort();
    expect(consumerSpans).toEqual([
      expect.stringMatching(/^@opentelemetry\/instrumentation-amqplib: tp-test\.otel-amqplib-control\..* process$/),
      expect.stringMatching(/^@opentelemetry\/instrumentation-amqplib: .* process$/),
      expect.stringMatching(/^twophase: process /),
      expect.stringMatching(/^twophase: process /),
    ]);
    await plain.shutdown();
  });
});
