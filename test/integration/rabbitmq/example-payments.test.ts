/**
 * examples/rabbitmq-redis end to end on the real RabbitMQ and Redis: every payment charged once
 * although every 4th was published twice; the three bad messages are dead-lettered with reasons.
 */
import Redis from 'ioredis';
import { HEADERS, RabbitMqPublisher, SOURCE_DEFAULTS } from '../../../adapters/rabbitmq';
import { publishSamplePayments } from '../../../examples/rabbitmq-redis/publish';
import { configFromEnv, type PaymentsService, startPaymentsService } from '../../../examples/rabbitmq-redis/service';
import { describeWithServices } from '../../support/services';
import { AMQP_URL, uniqueName } from './support/amqp';
import { Harness } from './support/harness';
import { waitFor } from '../../support/wait';

describeWithServices(['rabbitmq', 'redis'], 'examples/rabbitmq-redis (real services)', () => {
  let h: Harness;
  let service: PaymentsService | undefined;
  let publisher: RabbitMqPublisher | undefined;
  let redis: Redis | undefined;
  let prefix = '';
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await service?.stop();
    await publisher?.close();
    if (redis) {
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length > 0) await redis.unlink(...keys);
      await redis.quit();
    }
    await h.cleanup();
  });

  test('payments are charged once each; bad messages land in the DLQ with their reasons', async () => {
    const queue = uniqueName('payments');
    const exchange = `${queue}.ex`;
    h.admin.track(queue, { delayTiersMs: SOURCE_DEFAULTS.delayTiersMs, exchanges: [exchange] });
    prefix = queue.replace(/\./g, '-');
    redis = new Redis({ host: '127.0.0.1', port: Number(process.env.REDIS_PORT ?? 6379) });
    const lines: string[] = [];
    service = await startPaymentsService({ ...configFromEnv({}), amqpUrl: AMQP_URL, queue, exchange, redisPrefix: prefix, logger: h.logger, log: (l) => lines.push(l) });
    publisher = new RabbitMqPublisher({ url: AMQP_URL });
    await publisher.connect();
    const count = 24;
    const sent = await publishSamplePayments(publisher, exchange, count, 'run1');
    expect(sent).toBe(count + count / 4 + 3);
    await waitFor(() => service!.stats().acks === count + count / 4 && service!.stats().rejects === 3, { what: 'all settled', timeoutMs: 30_000 });
    for (let i = 0; i < count; i++) expect(await service.ledger.writes(`run1-p${i}`)).toBe(1);
    expect(lines.filter((l) => l.startsWith('charged'))).toHaveLength(count);
    expect(lines.filter((l) => l.startsWith('duplicate'))).toHaveLength(count / 4);
    const dead = await h.admin.drain(`${queue}.dlq`);
    const reasons = Object.fromEntries(dead.map((m) => [String(m.properties.messageId), m.properties.headers?.[HEADERS.reason]]));
    expect(reasons).toEqual({ 'run1-bad-body': 'invalid_body', 'run1-bad-currency': 'unsupported_currency', 'run1-negative': 'permanent_error' });
  });
});
