/**
 * OpenTelemetry on the real Kafka broker: a traced produce through the producer helper (with
 * `injectContext`) and a consume yield a process span whose parent is the producer's span, with
 * the baggage readable in the handler (scenario S25(b): Kafka headers arrive as Buffers).
 */
import { context, propagation, SpanKind, trace } from '@opentelemetry/api';
import { type Kafka, Partitioners } from 'kafkajs';
import { ack, ConsumerBase, type Disposition, InMemoryClaimer, silentLogger } from '../../../src';
import { KeyedProducer } from '../../../adapters/kafka';
import { createOtelObserver, injectTraceHeaders } from '../../../adapters/otel';
import { describeWithServices } from '../../support/services';
import { installOtel, type OtelHarness, spansNamed } from '../../unit/otel/otel-harness';
import { fastSource, makeKafka, TopicFixture, unique } from '../kafka/support/kafka-helpers';
import { waitFor } from '../../support/wait';

describeWithServices(['kafka'], 'OpenTelemetry on the real Kafka broker', () => {
  let otel: OtelHarness;
  let kafka: Kafka;
  let topics: TopicFixture;

  beforeAll(async () => {
    otel = installOtel();
    kafka = makeKafka('twophase-otel-suite');
    topics = new TopicFixture(kafka);
    await topics.connect();
  });
  afterAll(async () => {
    await topics.destroy();
    await otel.shutdown();
  });

  test('S25(b): traced produce → consume: the process span is a child of the producer span; baggage reaches the handler', async () => {
    const topic = await topics.create('otel', 1);
    const raw = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await raw.connect();
    const producer = new KeyedProducer({ producer: raw }, {}, { injectContext: injectTraceHeaders });
    const baggage: (string | undefined)[] = [];
    class Traced extends ConsumerBase<unknown> {
      async handle(): Promise<Disposition> {
        baggage.push(propagation.getBaggage(context.active())?.getEntry('tenant')?.value);
        return ack();
      }
    }
    const consumer = new Traced({
      name: 'otel-kafka',
      claimer: new InMemoryClaimer(),
      source: fastSource(kafka, { topics: [topic], groupId: unique('otel-group') }),
      logger: silentLogger,
      observers: [createOtelObserver()],
    });
    await consumer.start();
    try {
      const withBaggage = propagation.setBaggage(context.active(), propagation.createBaggage({ tenant: { value: 'acme' } }));
      const producerSpan = await context.with(withBaggage, () =>
        trace.getTracer('test').startActiveSpan(`send ${topic}`, { kind: SpanKind.PRODUCER }, async (span) => {
          try {
            await producer.send(topic, [{ idempotencyKey: 'k-1', value: '{"n":1}' }]);
            return span;
          } finally {
            span.end();
          }
        }),
      );
      await waitFor(() => spansNamed(otel.exporter, `process ${topic}`).length === 1, { what: 'process span' });
      const processSpan = spansNamed(otel.exporter, `process ${topic}`)[0]!;
      expect(processSpan.kind).toBe(SpanKind.CONSUMER);
      expect(processSpan.spanContext().traceId).toBe(producerSpan.spanContext().traceId);
      expect(processSpan.parentSpanContext?.spanId).toBe(producerSpan.spanContext().spanId);
      expect(processSpan.attributes).toMatchObject({
        'messaging.system.name': 'kafka',
        'messaging.destination.name': topic,
        'messaging.operation.type': 'process',
        'twophase.outcome': 'committed',
      });
      expect(baggage).toEqual(['acme']);
    } finally {
      await consumer.stop();
      await raw.disconnect();
    }
  });
});
