/**
 * A body holding NaN, Infinity or -Infinity is refused at every staging entry point on the real
 * PostgreSQL (JSON.stringify would write null in its place and the consumer would read other
 * data): `stageOutbox`, `transactionOutbox`, `ctx.outbox` of a transactional consumer, and
 * `ctx.outbox` of `runOnce`. Each refusal is an InvalidOutboxMessageError naming the value's path,
 * and no row is staged.
 */
import type { PoolClient } from 'pg';
import { ack, InvalidOutboxMessageError, runOnce, silentLogger } from '../../../src';
import { MemoryBroker, MemorySource } from '../../../adapters/memory';
import { PostgresClaimer, stageOutbox, transactionOutbox } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { waitFor } from '../../support/wait';
import { InboxConsumer } from './support/inbox-fixture';
import { freshSchema, type SchemaFixture } from './support/pg-helpers';

describeWithServices(['postgres'], 'outbox staging refuses non-finite numbers in a JSON body', () => {
  let f: SchemaFixture;
  beforeEach(async () => {
    f = await freshSchema('outbox_nonfinite');
  });
  afterEach(async () => {
    await f.cleanup();
  });

  const to = { exchange: 'orders', routingKey: 'placed' };
  const rows = async () => (await f.pool.query(`SELECT convert_from(body, 'UTF8') AS body FROM ${f.schema}.twophase_outbox ORDER BY seq`)).rows as { body: string }[];

  /** Runs `fn` in a transaction that commits when `fn` resolves, and resolves with what `fn` threw. */
  async function failureIn(fn: (client: PoolClient) => Promise<unknown>): Promise<unknown> {
    const client = await f.pool.connect();
    try {
      await client.query('BEGIN');
      const error = await fn(client).then(
        () => undefined,
        (e: unknown) => e,
      );
      await client.query('COMMIT');
      return error;
    } finally {
      client.release();
    }
  }

  test('stageOutbox: NaN inside an object is refused naming body.order.amount; nothing staged', async () => {
    const error = await failureIn((c) => stageOutbox(c, { to, body: { order: { id: 'o-1', amount: Number.NaN } } }, { schema: f.schema }));
    expect(error).toBeInstanceOf(InvalidOutboxMessageError);
    expect(String(error)).toMatch(/holds NaN at body\.order\.amount, which JSON cannot hold/);
    expect(await rows()).toEqual([]);
  });

  test('transactionOutbox.stageMany: Infinity in the second message refuses the call; neither message staged', async () => {
    const error = await failureIn((c) => transactionOutbox(c, { schema: f.schema }).stageMany([{ to, body: { n: 1 } }, { to, body: { items: [1, Infinity] } }]));
    expect(error).toBeInstanceOf(InvalidOutboxMessageError);
    expect(String(error)).toMatch(/holds Infinity at body\.items\[1\]/);
    expect(await rows()).toEqual([]);
  });

  test('runOnce with the transactional claimer: ctx.outbox refuses -Infinity; the run fails and stages nothing', async () => {
    const claimer = new PostgresClaimer({ pool: f.pool, logger: silentLogger }, { schema: f.schema, mode: 'transactional' });
    const run = runOnce<{ ok: boolean }, PoolClient>({ claimer, scope: { operation: 'POST /orders', actor: 'user-1' }, key: 'req-1', leaseTtlMs: 5000, doneTtlMs: 60_000 }, async (ctx) => {
      await ctx.outbox.stage({ to, body: { delta: -Infinity } });
      return { ok: true };
    });
    await expect(run).rejects.toThrow(InvalidOutboxMessageError);
    await expect(run).rejects.toThrow(/holds -Infinity at body\.delta/);
    expect(await rows()).toEqual([]);
  });

  test('ctx.outbox in a transactional consumer refuses NaN; a finite body staged by the same handler commits as sent', async () => {
    const broker = new MemoryBroker();
    const errors: unknown[] = [];
    const consumer = new InboxConsumer(
      {
        name: 'orders',
        claimer: new PostgresClaimer({ pool: f.pool, logger: silentLogger }, { schema: f.schema, mode: 'transactional' }),
        source: new MemorySource({ broker, queue: 'orders' }),
        leaseTtlMs: 5000,
        doneTtlMs: 60_000,
        logger: silentLogger,
      },
      async (_m, ctx) => {
        errors.push(await ctx.outbox.stage({ to, body: { total: Number.NaN } }).catch((e: unknown) => e));
        await ctx.outbox.stage({ to, body: { total: 12.5 } });
        return ack();
      },
    );
    await consumer.start();
    try {
      broker.publish('orders', { body: '{}', headers: { 'idempotency-key': 'order-1' } });
      await waitFor(() => consumer.health().commits === 1, { what: 'the delivery committed' });
    } finally {
      await consumer.stop();
    }
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(InvalidOutboxMessageError);
    expect(String(errors[0])).toMatch(/holds NaN at body\.total/);
    expect(await rows()).toEqual([{ body: '{"total":12.5}' }]);
  });
});
