// End-to-end smoke test against the dev broker (npm run kafka:start first):
// creates a topic, produces, consumes in a consumer group with manual offset
// commits, checks the committed offsets through the admin API, then checks that
// a new member of the same group resumes after the committed offset.
//
//   node scripts/kafka/smoke.mjs [brokers=127.0.0.1:9092]
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';

const require = createRequire(import.meta.url);
const { Kafka, Partitioners, logLevel } = require('kafkajs');

const brokers = (process.argv[2] ?? '127.0.0.1:9092').split(',');
const run = randomUUID().slice(0, 8);
const topic = `twophase-smoke-${run}`;
const groupId = `twophase-smoke-group-${run}`;
const kafka = new Kafka({ clientId: 'twophase-smoke', brokers, logLevel: logLevel.WARN });
const t0 = Date.now();
const step = (msg) => console.log(`[smoke +${((Date.now() - t0) / 1000).toFixed(2)}s] ${msg}`);
const assert = (cond, msg) => {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
};

async function consume(expected, label) {
  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 1000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${label}: timed out, got ${seen.length}/${expected}`)), 30000);
    consumer
      .run({
        autoCommit: false,
        eachMessage: async ({ topic: t, partition, message }) => {
          seen.push(message.value.toString());
          await consumer.commitOffsets([{ topic: t, partition, offset: (BigInt(message.offset) + 1n).toString() }]);
          if (seen.length === expected) {
            clearTimeout(timer);
            resolve();
          }
        },
      })
      .catch(reject);
  });
  await consumer.disconnect();
  return seen;
}

const admin = kafka.admin();
const producer = kafka.producer({
  allowAutoTopicCreation: false,
  idempotent: true,
  maxInFlightRequests: 1,
  // Explicit choice; without it kafkajs 2.x warns that its default partitioner changed.
  createPartitioner: Partitioners.DefaultPartitioner,
});
try {
  await admin.connect();
  const created = await admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor: 1 }], waitForLeaders: true });
  assert(created, 'createTopics returned false');
  step(`created topic ${topic} (2 partitions)`);

  await producer.connect();
  const first = Array.from({ length: 10 }, (_, i) => ({ key: `k${i}`, value: `first-${i}` }));
  await producer.send({ topic, acks: -1, messages: first });
  step('produced 10 messages (idempotent producer, acks=all)');

  const got1 = await consume(10, 'first consumer');
  assert(new Set(got1).size === 10, `first consumer saw ${got1.length} messages`);
  step(`group ${groupId}: consumed ${got1.length} messages, committed each offset manually`);

  const offsets = await admin.fetchOffsets({ groupId, topics: [topic] });
  const committed = offsets[0].partitions.reduce((n, p) => n + Number(p.offset), 0);
  assert(committed === 10, `committed offsets sum to ${committed}, expected 10`);
  step(`admin.fetchOffsets: ${offsets[0].partitions.map((p) => `p${p.partition}=${p.offset}`).join(' ')}`);

  const second = Array.from({ length: 5 }, (_, i) => ({ key: `k${i}`, value: `second-${i}` }));
  await producer.send({ topic, acks: -1, messages: second });
  const got2 = await consume(5, 'second consumer');
  assert(got2.every((v) => v.startsWith('second-')), `resumed consumer re-read old messages: ${got2}`);
  step('a new group member resumed after the committed offsets (5 new messages, no redelivery)');

  const groups = await admin.describeGroups([groupId]);
  step(`group state after disconnect: ${groups.groups[0].state}`);
  await admin.deleteTopics({ topics: [topic] });
  step('deleted topic; smoke test passed');
} finally {
  await producer.disconnect().catch(() => {});
  await admin.disconnect().catch(() => {});
}
