/**
 * `ctx.outbox` in the transactional inbox (RabbitMQ + PostgreSQL) and in `runOnce`: messages
 * staged by a handler commit with its claim and effect, or vanish with a rollback; a delivery that
 * rolled back and runs again stages the same ids; with a claimer that has no transaction,
 * `ctx.outbox` names the fix; staging after the claim was settled is refused.
 */
import type { PoolClient } from 'pg';
import {
  ack,
  InMemoryClaimer,
  type Outbox,
  OutboxNotAvailableError,
  outboxMessageId,
  OutboxTransactionError,
  RetryableError,
  runOnce,
} from '../../../src';
import { PostgresClaimer } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { waitFor } from '../../support/wait';
import { Harness } from '../rabbitmq/support/harness';
import { InboxConsumer } from './support/inbox-fixture';
import { OutboxFixture } from './support/outbox-fixture';

describeWithServices(['rabbitmq', 'postgres'], 'outbox staging from a transactional handler and runOnce', () => {
  let f: OutboxFixture;
  let h: Harness;
  beforeEach(async () => {
    f = await OutboxFixture.create('outbox_inbox');
    h = new Harness();
    await h.admin.open();
  });
  afterEach(async () => {
    await h.cleanup();
    await f.cleanup();
  });

  function inbox(queue: string, handler: ConstructorParameters<typeof InboxConsumer>[1], claimer = new PostgresClaimer({ pool: f.pool, logger: h.logger }, { schema: f.schema, mode: 'transactional' })): InboxConsumer {
    const consumer = new InboxConsumer(
      { name: 'orders', claimer, source: h.source({ queue }), concurrency: 2, leaseTtlMs: 5000, retryBackoff: { initialDelayMs: 50, maxDelayMs: 100, jitter: 0 }, shutdownTimeoutMs: 5000, logger: h.logger },
      handler,
    );
    stops.push(consumer);
    return consumer;
  }
  const stops: InboxConsumer[] = [];
  afterEach(async () => {
    for (const c of stops.splice(0)) await c.stop().catch(() => undefined);
  });

  test('a handler whose first run staged, then threw (rolled back), stages the same ids on its second run; one row each, with the effect', async () => {
    const queue = h.queue('outbox-handler');
    const runs: string[][] = [];
    const consumer = inbox(queue, async (m, ctx) => {
      await ctx.transaction.query(`INSERT INTO ${f.schema}.orders VALUES ($1)`, [m.key]);
      const ids = await ctx.outbox.stageMany([
        { to: { exchange: f.exchange, routingKey: 'placed' }, body: { n: 1 }, orderingKey: m.key },
        { to: { exchange: f.exchange, routingKey: 'placed' }, body: { n: 2 }, orderingKey: m.key },
      ]);
      runs.push(ids);
      if (ctx.attempt === 1) throw new RetryableError('fail after staging: the transaction rolls back');
      return ack({ staged: ctx.outbox.stagedIds.length });
    });
    await consumer.start();
    await h.admin.publish('', queue, { order: 'o-1' }, { headers: { 'idempotency-key': 'order-1' } });
    await waitFor(() => runs.length === 2, { what: 'two runs' });
    await waitFor(async () => (await f.pool.query(`SELECT 1 FROM ${f.schema}.orders`)).rowCount === 1, { what: 'the effect committed' });
    expect(runs[0]).toEqual(runs[1]);
    expect(runs[0]).toEqual([outboxMessageId('orders:order-1', 0), outboxMessageId('orders:order-1', 1)]);
    expect((await f.rows()).map((r) => r.id)).toEqual(runs[1]);
  });

  test('rows staged by a handler commit with its ack; ctx.outbox used after the claim settled is refused (OutboxTransactionError), nothing staged', async () => {
    const queue = h.queue('outbox-late');
    let kept: Outbox | undefined;
    let handled = 0;
    const consumer = inbox(queue, async (_m, ctx) => {
      handled++;
      kept = ctx.outbox;
      await ctx.outbox.stage({ to: { exchange: f.exchange, routingKey: 'placed' }, body: 'x' });
      return ack();
    });
    await consumer.start();
    await h.admin.publish('', queue, { order: 'o-2' }, { headers: { 'idempotency-key': 'order-2' } });
    await waitFor(async () => handled === 1 && (await f.rows()).length === 1, { what: 'the staged row committed' });
    await expect(kept!.stage({ to: { exchange: f.exchange, routingKey: 'placed' }, body: 'late' })).rejects.toThrow(OutboxTransactionError);
    expect((await f.rows()).length).toBe(1);
  });

  test('with a claimer that has no transaction, ctx.outbox rejects with OutboxNotAvailableError naming the transactional claimer', async () => {
    const queue = h.queue('outbox-none');
    const errors: unknown[] = [];
    const consumer = inbox(
      queue,
      async (_m, ctx) => {
        errors.push(await ctx.outbox.stage({ to: { exchange: f.exchange, routingKey: 'placed' }, body: 'x' }).catch((e: unknown) => e));
        return ack();
      },
      new InMemoryClaimer() as never,
    );
    await consumer.start();
    await h.admin.publish('', queue, { order: 'o-3' }, { headers: { 'idempotency-key': 'order-3' } });
    await waitFor(() => errors.length === 1);
    expect(errors[0]).toBeInstanceOf(OutboxNotAvailableError);
    expect(String(errors[0])).toMatch(/mode: 'transactional'.*stageOutbox/);
  });

  test('runOnce with the transactional PostgreSQL claimer stages with its key; a replay returns the same ids from the stored result', async () => {
    const claimer = new PostgresClaimer({ pool: f.pool, logger: h.logger }, { schema: f.schema, mode: 'transactional' });
    const call = () =>
      runOnce<{ ids: string[] }, PoolClient>({ claimer, scope: { operation: 'POST /orders' }, key: 'req-7', leaseTtlMs: 5000, doneTtlMs: 60_000 }, async (ctx) => {
        await ctx.transaction.query(`INSERT INTO ${f.schema}.orders VALUES ('req-7')`);
        await ctx.outbox.stage({ to: { exchange: f.exchange, routingKey: 'placed' }, body: { order: 'req-7' } });
        return { ids: [...ctx.outbox.stagedIds] };
      });
    const first = await call();
    const again = await call();
    expect(first.status).toBe('ran');
    expect(again.status).toBe('replayed');
    expect(again.result).toEqual(first.result);
    expect(first.result.ids).toEqual([outboxMessageId(first.key, 0)]);
    expect((await f.rows()).map((r) => r.id)).toEqual(first.result.ids);
  });
});
