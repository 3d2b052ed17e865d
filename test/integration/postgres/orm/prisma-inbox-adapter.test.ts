/**
 * `inboxAdapter(new PrismaPg(pool))` on the shared PostgreSQL, the claimer on the same pool: the
 * claim runs as without a port (what is sent, on which client), Prisma's own transactions on the
 * pool stay Prisma's, and every way the path can be set up wrong fails with a ConfigurationError
 * that leaves nothing open.
 */
import { PrismaPg } from '@prisma/adapter-pg';
import { Pool } from 'pg';
import { ack, ConfigurationError, runOnce } from '../../../../src';
import { MemoryBroker, MemorySource } from '../../../../adapters/memory';
import { PostgresClaimer, TransactionAbortedError, type TransactionReceipt } from '../../../../adapters/postgres';
import { type InboxAdapter, inboxAdapter, prismaTransactions } from '../../../../adapters/postgres/orm/prisma';
import { PrismaClient } from '../../../support/prisma/generated/client';
import { describeWithServices } from '../../../support/services';
import { silentLogger } from '../../redis/support/redis-helpers';
import { freshSchema, pgConfig, pgUrl, type SchemaFixture } from '../support/pg-helpers';
import { createEffectTable } from '../support/port-contract';
import { InboxConsumer } from '../support/inbox-fixture';
import { waitFor } from '../../../support/wait';
import { recordStatements, type StatementLog } from '../support/statement-log';
import type { PrismaTx } from '../support/orm-libraries';

const OPTIONS = { leaseTtlMs: 5000, doneTtlMs: 60_000 };

describeWithServices(['postgres'], 'twophase/prisma: inboxAdapter, the claimer on PrismaPg’s pool', () => {
  let f: SchemaFixture;
  let pool: Pool;
  let prisma: PrismaClient;
  let adapter: InboxAdapter;
  let claimer: PostgresClaimer<PrismaTx>;
  /** What the clients of `pool` sent, in order. */
  let log: StatementLog;
  beforeEach(async () => {
    f = await freshSchema('ormfast_prisma');
    await createEffectTable(f.pool, f.schema);
    pool = new Pool(pgConfig({ max: 6 }));
    adapter = inboxAdapter(new PrismaPg(pool, { schema: f.schema }));
    prisma = new PrismaClient({ adapter });
    claimer = new PostgresClaimer({ pool, logger: silentLogger, transactions: prismaTransactions(prisma, { adapter }) }, { schema: f.schema, mode: 'transactional' });
    log = recordStatements(pool);
  });
  afterEach(async () => {
    await f.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state LIKE 'idle in transaction%' AND query LIKE '%${f.schema}%'`);
    await prisma.$disconnect();
    await pool.end();
    await f.cleanup();
  });
  const keys = async () => (await f.pool.query<{ key: string }>(`SELECT key FROM ${f.schema}.effect ORDER BY key`)).rows.map((r) => r.key);
  const acquire = async (key: string, options = OPTIONS) => {
    const claim = await claimer.claim(key, options);
    if (claim.state !== 'acquired') throw new Error(claim.state);
    return claim.receipt as TransactionReceipt<PrismaTx>;
  };
  /** Sessions of the schema left idle in a transaction (a claim or a Prisma transaction not ended). */
  const openTransactions = async () =>
    (await f.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'  AND datname = current_database() AND query LIKE '%${f.schema}%'`)).rows[0]!.n;

  test("the claim runs as without a port: three statements a message on one client of the pool, none of them Prisma's BEGIN or COMMIT; tx.effect.create commits with the claim", async () => {
    await claimer.ready();
    await prisma.effect.count(); // Prisma connected before counting
    log.clear();
    const receipt = await acquire('p1');
    const created = await receipt.transaction.effect.create({ data: { key: 'p1', amount: receipt.fencingToken } });
    expect(created.id).toBeGreaterThan(0);
    expect(await keys()).toEqual([]);
    await receipt.commit({ ok: 1 });
    expect(await keys()).toEqual(['p1']);
    // The claim (with its BEGIN), Prisma's INSERT, the completion (with its COMMIT), on one client.
    expect(log.sent).toHaveLength(3);
    expect(new Set(log.senders).size).toBe(1);
    expect(log.sent[1]).toMatch(/^insert into/);
    expect(log.sent.filter((q) => /^(begin|commit|rollback)$/.test(q))).toEqual([]);
    expect(await claimer.claim('p1', OPTIONS)).toMatchObject({ state: 'done', result: { ok: 1 } });
  });

  test("Prisma's own transactions on the pool, run while claims are open, stay Prisma's: each claim's write commits or rolls back with its claim only", async () => {
    const receipts = await Promise.all(['c0', 'c1', 'c2'].map((key) => acquire(key)));
    // Three claims hold three clients; Prisma's interactive and batch transactions take others, at the same time.
    await Promise.all([
      ...receipts.map((r, i) => r.transaction.effect.create({ data: { key: `c${i}`, amount: 1 } })),
      prisma.$transaction(async (tx) => tx.effect.create({ data: { key: 'own-interactive', amount: 1 } })),
      prisma.$transaction([prisma.effect.create({ data: { key: 'own-batch', amount: 1 } }), prisma.effect.create({ data: { key: 'own-batch', amount: 2 } })]),
    ]);
    expect(await keys()).toEqual(['own-batch', 'own-batch', 'own-interactive']);
    await receipts[0]!.commit();
    await receipts[1]!.release();
    await receipts[2]!.commit();
    expect(await keys()).toEqual(['c0', 'c2', 'own-batch', 'own-batch', 'own-interactive']);
    // Prisma's own two transactions sent their BEGIN and COMMIT; the claims sent none of Prisma's.
    expect(log.sent.filter((q) => q === 'begin')).toHaveLength(2);
    expect(log.sent.filter((q) => q === 'commit')).toHaveLength(2);
  });

  test('runOnce: a throwing function rolls its Prisma write back; the next run commits once', async () => {
    const options = { claimer, scope: { operation: 'prisma-pool' }, key: 'r1', leaseTtlMs: 5000, doneTtlMs: 60_000 };
    await expect(
      runOnce<null, PrismaTx>(options, async ({ transaction }) => {
        await transaction.effect.create({ data: { key: 'r1', amount: 1 } });
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await keys()).toEqual([]);
    const outcome = await runOnce<string, PrismaTx>(options, async ({ transaction }) => {
      await transaction.effect.create({ data: { key: 'r1', amount: 2 } });
      return 'ok';
    });
    expect(outcome).toMatchObject({ status: 'ran', result: 'ok' });
    expect((await f.pool.query(`SELECT amount FROM ${f.schema}.effect`)).rows).toEqual([{ amount: 2 }]);
  });

  test('a COMMIT sent through tx is refused before it is sent; the claim commit fails, nothing is applied; the next claim writes once', async () => {
    const receipt = await acquire('m1');
    await receipt.transaction.effect.create({ data: { key: 'm1', amount: 1 } });
    await expect(receipt.transaction.$executeRawUnsafe('COMMIT')).rejects.toThrow(/COMMIT/);
    expect(log.sent.filter((q) => q === 'commit')).toEqual([]);
    await expect(receipt.commit()).rejects.toBeInstanceOf(TransactionAbortedError);
    expect(await keys()).toEqual([]);
    const next = await acquire('m1');
    await next.transaction.effect.create({ data: { key: 'm1', amount: 2 } });
    await next.commit();
    expect(await keys()).toEqual(['m1']);
  });

  test('a COMMIT the server refuses (a deferred unique constraint): the commit rejects with TransactionAbortedError, nothing is applied, the next claim is attempt 2', async () => {
    await f.pool.query(`CREATE TABLE ${f.schema}.deferred (key text UNIQUE DEFERRABLE INITIALLY DEFERRED)`);
    const receipt = await acquire('d1');
    await receipt.transaction.effect.create({ data: { key: 'd1', amount: 1 } });
    await receipt.transaction.$executeRawUnsafe(`INSERT INTO ${f.schema}.deferred (key) VALUES ($1), ($1)`, 'd1');
    const failed = await receipt.commit().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failed).toBeInstanceOf(TransactionAbortedError);
    expect((failed as Error).message).toMatch(/^commit of "d1": the transaction did not commit \(duplicate key value violates unique constraint.*\); nothing was applied$/);
    expect(await keys()).toEqual([]);
    const next = await claimer.claim('d1', OPTIONS);
    expect(next).toMatchObject({ state: 'acquired', attempt: 2 });
    await next.receipt.release();
  });

  /** A consumer of `claimer` on an in-process queue holding one message: its start, then what became of the message. */
  async function startConsumer(wired: PostgresClaimer<PrismaTx>): Promise<{ started: unknown; deadLetters: number; ran: number }> {
    const broker = new MemoryBroker();
    broker.publish('payments', { body: '{}', messageId: 'm-1' });
    let ran = 0;
    const consumer = new InboxConsumer({ name: 'payments', claimer: wired as never, source: new MemorySource({ broker, queue: 'payments' }), leaseTtlMs: 5000, doneTtlMs: 60_000, logger: silentLogger }, async () => {
      ran++;
      return ack();
    });
    const started = await consumer.start().then(
      () => undefined,
      (error: unknown) => error,
    );
    if (started === undefined) await waitFor(() => ran === 1, { what: 'the message handled' });
    await consumer.stop();
    return { started, deadLetters: broker.deadLetters('payments').length, ran };
  }

  test('ready() enters and leaves Prisma\'s transaction once: with the right wiring it passes and a consumer runs its message', async () => {
    await claimer.ready();
    expect(await openTransactions()).toBe(0);
    const { started, ran, deadLetters } = await startConsumer(claimer);
    expect(started).toBeUndefined();
    expect({ ran, deadLetters }).toEqual({ ran: 1, deadLetters: 0 });
  });

  test("a PrismaClient set with an isolation level: the consumer's start fails with a ConfigurationError naming the option, dead-lettering nothing; a claim fails the same way, leaving the key's lock and attempt as before", async () => {
    const serializable = new PrismaClient({ adapter, transactionOptions: { isolationLevel: 'Serializable' } });
    try {
      const strict = new PostgresClaimer({ pool, logger: silentLogger, transactions: prismaTransactions(serializable, { adapter }) }, { schema: f.schema, mode: 'transactional' });
      const { started, deadLetters, ran } = await startConsumer(strict);
      expect(started).toBeInstanceOf(ConfigurationError);
      expect((started as Error).message).toMatch(/isolation level SERIALIZABLE.*remove transactionOptions\.isolationLevel/i);
      expect({ deadLetters, ran }).toEqual({ deadLetters: 0, ran: 0 });
      await expect(strict.claim('i1', OPTIONS)).rejects.toThrow(/isolation level SERIALIZABLE.*remove transactionOptions\.isolationLevel/i);
      expect(await openTransactions()).toBe(0);
      // The key is free, and the failed claim did not count an attempt.
      expect(await claimer.peek('i1')).toMatchObject({ state: 'absent' });
      const next = await claimer.claim('i1', OPTIONS);
      expect(next).toMatchObject({ state: 'acquired', attempt: 1 });
      await next.receipt.release();
    } finally {
      await serializable.$disconnect();
    }
  });

  test("a PrismaClient built without the adapter given to prismaTransactions: the consumer's start fails with a ConfigurationError, dead-lettering nothing; a claim fails the same way; Prisma rolled its own transaction back", async () => {
    const other = new PrismaClient({ adapter: new PrismaPg({ connectionString: pgUrl(), max: 2 }, { schema: f.schema }) });
    try {
      const wrong = new PostgresClaimer({ pool, logger: silentLogger, transactions: prismaTransactions(other, { adapter }) }, { schema: f.schema, mode: 'transactional' });
      const { started, deadLetters, ran } = await startConsumer(wrong);
      expect(started).toBeInstanceOf(ConfigurationError);
      expect((started as Error).message).toMatch(/did not start through the adapter/);
      expect({ deadLetters, ran }).toEqual({ deadLetters: 0, ran: 0 });
      await expect(wrong.claim('w1', OPTIONS)).rejects.toThrow(/did not start through the adapter; build the PrismaClient with that adapter/);
      expect(await openTransactions()).toBe(0);
      await (await acquire('w1')).release();
    } finally {
      await other.$disconnect();
    }
  });

  test('inboxAdapter refuses PrismaPg built from a config and what is not PrismaPg; prismaTransactions refuses an adapter inboxAdapter did not return (ConfigurationError)', () => {
    expect(() => inboxAdapter(new PrismaPg({ connectionString: pgUrl() }))).toThrow(/build PrismaPg over a pg Pool/);
    expect(() => inboxAdapter({ adapterName: 'other', provider: 'postgres', connect: async () => undefined } as never)).toThrow(ConfigurationError);
    expect(() => prismaTransactions(prisma, { adapter: new PrismaPg(pool) as never })).toThrow(/adapter must be what inboxAdapter\(new PrismaPg\(pool\)\) returned/);
  });
});
