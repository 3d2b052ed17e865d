/**
 * Creates the payments topic and its dead-letter topic `<topic>.dlq` when they are missing, with
 * the same partition count. KafkaSource refuses to start when the dead-letter topic is missing
 * (`deadLetterTopicCheck: 'exists'`, the default): a poison record must have somewhere to go
 * before the first one arrives, not after.
 *
 *   npx ts-node --transpile-only examples/kafka-redis/topics.ts
 *
 * In production create both with your usual tooling (kafka-topics.sh, Terraform, …); give the
 * dead-letter topic a retention at least as long as the time you need to fix and replay.
 */
import { Kafka, logLevel } from 'kafkajs';
import { configFromEnv } from './service';

/** Creates `topic` and `<topic>.dlq` if missing; resolves with the names it created. */
export async function ensureTopics(kafka: Kafka, topic: string, partitions: number): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const missing = [topic, `${topic}.dlq`].filter((name) => !existing.has(name));
    if (missing.length > 0) {
      await admin.createTopics({ waitForLeaders: true, topics: missing.map((name) => ({ topic: name, numPartitions: partitions })) });
    }
    return missing;
  } finally {
    await admin.disconnect();
  }
}

async function main(): Promise<void> {
  const config = configFromEnv();
  const kafka = new Kafka({ clientId: 'payments-topics', brokers: [...config.kafkaBrokers], logLevel: logLevel.ERROR });
  const created = await ensureTopics(kafka, config.topic, config.partitions);
  process.stdout.write(created.length > 0 ? `created ${created.join(', ')} (${config.partitions} partitions)\n` : `${config.topic} and ${config.topic}.dlq exist\n`);
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`creating the topics failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  });
}
