/**
 * Publishes sample payment requests with publisher confirms: every 4th one twice (a producer
 * retry), plus one invalid body, one unsupported currency and one negative amount, which end in
 * the dead-letter queue with their reasons.
 *
 *   npx ts-node --transpile-only examples/rabbitmq-redis/publish.ts [count]
 */
import { RabbitMqPublisher } from '../../adapters/rabbitmq';
import type { PaymentRequested } from './payments-consumer';
import { configFromEnv } from './service';

/** Publishes `count` payments (and the three bad ones); resolves with how many messages were sent. */
export async function publishSamplePayments(publisher: RabbitMqPublisher, exchange: string, count: number, runId: string): Promise<number> {
  let sent = 0;
  const send = async (body: unknown, key: string) => {
    await publisher.publish(exchange, 'payment.requested', body as object, { idempotencyKey: key });
    sent++;
  };
  for (let i = 0; i < count; i++) {
    const payment: PaymentRequested = { paymentId: `${runId}-p${i}`, account: `acct-${i % 7}`, amountCents: 100 + i, currency: 'EUR' };
    await send(payment, payment.paymentId);
    if (i % 4 === 0) await send(payment, payment.paymentId); // producer retry: same key
  }
  await send({ paymentId: `${runId}-bad-body` }, `${runId}-bad-body`);
  await send({ paymentId: `${runId}-bad-currency`, account: 'acct-1', amountCents: 100, currency: 'XXX' }, `${runId}-bad-currency`);
  await send({ paymentId: `${runId}-negative`, account: 'acct-1', amountCents: -5, currency: 'EUR' }, `${runId}-negative`);
  return sent;
}

async function main(): Promise<void> {
  const config = configFromEnv();
  const count = Number(process.argv[2] ?? 20);
  const publisher = new RabbitMqPublisher({ url: config.amqpUrl });
  await publisher.connect();
  try {
    const runId = Date.now().toString(36);
    const sent = await publishSamplePayments(publisher, config.exchange, count, runId);
    process.stdout.write(`published ${sent} messages (${count} payments, every 4th twice, 3 bad ones) to exchange "${config.exchange}", run ${runId}\n`);
  } finally {
    await publisher.close();
  }
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`publish failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  });
}
