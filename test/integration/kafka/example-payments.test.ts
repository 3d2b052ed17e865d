/**
 * examples/kafka-redis end to end on the real Kafka and Redis: the example creates its topic and
 * dead-letter topic, every payment is charged once although every 4th was published twice, and
 * the three bad records land in `<topic>.dlq` with their reasons.
 */
import { Kafka, logLevel } from 'kafkajs';
import { Redis } from 'ioredis';
import { HEADERS, KeyedProducer, readHeader } from '../../../adapters/kafka';
import { IDEMPOTENCY_KEY_HEADER, silentLogger } from '../../../src';
import { publishSamplePayments } from '../../../examples/kafka-redis/publish';
import { configFromEnv, type KafkaPaymentsService, startKafkaPaymentsService } from '../../../examples/kafka-redis/service';
import { ensureTopics } from '../../../examples/kafka-redis/topics';
import { describeWithServices, SERVICES } from '../../support/services';
import { unique } from './support/kafka-helpers';
import { waitFor } from '../../support/wait';

describeWithServices(['kafka', 'redis'], 'examples/kafka-redis (real services)', () => {
  let kafka: Kafka;
  let service: KafkaPaymentsService | undefined;
  let redis: Redis | undefined;
  let topic = '';
  let prefix = '';

  beforeAll(() => {
    kafka = new Kafka({ clientId: 'example-kafka-test', brokers: [`${SERVICES.kafka.host}:${SERVICES.kafka.port}`], logLevel: logLevel.NOTHING });
  });

  afterEach(async () => {
    await service?.stop();
    if (redis) {
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length > 0) await redis.unlink(...keys);
      await redis.quit();
    }
    const admin = kafka.admin();
    await admin.connect();
    await admin.deleteTopics({ topics: [topic, `${topic}.dlq`], timeout: 10_000 }).catch(() => undefined);
    await admin.disconnect();
  });

  test('creates the topic and its dead-letter topic; payments are charged once each; bad records land in the DLQ with their reasons', async () => {
    topic = unique('payments');
    prefix = topic;
    const config = {
      ...configFromEnv({}),
      kafkaBrokers: [`${SERVICES.kafka.host}:${SERVICES.kafka.port}`],
      redisUrl: `redis://${SERVICES.redis.host}:${SERVICES.redis.port}`,
      topic,
      partitions: 3,
      groupId: `${topic}-group`,
      redisPrefix: prefix,
      logger: silentLogger,
    };
    expect(await ensureTopics(kafka, topic, 3)).toEqual([topic, `${topic}.dlq`]);
    expect(await ensureTopics(kafka, topic, 3)).toEqual([]); // a second run creates nothing
    redis = new Redis(config.redisUrl);
    const lines: string[] = [];
    service = await startKafkaPaymentsService({ ...config, log: (l) => lines.push(l) });
    const producer = new KeyedProducer({ kafka }, { idempotent: true });
    await producer.connect();
    const count = 24;
    const sent = await publishSamplePayments(producer, topic, count, 'run1');
    await producer.disconnect();
    expect(sent).toBe(count + count / 4 + 3);
    await waitFor(() => service!.stats().settled === sent && service!.stats().deadLettered === 3, { what: 'all settled', timeoutMs: 30_000, intervalMs: 100 });
    for (let i = 0; i < count; i++) expect(await service.ledger.writes(`run1-p${i}`)).toBe(1);
    expect(lines.filter((l) => l.startsWith('charged'))).toHaveLength(count);
    expect(lines.filter((l) => l.startsWith('duplicate'))).toHaveLength(count / 4);

    const reasons: Record<string, string | undefined> = {};
    const reader = kafka.consumer({ groupId: `${topic}-dlq-reader`, sessionTimeout: 6000, heartbeatInterval: 500, maxWaitTimeInMs: 100 });
    await reader.connect();
    await reader.subscribe({ topic: `${topic}.dlq`, fromBeginning: true });
    await reader.run({ eachMessage: async ({ message }) => void (reasons[readHeader(message.headers, IDEMPOTENCY_KEY_HEADER) ?? '?'] = readHeader(message.headers, HEADERS.reason)) });
    await waitFor(() => Object.keys(reasons).length === 3, { what: 'the three dead letters read', timeoutMs: 20_000, intervalMs: 100 });
    await reader.disconnect();
    expect(reasons).toEqual({ 'run1-bad-body': 'invalid_body', 'run1-bad-currency': 'unsupported_currency', 'run1-negative': 'permanent_error' });
  });
});
