/**
 * TTL policy per message type on the real Redis (issue #16 part 2): one consumer on the
 * in-process broker routes payments and notifications; the Redis record of each completed key
 * expires after its type's doneTtlMs (PTTL read from Redis), and a type whose TTL breaks the
 * policy is refused at construction.
 */
import type { Redis } from 'ioredis';
import { ack, ConfigurationError, ConsumerBase, type Disposition, type Message, TtlPolicy, type TypeTtls } from '../../../src';
import { MemoryBroker, MemorySource } from '../../../adapters/memory';
import { RedisClaimer, recordKey } from '../../../adapters/redis';
import { describeWithServices } from '../../support/services';
import { connectRedis, deleteMatching, silentLogger, uniquePrefix} from './support/redis-helpers';
import { waitFor } from '../../support/wait';

const DAY = 24 * 60 * 60 * 1000;

class Handled extends ConsumerBase<unknown> {
  readonly keys: string[] = [];
  async handle(message: Message<unknown>): Promise<Disposition> {
    this.keys.push(message.key);
    return ack({ ok: true });
  }
}

describeWithServices(['redis'], 'TTL policy per message type (real Redis)', () => {
  let redis: Redis;
  let prefix: string;
  beforeEach(async () => {
    redis = await connectRedis();
    prefix = uniquePrefix('ttl');
  });
  afterEach(async () => {
    await deleteMatching(redis, `${prefix}*`);
    await redis.quit();
  });

  const policy = new TtlPolicy({ minDoneTtlMs: DAY, maxDoneTtlMs: 365 * DAY });
  const typeTtls: TypeTtls = {
    typeOf: (d) => (typeof d.headers.type === 'string' ? d.headers.type : undefined),
    types: { payment: { doneTtlMs: 365 * DAY }, notification: { doneTtlMs: DAY } },
  };

  test('the done record of each key lives for its type’s doneTtlMs (PTTL); an unlisted type gets the consumer’s', async () => {
    const broker = new MemoryBroker();
    const consumer = new Handled({
      name: 'mixed',
      claimer: new RedisClaimer({ redis, logger: silentLogger }, { prefix }),
      source: new MemorySource({ broker, queue: 'mixed' }),
      logger: silentLogger,
      ttlPolicy: policy,
      doneTtlMs: 7 * DAY,
      typeTtls,
    });
    await consumer.start();
    try {
      for (const [key, type] of [['p-1', 'payment'], ['n-1', 'notification'], ['x-1', undefined]] as const) {
        broker.publish('mixed', { body: '{}', headers: { 'idempotency-key': key, ...(type ? { type } : {}) } });
      }
      await waitFor(() => consumer.keys.length === 3 && broker.isDrained('mixed'));
    } finally {
      await consumer.stop();
    }
    const pttl = async (key: string) => redis.pttl(recordKey(prefix, `mixed:${key}`));
    const slack = 60_000; // the time since the commit, with a wide margin
    const payment = await pttl('p-1');
    const notification = await pttl('n-1');
    const other = await pttl('x-1');
    expect(payment).toBeLessThanOrEqual(365 * DAY);
    expect(payment).toBeGreaterThan(365 * DAY - slack);
    expect(notification).toBeLessThanOrEqual(DAY);
    expect(notification).toBeGreaterThan(DAY - slack);
    expect(other).toBeLessThanOrEqual(7 * DAY);
    expect(other).toBeGreaterThan(7 * DAY - slack);
  });

  test('a notification type kept longer than the policy allows is refused before anything is claimed', () => {
    const strict = new TtlPolicy({ maxDoneTtlMs: 30 * DAY });
    expect(
      () =>
        new Handled({
          name: 'notify',
          claimer: new RedisClaimer({ redis, logger: silentLogger }, { prefix }),
          source: new MemorySource({ broker: new MemoryBroker(), queue: 'q' }),
          logger: silentLogger,
          ttlPolicy: strict,
          doneTtlMs: DAY,
          typeTtls: { typeOf: typeTtls.typeOf, types: { newsletter: { doneTtlMs: 365 * DAY } } },
        }),
    ).toThrow(ConfigurationError);
  });
});
