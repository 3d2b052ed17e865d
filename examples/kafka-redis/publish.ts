/**
 * Publishes sample payment requests with KeyedProducer (`twophase/kafka`): each record carries
 * the payment id as its idempotency key and as its record key, so every copy of a payment lands
 * in the same partition. Every 4th payment is sent twice (a producer retry), plus one invalid
 * body, one unsupported currency and one negative amount, which end in `<topic>.dlq`.
 *
 *   npx ts-node --transpile-only examples/kafka-redis/publish.ts [count]
 */
import { Kafka, logLevel } from 'kafkajs';
import { KeyedProducer } from '../../adapters/kafka';
import type { PaymentRequested } from '../rabbitmq-redis/payments-consumer';
import { configFromEnv } from './service';

/** Publishes `count` payments (and the three bad ones) to `topic`; resolves with how many records were sent. */
export async function publishSamplePayments(producer: KeyedProducer, topic: string, count: number, runId: string): Promise<number> {
  const records: { idempotencyKey: string; value: string }[] = [];
  const add = (body: unknown, key: string) => records.push({ idempotencyKey: key, value: JSON.stringify(body) });
  for (let i = 0; i < count; i++) {
    const payment: PaymentRequested = { paymentId: `${runId}-p${i}`, account: `acct-${i % 7}`, amountCents: 100 + i, currency: 'EUR' };
    add(payment, payment.paymentId);
    if (i % 4 === 0) add(payment, payment.paymentId); // producer retry: same key
  }
  add({ paymentId: `${runId}-bad-body` }, `${runId}-bad-body`);
  add({ paymentId: `${runId}-bad-currency`, account: 'acct-1', amountCents: 100, currency: 'XXX' }, `${runId}-bad-currency`);
  add({ paymentId: `${runId}-negative`, account: 'acct-1', amountCents: -5, currency: 'EUR' }, `${runId}-negative`);
  await producer.send(topic, records);
  return records.length;
}

async function main(): Promise<void> {
  const config = configFromEnv();
  const count = Number(process.argv[2] ?? 20);
  const kafka = new Kafka({ clientId: 'payments-publisher', brokers: [...config.kafkaBrokers], logLevel: logLevel.ERROR });
  const producer = new KeyedProducer({ kafka }, { idempotent: true, allowAutoTopicCreation: false });
  await producer.connect();
  try {
    const runId = Date.now().toString(36);
    const sent = await publishSamplePayments(producer, config.topic, count, runId);
    process.stdout.write(`published ${sent} records (${count} payments, every 4th twice, 3 bad ones) to "${config.topic}", run ${runId}\n`);
  } finally {
    await producer.disconnect();
  }
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`publish failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  });
}
