/**
 * OpenTelemetry on the real Kafka broker: a traced produce through the producer helper (with
 * `injectContext`) and a consume yield a process span whose parent is the producer's span, with
 * the baggage readable in the handler (scenario S25(b): Kafka headers arrive as Buffers). Once per
 * Kafka client (test/integration/kafka/support/clients.ts); the offset attribute comes from the
 * client's offset (a bigint on @platformatic/kafka): a number in span attributes, a decimal
 * string in log lines, which a JSON logger can write (JSON.stringify throws on a bigint).
 */
import { context, propagation, SpanKind, trace } from '@opentelemetry/api';
import type { Kafka } from 'kafkajs';
import { ack, ConsumerBase, type Disposition, InMemoryClaimer, type Logger, PermanentError, silentLogger } from '../../../src';
import { KafkaSource, KeyedProducer } from '../../../adapters/kafka';
import { createOtelObserver, injectTraceHeaders } from '../../../adapters/otel';
import { installOtel, type OtelHarness, spansNamed } from '../../unit/otel/otel-harness';
import { clients, describeEachClient } from '../kafka/support/clients';
import { FAST_GROUP, makeKafka, TopicFixture, unique } from '../kafka/support/kafka-helpers';
import { waitFor } from '../../support/wait';

describeEachClient(['kafka'], 'OpenTelemetry on the real Kafka broker', clients, (row) => {
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
    const client = row.make(`twophase-otel-${row.name}`);
    const producer = new KeyedProducer({ client }, {}, { injectContext: injectTraceHeaders });
    await producer.connect();
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
      source: new KafkaSource({ client }, { topics: [topic], groupId: unique('otel-group'), fromBeginning: true, logger: silentLogger, consumer: { ...FAST_GROUP } }),
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
        'messaging.destination.partition.id': '0',
        'kafka.offset': 0,
      });
      expect(baggage).toEqual(['acme']);
    } finally {
      await consumer.stop();
      await producer.disconnect();
    }
  });

  test('offsets 0, 1, 2: numbers in the process spans; the dead-letter log line of offset 2 serialises as JSON with the offset "2"', async () => {
    const topic = await topics.create('otel-offsets', 1);
    const client = row.make(`twophase-otel-offsets-${row.name}`);
    const producer = new KeyedProducer({ client });
    await producer.connect();
    // Every line goes through JSON.stringify, as a JSON logger writes it.
    const lines: string[] = [];
    const write = (obj: object, msg?: string) => void lines.push(JSON.stringify({ ...obj, msg }));
    const logger: Logger = { debug: write, info: write, warn: write, error: write };
    class Offsets extends ConsumerBase<{ bad?: boolean }> {
      async handle(message: { body: { bad?: boolean } }): Promise<Disposition> {
        if (message.body.bad) throw new PermanentError('offset 2 is refused');
        return ack();
      }
    }
    const consumer = new Offsets({
      name: 'otel-offsets',
      claimer: new InMemoryClaimer(),
      source: new KafkaSource({ client }, { topics: [topic], groupId: unique('otel-offsets-group'), fromBeginning: true, logger: silentLogger, consumer: { ...FAST_GROUP } }),
      logger,
      observers: [createOtelObserver()],
    });
    await consumer.start();
    try {
      await producer.send(topic, [
        { idempotencyKey: 'o-0', value: '{}' },
        { idempotencyKey: 'o-1', value: '{}' },
        { idempotencyKey: 'o-2', value: '{"bad":true}' },
      ]);
      await waitFor(() => spansNamed(otel.exporter, `process ${topic}`).length === 3, { what: 'three process spans' });
      const offsets = spansNamed(otel.exporter, `process ${topic}`).map((span) => span.attributes['kafka.offset']);
      expect([...offsets].sort()).toEqual([0, 1, 2]);
      await waitFor(() => lines.some((l) => l.includes('dead-lettered')), { what: 'the dead-letter log line' });
      const line = JSON.parse(lines.find((l) => l.includes('dead-lettered'))!) as { attributes?: { offset?: unknown; partition?: unknown } };
      expect(line.attributes).toMatchObject({ offset: '2', partition: 0 });
    } finally {
      await consumer.stop();
      await producer.disconnect();
    }
  });
});
