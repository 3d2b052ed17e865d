/**
 * A RabbitMQ address nobody listens on: the publishers (and so `twophase outbox relay --rabbitmq-url`)
 * fail with an error naming the host:port they tried, the password hidden, and the refusal.
 */
import { BrokerUnavailableError, RabbitMqOutboxPublisher, RabbitMqPublisher } from '../../adapters/rabbitmq';

const URL = 'amqp://guest:sekret@127.0.0.1:1';

function recordingLogger() {
  const warnings: { obj: object; msg?: string }[] = [];
  return { warnings, logger: { debug: () => undefined, info: () => undefined, error: () => undefined, warn: (obj: object, msg?: string) => void warnings.push({ obj, msg }) } };
}

test('RabbitMqPublisher and RabbitMqOutboxPublisher name host:port (no password) and ECONNREFUSED', async () => {
  for (const make of [
    (logger: never) => ({ start: (p: RabbitMqPublisher) => p.connect(), client: new RabbitMqPublisher({ url: URL, connectTimeoutMs: 1000, reconnectDelayMs: 100, logger }) }),
    (logger: never) => ({ start: (p: RabbitMqOutboxPublisher) => p.start(), client: new RabbitMqOutboxPublisher({ url: URL, connectTimeoutMs: 1000, reconnectDelayMs: 100, logger }) }),
  ]) {
    const { warnings, logger } = recordingLogger();
    const { start, client } = make(logger as never);
    const error = (await (start as (c: unknown) => Promise<void>)(client).catch((e: unknown) => e)) as Error;
    await client.close().catch(() => undefined);
    expect(error).toBeInstanceOf(BrokerUnavailableError);
    expect(error.message).toMatch(/could not connect to RabbitMQ at amqp:\/\/guest:\*\*\*@127\.0\.0\.1:1 within 1000 ms \(last failure: connect ECONNREFUSED 127\.0\.0\.1:1\)/);
    expect(error.message).not.toMatch(/sekret/);
    expect(warnings[0]?.msg).toBe('RabbitMQ connect to amqp://guest:***@127.0.0.1:1 failed; retrying');
    expect(JSON.stringify(warnings)).not.toMatch(/sekret/);
  }
});
