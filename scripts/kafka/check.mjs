// Readiness probe for the dev broker: succeeds once a real kafkajs client can
// connect, read cluster metadata and list topics.
//
//   node scripts/kafka/check.mjs [brokers=127.0.0.1:9092] [timeoutSeconds=60] [--warm]
//
// With --warm it then creates the internal group/transaction state (see warmUp).
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
const warm = process.argv.includes('--warm');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A fresh broker creates __consumer_offsets on the first group lookup and
// __transaction_state / a producer-id block on the first InitProducerId; until
// then kafkajs logs "group coordinator is not available" / "coordinator is
// loading" errors and retries. Trigger both here so tests start on a warm broker.
async function warmUp() {
  const started = Date.now();
  const kafka = new Kafka({ clientId: 'twophase-kafka-warmup', brokers, logLevel: logLevel.NOTHING });
  // Retries on our side too: right after startup the broker may also answer
  // NOT_COORDINATOR, which kafkajs does not retry everywhere.
  const retrying = async (fn) => {
    const giveUp = Date.now() + 20000;
    for (;;) {
      try {
        return await fn();
      } catch (err) {
        if (Date.now() > giveUp) throw err;
        await sleep(100);
      }
    }
  };
  const groupCoordinator = () =>
    retrying(async () => {
      const admin = kafka.admin();
      try {
        await admin.connect();
        await admin.fetchOffsets({ groupId: 'twophase-kafka-warmup' });
      } finally {
        await admin.disconnect().catch(() => {});
      }
    });
  const transactionCoordinator = () =>
    retrying(async () => {
      const producer = kafka.producer({ transactionalId: 'twophase-kafka-warmup', idempotent: true, maxInFlightRequests: 1 });
      try {
        await producer.connect();
        const txn = await producer.transaction();
        await txn.abort();
      } finally {
        await producer.disconnect().catch(() => {});
      }
    });
  try {
    await Promise.all([groupCoordinator(), transactionCoordinator()]);
    console.log(`[kafka] warmed up group + transaction coordinators in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  } catch (err) {
    console.error(`[kafka] warning: warm-up failed (${err.message}); the broker is up but its first group/producer calls may be slow`);
  }
}

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
    if (warm) await warmUp();
    process.exit(0);
  } catch (err) {
    lastError = err;
    await admin.disconnect().catch(() => {});
    await sleep(500);
  }
}
console.error(`[kafka] not ready after ${timeoutMs / 1000}s: ${lastError?.message ?? 'no attempt'}`);
process.exit(1);
