/**
 * A handler that sends BEGIN, COMMIT or ROLLBACK through ctx.transaction is refused before the
 * statement is sent (TransactionMisuseError). The error is thrown by the handler's own code, so a
 * retry meets it again: the delivery is dead-lettered at once (permanent_error) with no effect,
 * and a replay after the fix runs it.
 */
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { sql } from 'drizzle-orm';
import { PrismaPg } from '@prisma/adapter-pg';
import { Pool } from 'pg';
import { DataSource, type EntityManager } from 'typeorm';
import { ack, type ConsumerEvent, type ConsumerOptions } from '../../../src';
import { drizzleTransactions, type DrizzleTransaction } from '../../../adapters/postgres/orm/drizzle';
import { inboxAdapter, prismaTransactions, type PrismaTransactionClient } from '../../../adapters/postgres/orm/prisma';
import { PrismaClient } from '../../support/prisma/generated/client';
import { typeormPool, typeormTransactions } from '../../../adapters/postgres/orm/typeorm';
import { pgConfig } from './support/pg-helpers';
import { MemoryBroker, MemorySource } from '../../../adapters/memory';
import { diagnoseKey, PostgresClaimer, TransactionMisuseError } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { waitFor } from '../../support/wait';
import { InboxConsumer, inboxFixture, type InboxFixture, writeLedger } from './support/inbox-fixture';

/** A consumer of `queue` on `claimer`: 5 attempts, no backoff, silent, its events into `events`. */
function consumerOptions(claimer: PostgresClaimer<unknown>, broker: MemoryBroker, queue: string, events: ConsumerEvent[]): ConsumerOptions {
  return {
    name: 'payments',
    claimer,
    source: new MemorySource({ broker, queue }),
    maxAttempts: 5,
    retryBackoff: { initialDelayMs: 1, maxDelayMs: 1, multiplier: 1, jitter: 0 },
    logger: { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
    observers: [{ onEvent: (e) => void events.push(e) }],
  };
}

describeWithServices(['postgres'], 'transactional inbox: transaction control sent by the handler', () => {
  let f: InboxFixture;
  let consumer: InboxConsumer | undefined;
  beforeEach(async () => {
    f = await inboxFixture('misusedl');
  });
  afterEach(async () => {
    await consumer?.stop();
    consumer = undefined;
    await f.cleanup();
  });

  test.each(['BEGIN', 'COMMIT'])('a thrown TransactionMisuseError (%s) is dead-lettered at once as permanent_error, with no effect; after the fix a replay books it once', async (statement) => {
    const broker = new MemoryBroker();
    const queue = 'payments';
    broker.publish(queue, { body: JSON.stringify({ amount: 1 }), messageId: 'pay-1' });
    const events: ConsumerEvent[] = [];
    let runs = 0;
    let fixed = false;
    consumer = new InboxConsumer(
      consumerOptions(new PostgresClaimer({ pool: f.pool }, { schema: f.schema, mode: 'transactional' }), broker, queue, events),
      async (m, ctx) => {
        runs++;
        if (!fixed) await ctx.transaction.query(statement);
        await writeLedger(ctx.transaction, f.ledger, m.key);
        return ack();
      },
    );
    await consumer.start();
    await waitFor(() => broker.deadLetters(queue).length === 1, { what: 'the dead letter' });
    expect(runs).toBe(1);
    expect(broker.deadLetters(queue)[0]!.reason).toMatchObject({ reason: 'permanent_error' });
    const rejected = events.find((e) => e.type === 'rejected');
    expect(rejected).toMatchObject({ reason: 'permanent_error', attempt: 1 });
    expect((rejected as { error?: unknown }).error).toBeInstanceOf(TransactionMisuseError);
    expect(await f.counts()).toEqual(new Map());
    // Nothing of the key stays in the inbox: its row rolled back with the effect, and the
    // dead-letter reset its attempt count. `keys diagnose` says missing; the dead letter is the record.
    expect((await diagnoseKey(f.pool, { schema: f.schema, key: (rejected as { key: string }).key })).state).toBe('missing');

    fixed = true;
    const letter = broker.deadLetters(queue)[0]!;
    broker.publish(queue, { body: letter.message.body, messageId: letter.message.messageId });
    await waitFor(async () => (await f.counts()).size === 1, { what: 'the replay booked' });
    expect([...(await f.counts()).values()]).toEqual([1]);
    expect(runs).toBe(2);
    // The same key once committed: diagnose finds it (so the missing above was this key's).
    expect((await diagnoseKey(f.pool, { schema: f.schema, key: (rejected as { key: string }).key })).state).toBe('replayable');
  });

  /**
   * The same COMMIT sent through a library's own transaction object, with the claimer on that
   * library's pool (the claim as without a port): the library wraps, rethrows or rebuilds the
   * refusal (Drizzle as the cause of its DrizzleQueryError; TypeORM's query runner rethrows it as
   * is; Prisma rebuilds it with its code), and the consumer still dead-letters it at once.
   */
  test.each(['drizzle', 'typeorm', 'prisma'] as const)("a COMMIT sent through %s's transaction object is dead-lettered at once as permanent_error, with no effect", async (library) => {
    const broker = new MemoryBroker();
    const queue = `payments-${library}`;
    broker.publish(queue, { body: JSON.stringify({ amount: 1 }), messageId: 'pay-2' });
    const events: ConsumerEvent[] = [];
    let runs = 0;
    let dataSource: DataSource | undefined;
    let prisma: PrismaClient | undefined;
    let pool: Pool = f.pool;
    let commitThrough: (tx: unknown) => Promise<unknown>;
    let transactions;
    if (library === 'drizzle') {
      transactions = drizzleTransactions(drizzle(f.pool));
      commitThrough = (tx) => (tx as DrizzleTransaction<NodePgDatabase>).execute(sql`COMMIT`);
    } else if (library === 'prisma') {
      pool = new Pool(pgConfig({ max: 4 }));
      const adapter = inboxAdapter(new PrismaPg(pool));
      prisma = new PrismaClient({ adapter });
      transactions = prismaTransactions(prisma, { adapter });
      commitThrough = (tx) => (tx as PrismaTransactionClient<PrismaClient>).$executeRawUnsafe('COMMIT');
    } else {
      const c = pgConfig();
      dataSource = await new DataSource({ type: 'postgres', host: c.host, port: c.port, username: c.user, database: c.database, poolSize: 4 }).initialize();
      pool = typeormPool(dataSource);
      transactions = typeormTransactions(dataSource);
      commitThrough = (tx) => (tx as EntityManager).queryRunner!.commitTransaction();
    }
    try {
      consumer = new InboxConsumer(
        consumerOptions(new PostgresClaimer({ pool, transactions: transactions as never }, { schema: f.schema, mode: 'transactional' }), broker, queue, events),
        async (_m, ctx) => {
          runs++;
          await commitThrough(ctx.transaction);
          return ack();
        },
      );
      await consumer.start();
      await waitFor(() => broker.deadLetters(queue).length === 1, { what: 'the dead letter' });
      expect(runs).toBe(1);
      expect(broker.deadLetters(queue)[0]!.reason).toMatchObject({ reason: 'permanent_error' });
      const rejected = events.find((e) => e.type === 'rejected') as { reason?: string; attempt?: number; error?: Error } | undefined;
      expect(rejected).toMatchObject({ reason: 'permanent_error', attempt: 1 });
      if (library === 'prisma') {
        // Prisma rebuilds the refusal as its own error, keeping its code and message.
        expect(rejected!.error).toMatchObject({ name: 'PrismaClientKnownRequestError', code: 'TRANSACTION_MISUSE' });
        expect(rejected!.error!.message).toMatch(/COMMIT refused on ctx\.transaction/);
      } else {
        const refusal = rejected!.error instanceof TransactionMisuseError ? rejected!.error : rejected!.error?.cause;
        expect(refusal).toBeInstanceOf(TransactionMisuseError);
      }
      expect(await f.counts()).toEqual(new Map());
    } finally {
      await consumer?.stop();
      consumer = undefined;
      await dataSource?.destroy();
      await prisma?.$disconnect();
      if (library === 'prisma') await pool.end();
    }
  });
});
