/**
 * The source conformance suite against KafkaSource on the shared broker (127.0.0.1:9092), once per
 * Kafka client (test/integration/kafka/support/clients.ts): one fresh single-partition topic (and
 * its `.dlq`) per test, one consumer group per test. Topics are made, written and read back with
 * kafkajs (test infrastructure); the source under test runs on the row's client.
 */
import type { Producer } from 'kafkajs';
import { HEADERS, KafkaSource } from '../../adapters/kafka';
import { type MessageSource, silentLogger } from '../../src';
import { clients, describeEachClient } from '../integration/kafka/support/clients';
import { FAST_GROUP, makeKafka, TopicFixture, unique } from '../integration/kafka/support/kafka-helpers';
import { waitFor } from '../support/wait';
import { describeSourceConformance, type ReadDeadLetter } from './source-conformance';

describeEachClient(['kafka'], 'KafkaSource conformance on 127.0.0.1:9092', clients, (row) => {
  const kafka = makeKafka('twophase-source-conformance');
  const client = row.make(`twophase-source-conformance-${row.name}`);
  let producer: Producer;
  beforeAll(async () => {
    producer = kafka.producer();
    await producer.connect();
  });
  afterAll(async () => {
    await producer?.disconnect();
  });

  /** Reads every record of `topic` (one partition) up to its high watermark. */
  async function readAll(fixture: TopicFixture, topic: string, groups: string[]): Promise<ReadDeadLetter[]> {
    const high = Number((await fixture.highWatermarks(topic))[0] ?? '0');
    if (high === 0) return [];
    const read: ReadDeadLetter[] = [];
    const groupId = unique('conf-dlq-reader');
    groups.push(groupId);
    const reader = kafka.consumer({ groupId, ...FAST_GROUP });
    await reader.connect();
    try {
      await reader.subscribe({ topics: [topic], fromBeginning: true });
      await reader.run({
        eachMessage: async ({ message }) => {
          read.push({ body: message.value?.toString('utf8') ?? '', reason: String(message.headers?.[HEADERS.reason] ?? '') });
        },
      });
      await waitFor(() => read.length >= high, { what: `${high} records of ${topic}`, timeoutMs: 30_000 });
    } finally {
      await reader.disconnect();
    }
    return read;
  }

  describeSourceConformance('KafkaSource', async () => {
    const fixture = new TopicFixture(kafka);
    const topic = await fixture.create('src-conf', 1);
    const groupId = unique('src-conf-group');
    const groups = [groupId];
    return {
      createSource: () => new KafkaSource({ client }, { topics: [topic], groupId, fromBeginning: true, commitIntervalMs: 200, logger: silentLogger, consumer: { ...FAST_GROUP } }),
      publish: async (body) => {
        await producer.send({ topic, messages: [{ value: body }] });
      },
      deadLetters: () => readAll(fixture, `${topic}.dlq`, groups),
      // Stops fetching and leaves the group without committing anything.
      crash: (source: MessageSource) => (source as KafkaSource).crash(),
      requeueDelayMs: 500,
      flagsRedelivery: false,
      deliveryTimeoutMs: 30_000,
      cleanup: async () => {
        const admin = await fixture.connect();
        await admin.deleteGroups(groups).catch(() => undefined);
        await fixture.destroy();
      },
    };
  });
});
