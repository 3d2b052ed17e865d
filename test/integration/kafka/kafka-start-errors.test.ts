/**
 * KafkaSource start() against topics that do not exist (real broker), on every client: a typed
 * error naming the missing source topic, with nothing created. And, on kafkajs (the only client
 * with its own log lines to route), kafkajs's log lines routed through twophase's logger at a
 * level the user chooses (kafkajsLogCreator). And, on every client, the start-up line of
 * `fromBeginning: false` naming the partitions whose records the group skips.
 */
import { Kafka } from 'kafkajs';
import { ack, ConfigurationError, InMemoryClaimer, type Logger } from '../../../src';
import { KafkaSource, kafkajsLogCreator } from '../../../adapters/kafka';
import { describeWithServices } from '../../support/services';
import { clients, describeEachClient } from './support/clients';
import { waitFor } from '../../support/wait';
import { BROKERS, FAST_GROUP, makeKafka, TestConsumer, TopicFixture, unique } from './support/kafka-helpers';

function capturingLogger(): Logger & { lines: { level: string; msg: string; obj: object }[] } {
  const lines: { level: string; msg: string; obj: object }[] = [];
  const push = (level: string) => (obj: object, msg?: string) => void lines.push({ level, msg: msg ?? '', obj });
  return { lines, debug: push('debug'), info: push('info'), warn: push('warn'), error: push('error') };
}

describeEachClient(['kafka'], 'KafkaSource start(): missing topics (real broker)', clients, (row) => {
  const kafka = makeKafka('twophase-start-errors');
  const client = row.make(`twophase-start-errors-${row.name}`);

  for (const check of ['create', 'exists'] as const) {
    test(`deadLetterTopicCheck '${check}' and no source topic: ConfigurationError naming the topic, and no dead-letter topic created`, async () => {
      const missing = unique('no-such-topic');
      const source = new KafkaSource({ client }, { topics: [missing], groupId: unique('group'), deadLetterTopicCheck: check, consumer: FAST_GROUP, logger: capturingLogger() });
      const consumer = new TestConsumer({ name: 'missing-topic', claimer: new InMemoryClaimer(), source }, async () => ack());
      const error = await consumer.start().then(
        () => undefined,
        (e: unknown) => e,
      );
      await consumer.stop().catch(() => undefined);
      expect(error).toBeInstanceOf(ConfigurationError);
      expect((error as Error).message).toMatch(new RegExp(`source topic\\(s\\) missing: "${missing}"`));
      const admin = kafka.admin();
      await admin.connect();
      try {
        expect(await admin.listTopics()).not.toContain(`${missing}.dlq`);
      } finally {
        await admin.disconnect();
      }
    });
  }

  test('fromBeginning: false and a group with no committed offset: one info line names the partitions holding records, their count and the option; none once the group has committed', async () => {
    const topics = new TopicFixture(kafka);
    try {
      const topic = await topics.create('from-end', 3);
      const producer = kafka.producer();
      await producer.connect();
      await producer.send({ topic, messages: [0, 0, 2].map((partition, i) => ({ partition, key: `k${i}`, value: JSON.stringify({ id: `k${i}` }) })) });
      await producer.disconnect();
      const groupId = unique('from-end-group');
      let handled = 0;
      const startAndStop = async (fromBeginning: boolean, before?: () => Promise<unknown>) => {
        const logger = capturingLogger();
        const source = new KafkaSource({ client }, { topics: [topic], groupId, fromBeginning, consumer: FAST_GROUP, logger });
        const consumer = new TestConsumer({ name: groupId, claimer: new InMemoryClaimer(), source, logger }, async () => {
          handled += 1;
          return ack();
        });
        await consumer.start();
        await before?.();
        await consumer.stop();
        return logger.lines.filter((l) => l.msg.includes('has no committed offset'));
      };
      const lines = await startAndStop(false);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({ level: 'info', obj: { groupId, topic, partitions: [0, 2], records: '3', fromBeginning: false } });
      expect(lines[0]!.msg).toBe(
        `twophase/kafka: group ${groupId} has no committed offset for ${topic} partitions 0, 2 (3 records in them): with fromBeginning: false they start at the log end, so those records are skipped; set fromBeginning: true to read them`,
      );
      // fromBeginning: true reads them (and commits): no line then, nor at a later start with false.
      expect(handled).toBe(0);
      expect(await startAndStop(true, () => waitFor(() => handled === 3, { what: 'the three records handled' }))).toEqual([]);
      expect(await startAndStop(false)).toEqual([]);
    } finally {
      await topics.destroy();
    }
  });
});

describeWithServices(['kafka'], 'KafkaSource start(): kafkajs log lines (real broker)', () => {
  const kafka = makeKafka('twophase-start-errors-logs');
  const topics = new TopicFixture(kafka);
  afterAll(async () => {
    await topics.destroy();
  });

  test('kafkajsLogCreator routes kafkajs lines through the twophase logger: errors only by default, INFO when asked, nothing on the console', async () => {
    const topic = await topics.create('logs', 1);
    const consoleLines: string[] = [];
    const spies = (['log', 'info', 'warn', 'error'] as const).map((m) => jest.spyOn(console, m).mockImplementation((...args: unknown[]) => void consoleLines.push(args.join(' '))));
    try {
      for (const level of [undefined, 'info'] as const) {
        const logger = capturingLogger();
        const client = new Kafka({ clientId: 'twophase-logs', brokers: BROKERS, logCreator: kafkajsLogCreator(logger, level ? { level } : undefined) });
        const source = new KafkaSource({ kafka: client }, { topics: [topic], groupId: unique('logs'), fromBeginning: true, consumer: FAST_GROUP, logger });
        const consumer = new TestConsumer({ name: 'logs', claimer: new InMemoryClaimer(), source, logger }, async () => ack());
        await consumer.start();
        await consumer.stop();
        const kafkajsLines = logger.lines.filter((l) => l.msg.startsWith('kafkajs'));
        if (level === undefined) {
          expect(kafkajsLines.filter((l) => l.level === 'info' || l.level === 'warn')).toEqual([]);
        } else {
          expect(kafkajsLines.some((l) => l.level === 'info' && /kafkajs \[Consumer\] Starting/.test(l.msg))).toBe(true);
          expect(kafkajsLines.find((l) => l.level === 'info')!.obj).toMatchObject({ kafkajs: { namespace: 'Consumer' } });
        }
      }
      expect(consoleLines.filter((l) => /kafkajs|Consumer|groupId/i.test(l))).toEqual([]);
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  });
});
