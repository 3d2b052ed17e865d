/**
 * The consumer's start line with a PostgresClaimer names the claimer's mode and schema (through
 * the claimer's own `describe()`: the core knows no PostgreSQL).
 */
import { ack } from '../../../src';
import { MemoryBroker, MemorySource } from '../../../adapters/memory';
import { drizzle } from 'drizzle-orm/node-postgres';
import { PostgresClaimer } from '../../../adapters/postgres';
import { drizzleTransactions } from '../../../adapters/postgres/orm/drizzle';
import { describeWithServices } from '../../support/services';
import { InboxConsumer } from './support/inbox-fixture';
import { freshSchema, pgUrl, type SchemaFixture } from './support/pg-helpers';
import { GatedClaimer } from '../../../adapters/gated';
import { RedisClaimer } from '../../../adapters/redis';
import { connectRedis } from '../redis/support/redis-helpers';

describeWithServices(['postgres', 'redis'], 'consumer start line with a PostgresClaimer', () => {
  let f: SchemaFixture;
  beforeEach(async () => {
    f = await freshSchema('startline');
  });
  afterEach(async () => {
    await f.cleanup();
  });

  test.each(['standalone', 'transactional'] as const)('%s: one info line naming the mode and the schema', async (mode) => {
    const infos: { obj: Record<string, unknown>; msg?: string }[] = [];
    const logger = { debug: () => undefined, warn: () => undefined, error: () => undefined, info: (obj: object, msg?: string) => void infos.push({ obj: obj as Record<string, unknown>, msg }) };
    const claimer = new PostgresClaimer({ pool: f.pool, logger }, { schema: f.schema, mode });
    const consumer = new InboxConsumer(
      { name: 'orders', claimer, source: new MemorySource({ broker: new MemoryBroker(), queue: 'orders' }), leaseTtlMs: 5000, doneTtlMs: 60_000, concurrency: 2, logger },
      async () => ack(),
    );
    await consumer.start();
    await consumer.stop();
    const started = infos.filter((l) => l.msg === 'twophase: consumer started');
    expect(started).toHaveLength(1);
    expect(started[0]!.obj).toMatchObject({ consumer: 'orders', claimer: 'distributed', claimerDetails: { store: 'postgresql', mode, schema: f.schema } });
  });

  test.each(['standalone', 'transactional'] as const)('GatedClaimer (Redis gate, %s truth): the line names both parts, the truth\'s mode among them', async (mode) => {
    const infos: { obj: Record<string, unknown>; msg?: string }[] = [];
    const logger = { debug: () => undefined, warn: () => undefined, error: () => undefined, info: (obj: object, msg?: string) => void infos.push({ obj: obj as Record<string, unknown>, msg }) };
    const redis = await connectRedis();
    try {
      const claimer = new GatedClaimer({ gate: new RedisClaimer({ redis, logger }, { prefix: 'startline' }), truth: new PostgresClaimer({ pool: f.pool, logger }, { schema: f.schema, mode }), logger });
      const consumer = new InboxConsumer(
        { name: 'orders', claimer, source: new MemorySource({ broker: new MemoryBroker(), queue: 'orders' }), leaseTtlMs: 5000, doneTtlMs: 60_000, concurrency: 2, logger },
        async () => ack(),
      );
      await consumer.start();
      await consumer.stop();
    } finally {
      redis.disconnect();
    }
    const started = infos.filter((l) => l.msg === 'twophase: consumer started');
    expect(started).toHaveLength(1);
    expect(started[0]!.obj).toMatchObject({
      claimer: 'distributed',
      claimerDetails: { store: 'gated', gate: 'redis', gatePrefix: 'startline', truth: 'postgresql', truthMode: mode, truthSchema: f.schema },
    });
  });

  test('transactional with a pool max below concurrency: one warning at start naming both numbers and the fix; none when the pool is large enough or in standalone mode', async () => {
    const { Pool } = await import('pg');
    const small = new Pool({ connectionString: pgUrl(), max: 2 });
    try {
      const run = async (pool: InstanceType<typeof Pool>, mode: 'standalone' | 'transactional', concurrency: number) => {
        const warnings: { obj: object; msg?: string }[] = [];
        const logger = { debug: () => undefined, info: () => undefined, error: () => undefined, warn: (obj: object, msg?: string) => void warnings.push({ obj, msg }) };
        const consumer = new InboxConsumer(
          { name: 'orders', claimer: new PostgresClaimer({ pool, logger }, { schema: f.schema, mode }), source: new MemorySource({ broker: new MemoryBroker(), queue: 'orders' }), leaseTtlMs: 5000, doneTtlMs: 60_000, concurrency, logger },
          async () => ack(),
        );
        await consumer.start();
        await consumer.stop();
        return warnings.filter((w) => /pg Pool/.test(w.msg ?? ''));
      };
      const warned = await run(small, 'transactional', 8);
      expect(warned).toHaveLength(1);
      expect(warned[0]!.msg).toMatch(/pg Pool's max is 2 but the consumer's concurrency is 8; each delivery in flight holds a pool client for its whole transaction.*Raise the pool's max to at least 8 or lower concurrency to 2/);
      expect(await run(small, 'transactional', 2)).toEqual([]);
      expect(await run(small, 'standalone', 8)).toEqual([]);
    } finally {
      await small.end();
    }
  });

  test("a transaction port whose library sends through another pool than the claimer's: one warning at start naming the library and the fix; on the same pool none, unless the pool is smaller than the concurrency", async () => {
    const { Pool } = await import('pg');
    const other = new Pool({ connectionString: pgUrl(), max: 2 });
    try {
      const run = async (claimerPool: InstanceType<typeof Pool>, libraryPool: InstanceType<typeof Pool>, concurrency = 2) => {
        const warnings: { obj: object; msg?: string }[] = [];
        const logger = { debug: () => undefined, info: () => undefined, error: () => undefined, warn: (obj: object, msg?: string) => void warnings.push({ obj, msg }) };
        const claimer = new PostgresClaimer({ pool: claimerPool, logger, transactions: drizzleTransactions(drizzle(libraryPool)) }, { schema: f.schema, mode: 'transactional' });
        const consumer = new InboxConsumer(
          { name: 'orders', claimer: claimer as never, source: new MemorySource({ broker: new MemoryBroker(), queue: 'orders' }), leaseTtlMs: 5000, doneTtlMs: 60_000, concurrency, logger },
          async () => ack(),
        );
        await consumer.start();
        await consumer.stop();
        return warnings.filter((w) => /pg Pool/.test(w.msg ?? ''));
      };
      const warned = await run(f.pool, other);
      expect(warned).toHaveLength(1);
      expect(warned[0]!.obj).toMatchObject({ consumer: 'orders' });
      expect(warned[0]!.msg).toMatch(/^PostgresClaimer: drizzle sends through another pg Pool than the claimer's, so each claim runs inside drizzle's own transaction.*give the claimer the Pool the library sends through/);
      expect(await run(f.pool, f.pool)).toEqual([]);
      // On the library's own pool the claim holds a client of it, as without a port: the pool-size check applies.
      const small = await run(other, other, 8);
      expect(small).toHaveLength(1);
      expect(small[0]!.msg).toMatch(/pg Pool's max is 2 but the consumer's concurrency is 8.*Raise the pool's max to at least 8, plus the connections drizzle's calls outside ctx.transaction take, or lower concurrency to 2/);
    } finally {
      await other.end();
    }
  });
});
