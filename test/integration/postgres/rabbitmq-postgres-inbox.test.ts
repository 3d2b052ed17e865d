/**
 * The transactional inbox on real RabbitMQ + PostgreSQL: the claim and the handler's effect
 * share one transaction, so effects written through `ctx.transaction` happen exactly once per key
 * across duplicates, handler failures, aborted transactions, a terminated session and a hung
 * owner. Every test counts ledger rows per key (the ledger has no unique key: a repeat would show).
 */
import { ack, type ConsumerOptions, PermanentError, requeue } from '../../../src';
import { PostgresClaimer, TransactionAbortedError } from '../../../adapters/postgres';
import { RabbitMqSource } from '../../../adapters/rabbitmq';
import { describeWithServices } from '../../support/services';
import { AMQP_URL, Harness, TEST_DELAY_TIERS_MS } from '../rabbitmq/support/harness';
import { waitFor } from '../../support/wait';
import { type InboxFixture, InboxConsumer, type InboxHandler, inboxFixture, ledgerHandler, writeLedger } from './support/inbox-fixture';

describeWithServices(['rabbitmq', 'postgres'], 'transactional inbox: RabbitMQ + PostgreSQL', () => {
  let h: Harness;
  let f: InboxFixture;
  beforeEach(async () => {
    h = new Harness();
    await h.admin.open();
    f = await inboxFixture('rmq');
  });
  afterEach(async () => {
    await h.cleanup();
    await f.cleanup();
  });

  function consumer(queue: string, handler: InboxHandler, options: Partial<ConsumerOptions> = {}, claimerOptions = {}): InboxConsumer {
    const claimer = new PostgresClaimer({ pool: f.pool, logger: h.logger }, { schema: f.schema, mode: 'transactional', ...claimerOptions });
    const source = h.source({ queue });
    return new InboxConsumer(
      {
        name: 'inbox',
        claimer,
        source,
        concurrency: 5,
        leaseTtlMs: 5000,
        busyRequeueDelayMs: 100,
        retryBackoff: { initialDelayMs: 100, maxDelayMs: 300, jitter: 0 },
        shutdownTimeoutMs: 5000,
        logger: h.logger,
        ...options,
      },
      handler,
    );
  }

  const stops: InboxConsumer[] = [];
  afterEach(async () => {
    for (const c of stops.splice(0)) await c.stop().catch(() => undefined);
  });
  const started = async (c: InboxConsumer) => {
    stops.push(c);
    await c.start();
    return c;
  };

  test('concurrent duplicates, two consumers on one queue: one ledger row per key; duplicates get the stored result', async () => {
    const queue = h.queue('inbox-dups');
    const replies: unknown[] = [];
    const handler = ledgerHandler(f.ledger);
    class Replying extends InboxConsumer {
      protected override onDuplicate(_m: unknown, result: unknown): void {
        replies.push(result);
      }
    }
    const make = () =>
      new Replying(
        { name: 'inbox', claimer: new PostgresClaimer({ pool: f.pool }, { schema: f.schema, mode: 'transactional' }), source: h.source({ queue }), concurrency: 5, leaseTtlMs: 5000, busyRequeueDelayMs: 50, logger: h.logger },
        handler,
      );
    await started(make());
    await started(make());
    const keys = 30;
    await Promise.all(
      Array.from({ length: keys * 3 }, (_, n) => h.admin.publish('', queue, { n }, { messageId: `m-${n}`, headers: { 'idempotency-key': `pay-${n % keys}` } })),
    );
    await waitFor(async () => (await f.counts()).size === keys && (await h.admin.messageCount(queue)) === 0 && replies.length === keys * 2, { what: 'every key booked and every duplicate acked', timeoutMs: 60_000 });
    const counts = await f.counts();
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect(replies.every((r) => typeof r === 'object' && r !== null && 'booked' in r)).toBe(true);
  });

  test('a thrown error rolls the effect back with the claim; attempts survive the rollback; the retry books once', async () => {
    const queue = h.queue('inbox-retry');
    const attempts: number[] = [];
    await started(
      consumer(queue, async (m, ctx) => {
        attempts.push(ctx.attempt);
        await writeLedger(ctx.transaction, f.ledger, m.key);
        if (ctx.attempt < 3) throw new Error(`boom ${ctx.attempt}`);
        return ack();
      }),
    );
    await h.admin.publish('', queue, {}, { messageId: 'r-1' });
    await waitFor(async () => (await f.counts()).get('inbox:r-1') === 1 && attempts.length === 3, { what: 'third attempt committed' });
    expect(attempts).toEqual([1, 2, 3]);
    const inbox = await f.pool.query(`SELECT status, attempt FROM ${f.schema}.twophase_inbox`);
    expect(inbox.rows).toEqual([{ status: 'completed', attempt: 3 }]);
  });

  test('maxAttempts → retry_exhausted still works: dead-lettered after the last attempt, no effect committed', async () => {
    const queue = h.queue('inbox-exhaust');
    let runs = 0;
    await started(
      consumer(
        queue,
        async (m, ctx) => {
          runs++;
          await writeLedger(ctx.transaction, f.ledger, m.key);
          return requeue();
        },
        { maxAttempts: 3 },
      ),
    );
    await h.admin.publish('', queue, {}, { messageId: 'x-1' });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'dead-lettered' });
    expect(runs).toBe(3);
    expect((await f.counts()).size).toBe(0);
    // the dead-letter reset the count: a replay would start at attempt 1 (the release that forgets
    // it runs after the dead-letter settle, so it may land just after the copy is in the DLQ)
    await waitFor(async () => (await f.pool.query(`SELECT count(*)::int AS n FROM ${f.schema}.twophase_attempts`)).rows[0].n === 0, { what: 'the attempt count forgotten' });
  });

  test('a permanent error and a reject roll back and dead-letter', async () => {
    const queue = h.queue('inbox-perm');
    await started(
      consumer(queue, async (m, ctx) => {
        await writeLedger(ctx.transaction, f.ledger, m.key);
        throw new PermanentError('bad payment');
      }),
    );
    await h.admin.publish('', queue, {}, { messageId: 'p-1' });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'dead-lettered' });
    expect((await f.counts()).size).toBe(0);
  });

  test('a failed statement inside the handler aborts the transaction: the ack cannot commit, the delivery is requeued and the next attempt books once', async () => {
    const queue = h.queue('inbox-aborted');
    let runs = 0;
    await started(
      consumer(queue, async (m, ctx) => {
        runs++;
        await writeLedger(ctx.transaction, f.ledger, m.key);
        if (runs === 1) await ctx.transaction.query('SELECT 1/0').catch(() => undefined); // swallowed, but the transaction is aborted
        return ack();
      }),
    );
    await h.admin.publish('', queue, {}, { messageId: 'a-1' });
    await waitFor(async () => (await f.counts()).get('inbox:a-1') === 1, { what: 'booked on the second attempt' });
    expect(runs).toBe(2);
    expect(h.logger.has('did not commit')).toBe(true);
  });

  test('pg_terminate_backend of the consumer session mid-transaction: the effect rolls back, the late COMMIT fails, the redelivery books once', async () => {
    const queue = h.queue('inbox-terminate');
    let runs = 0;
    await started(
      consumer(queue, async (m, ctx) => {
        runs++;
        await writeLedger(ctx.transaction, f.ledger, m.key);
        if (runs === 1) {
          const pid = (await ctx.transaction.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
          await f.pool.query('SELECT pg_terminate_backend($1)', [pid]);
        }
        return ack();
      }),
    );
    await h.admin.publish('', queue, {}, { messageId: 't-1' });
    await waitFor(async () => (await f.counts()).get('inbox:t-1') === 1 && runs === 2, { what: 'booked once, on the redelivery' });
    await new Promise((r) => setTimeout(r, 300));
    expect((await f.counts()).get('inbox:t-1')).toBe(1);
  });

  test('a hung owner: its session is ended after leaseTtlMs idle, a duplicate meanwhile is busy (never waits), the late COMMIT fails, the redelivery books once', async () => {
    const queue = h.queue('inbox-hung');
    let runs = 0;
    const lateCommit: unknown[] = [];
    const outcomes: string[] = [];
    await started(
      consumer(
        queue,
        async (m, ctx) => {
          runs++;
          await writeLedger(ctx.transaction, f.ledger, m.key);
          if (runs === 1) {
            await new Promise((r) => setTimeout(r, 2500)); // idle in transaction longer than the lease
            try {
              await ctx.transaction.query('SELECT 1');
            } catch (error) {
              lateCommit.push(error);
            }
          }
          return ack();
        },
        { leaseTtlMs: 1000, concurrency: 2, observers: [{ onEvent: (e) => void outcomes.push(e.type) }] },
      ),
    );
    await h.admin.publish('', queue, {}, { messageId: 'h-1', headers: { 'idempotency-key': 'hung' } });
    await waitFor(() => runs === 1, { what: 'first run started' });
    await h.admin.publish('', queue, {}, { messageId: 'h-2', headers: { 'idempotency-key': 'hung' } });
    await waitFor(async () => (await f.counts()).get('inbox:hung') === 1 && runs >= 2, { what: 'booked once by the duplicate, once the hung session was ended', timeoutMs: 30_000 });
    await waitFor(() => lateCommit.length === 1 && outcomes.includes('commit_failed') && outcomes.includes('done_duplicate'), { what: 'the hung owner woke up, failed to commit, and its redelivery was a done duplicate', timeoutMs: 30_000 });
    await waitFor(async () => (await h.admin.messageCount(queue)) === 0, { what: 'queue drained' });
    expect((await f.counts()).get('inbox:hung')).toBe(1);
    expect(lateCommit).toHaveLength(1); // the session was terminated by idle_in_transaction_session_timeout
    expect(outcomes).toContain('busy');
    expect(outcomes).toContain('commit_failed');
  });

  test('the handler cannot use ctx.transaction after its claim was settled, nor release it', async () => {
    const queue = h.queue('inbox-guard');
    let kept: import('pg').PoolClient | undefined;
    const errors: unknown[] = [];
    await started(
      consumer(queue, async (m, ctx) => {
        kept = ctx.transaction;
        try {
          ctx.transaction.release();
        } catch (error) {
          errors.push(error);
        }
        await writeLedger(ctx.transaction, f.ledger, m.key);
        return ack();
      }),
    );
    await h.admin.publish('', queue, {}, { messageId: 'g-1' });
    await waitFor(async () => (await f.counts()).get('inbox:g-1') === 1, { what: 'booked' });
    await waitFor(async () => (await f.pool.query(`SELECT status FROM ${f.schema}.twophase_inbox`)).rows[0]?.status === 'completed', { what: 'completed' });
    await expect(kept!.query('SELECT 1')).rejects.toBeInstanceOf(TransactionAbortedError);
    expect(errors[0]).toBeInstanceOf(TransactionAbortedError);
  });

  test('a key of a tenant that does not exist is refused by the database and dead-lettered with a reason', async () => {
    const queue = h.queue('inbox-tenant');
    const c = new InboxConsumer(
      {
        name: 'inbox',
        claimer: new PostgresClaimer({ pool: f.pool }, { schema: f.schema, mode: 'transactional', tenantOf: (key) => key.split(':')[1]!.split('/')[0]! }),
        source: new RabbitMqSource({ url: AMQP_URL, queue, delayTiersMs: TEST_DELAY_TIERS_MS, logger: h.logger }),
        logger: h.logger,
      },
      ledgerHandler(f.ledger),
    );
    await started(c);
    await h.admin.publish('', queue, {}, { messageId: 't1/o-1' });
    await h.admin.publish('', queue, {}, { messageId: 't2/o-1' });
    await h.admin.publish('', queue, {}, { messageId: 'nobody/o-1' });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1 && (await f.counts()).size === 2, { what: 'two booked, one dead-lettered' });
    const [dead] = await h.admin.drain(`${queue}.dlq`);
    expect(JSON.stringify(dead!.properties.headers)).toMatch(/invalid_key/);
    expect(JSON.stringify(dead!.properties.headers)).toMatch(/tenant does not exist/);
    await c.stop();
  });
});
