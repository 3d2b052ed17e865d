/**
 * KafkaSource start() against topics that do not exist (real broker), on every client: a typed
 * error naming the missing source topic, with nothing created. And, on kafkajs (the only client
 * with its own log lines to route), kafkajs's log lines routed through twophase's logger at a
 * level the user chooses (kafkajsLogCreator).
 */
import { Kafka } from 'kafkajs';
import { ack, ConfigurationError, InMemoryClaimer, type Logger } from '../../../src';
import { KafkaSource, kafkajsLogCreator } from '../../../adapters/kafka';
import { describeWithServices } from '../../support/services';
import { clients, describeEachClient } from './support/clients';
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
