// Readiness probe for the dev broker: succeeds once a real kafkajs client can
// connect, read cluster metadata and list topics.
//
//   node scripts/kafka/check.mjs [brokers=127.0.0.1:9092] [timeoutSeconds=60]
//
// Exit codes: 0 ready, 1 not ready before the deadline, 3 kafkajs not installed
// (start.sh then falls back to a JVM-based probe).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let kafkajs;
try {
  kafkajs = require('kafkajs');
} catch {
  console.error('[kafka] kafkajs is not installed (run npm ci); cannot probe with it');
  process.exit(3);
}
const { Kafka, logLevel } = kafkajs;

const brokers = (process.argv[2] ?? '127.0.0.1:9092').split(',');
const timeoutMs = Number(process.argv[3] ?? 60) * 1000;
const deadline = Date.now() + timeoutMs;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let lastError;
while (Date.now() < deadline) {
  const kafka = new Kafka({
    clientId: 'twophase-kafka-check',
    brokers,
    logLevel: logLevel.NOTHING,
    connectionTimeout: 2000,
    requestTimeout: 5000,
    retry: { retries: 0 },
  });
  const admin = kafka.admin();
  try {
    await admin.connect();
    const cluster = await admin.describeCluster();
    await admin.listTopics();
    console.log(
      `[kafka] ready: cluster ${cluster.clusterId}, controller ${cluster.controller}, ` +
        `brokers ${cluster.brokers.map((b) => `${b.host}:${b.port}`).join(',')}`,
    );
    await admin.disconnect();
    process.exit(0);
  } catch (err) {
    lastError = err;
    await admin.disconnect().catch(() => {});
    await sleep(500);
  }
}
console.error(`[kafka] not ready after ${timeoutMs / 1000}s: ${lastError?.message ?? 'no attempt'}`);
process.exit(1);
