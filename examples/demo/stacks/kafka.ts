/**
 * The demo on Kafka (kafkajs via twophase/kafka). Creates its own topic and the dead-letter topic
 * `<topic>.dlq` with the same partition count (KafkaSource checks at start that it exists), runs
 * every worker as a member of one consumer group, and deletes both topics and the group at the
 * end. "Crashing" a worker stops its member at once without committing: the records it had not
 * committed are delivered again to the partition's next owner.
 *
 * TWOPHASE_KAFKA_BROKERS (default 127.0.0.1:9092) points elsewhere.
 */
import { Kafka, logLevel } from 'kafkajs';
import { HEADERS, KafkaSource, KeyedProducer, readHeader } from '../../../adapters/kafka';
import { type Claimer, IDEMPOTENCY_KEY_HEADER, silentLogger } from '../../../src';
import type { CrashableSource, DemoMessage, DemoStack } from '../stack';

/** Partitions of the demo topic: enough for every worker to own some. */
const PARTITIONS = 8;
/** Short group timeouts so a rebalance after a crash takes a second or two, not the defaults' 30 s and more. */
const GROUP_TIMEOUTS = { sessionTimeout: 6000, rebalanceTimeout: 8000, heartbeatInterval: 500, maxWaitTimeInMs: 100 } as const;

export interface KafkaStackInput {
  readonly run: string;
  readonly brokers: readonly string[];
  readonly claimer: Claimer | undefined;
  readonly inbox?: DemoStack['inbox'];
  readonly replicas: number;
  readonly label: string;
  closeClaimer(): Promise<void>;
}

export async function kafkaStack(input: KafkaStackInput): Promise<DemoStack> {
  const topic = `twophase-demo-${input.run}`;
  const dlq = `${topic}.dlq`;
  const groupId = `twophase-demo-${input.run}`;
  // kafkajs logs at INFO by default; the demo keeps its output to its own lines.
  const kafka = new Kafka({ clientId: groupId, brokers: [...input.brokers], logLevel: logLevel.NOTHING, retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2000 } });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    waitForLeaders: true,
    topics: [
      { topic, numPartitions: PARTITIONS },
      { topic: dlq, numPartitions: PARTITIONS },
    ],
  });
  const producer = new KeyedProducer({ kafka });
  await producer.connect();

  const sumOffsets = (offsets: readonly { offset: string }[]) => offsets.reduce((n, p) => n + Math.max(0, Number(p.offset)), 0);
  const highWatermarks = async (name: string) => sumOffsets((await admin.fetchTopicOffsets(name)).map((p) => ({ offset: p.high })));

  return {
    label: input.label,
    claimer: input.claimer,
    ...(input.inbox ? { inbox: input.inbox } : {}),
    replicas: input.replicas,
    makeSource: (): CrashableSource => {
      const source = new KafkaSource(
        { kafka },
        { topics: [topic], groupId, fromBeginning: true, commitIntervalMs: 200, logger: silentLogger, consumer: GROUP_TIMEOUTS, producer: { allowAutoTopicCreation: false } },
      );
      // KafkaSource has crash() of its own; it ignores later settles (no offset, no dead letter).
      return Object.assign(source, { forwardSettlesAfterCrash: true });
    },
    publish: async (messages: readonly DemoMessage[]) => {
      const keyed = messages.filter((m): m is DemoMessage & { key: string } => m.key !== undefined);
      for (let i = 0; i < keyed.length; i += 500) {
        await producer.send(
          topic,
          keyed.slice(i, i + 500).map((m) => ({ idempotencyKey: m.key, value: m.body })),
        );
      }
      const keyless = messages.filter((m) => m.key === undefined);
      if (keyless.length > 0) {
        // KeyedProducer always sets a key; a record without one needs a plain producer.
        const plain = kafka.producer({ allowAutoTopicCreation: false });
        await plain.connect();
        await plain.send({ topic, messages: keyless.map((m) => ({ value: m.body })) });
        await plain.disconnect();
      }
    },
    waiting: async () => {
      // Records the group has not committed yet (a settled record counts once its offset is committed).
      const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
      return (await highWatermarks(topic)) - sumOffsets(committed?.partitions ?? []);
    },
    deadLetters: async () => {
      const total = await highWatermarks(dlq);
      const out: { key: string | undefined; reason: string }[] = [];
      if (total === 0) return out;
      const reader = kafka.consumer({ groupId: `${groupId}-dlq-reader`, ...GROUP_TIMEOUTS });
      await reader.connect();
      await reader.subscribe({ topic: dlq, fromBeginning: true });
      await new Promise<void>((resolve, reject) => {
        reader
          .run({
            eachMessage: async ({ message }) => {
              out.push({ key: readHeader(message.headers, IDEMPOTENCY_KEY_HEADER), reason: readHeader(message.headers, HEADERS.reason) ?? '(none)' });
              if (out.length >= total) resolve();
            },
          })
          .catch(reject);
      });
      await reader.disconnect();
      return out;
    },
    close: async () => {
      await producer.disconnect();
      await admin.deleteTopics({ topics: [topic, dlq], timeout: 10_000 }).catch(() => undefined);
      await admin.deleteGroups([groupId, `${groupId}-dlq-reader`]).catch(() => undefined);
      await admin.disconnect();
      await input.closeClaimer();
    },
  };
}
