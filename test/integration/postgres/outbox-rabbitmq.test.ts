/**
 * The transactional outbox on real PostgreSQL + RabbitMQ: staging commits and rolls back with the
 * effect, the relay publishes each message with its outbox id as the AMQP message id and the
 * `idempotency-key` header (bytes and headers as staged), an unroutable message is a failure, a
 * poison message backs off and goes dead without holding other keys, a downstream twophase
 * consumer deduplicates a double publish, and wake-up by LISTEN/NOTIFY or by polling alone.
 */
import {
  ack,
  type ConsumerEvent,
  InMemoryClaimer,
  InvalidOutboxMessageError,
  type OutboxRecord,
  OutboxTransactionError,
} from '../../../src';
import { migrate, PostgresOutboxNotifier, PostgresOutboxStore, SchemaMismatchError, stageOutbox, transactionOutbox } from '../../../adapters/postgres';
import { UnroutableError } from '../../../adapters/rabbitmq';
import { describeWithServices } from '../../support/services';
import { waitFor } from '../../support/wait';
import { Harness } from '../rabbitmq/support/harness';
import { OutboxFixture } from './support/outbox-fixture';
import { Pool } from 'pg';
import { freshSchema, pgConfig } from './support/pg-helpers';

describeWithServices(['rabbitmq', 'postgres'], 'transactional outbox: PostgreSQL + RabbitMQ', () => {
  let f: OutboxFixture;
  beforeEach(async () => {
    f = await OutboxFixture.create('outbox');
  });
  afterEach(async () => {
    await f.cleanup();
  });

  const placed = (orderId: string, extra: Record<string, unknown> = {}) => ({ to: { exchange: f.exchange, routingKey: 'placed' }, body: { orderId }, ...extra });

  test('staging commits with the effect, or rolls back with it; the relay publishes only the committed message', async () => {
    await f.inTransaction(async (c) => {
      await c.query(`INSERT INTO ${f.schema}.orders VALUES ('o-rolled-back')`);
      await stageOutbox(c, placed('o-rolled-back'), { schema: f.schema });
    }, true);
    const [id] = await f.inTransaction(async (c) => {
      await c.query(`INSERT INTO ${f.schema}.orders VALUES ('o-1')`);
      return stageOutbox(c, placed('o-1'), { schema: f.schema });
    });
    expect((await f.rows()).map((r) => r.id)).toEqual([id]);
    const relay = f.relay();
    await relay.start();
    const messages = await waitFor(async () => {
      const got = await f.drain();
      return got.length > 0 ? got : undefined;
    }, { what: 'the committed message on the queue' });
    expect(messages.map((m) => JSON.parse(m.content.toString()))).toEqual([{ orderId: 'o-1' }]);
    await waitFor(async () => (await f.rows()).length === 0, { what: 'the published row removed' });
    expect(relay.health().published).toBe(1);
  });

  test('a published message carries its outbox id as message id and idempotency-key; bytes, headers and properties as staged', async () => {
    const body = Buffer.from([0x00, 0xff, 0x10, 0x7b, 0x22]);
    const [id] = await f.inTransaction((c) =>
      stageOutbox(c, { to: { exchange: f.exchange, routingKey: 'placed' }, body, headers: { 'x-tenant': 't1', traceparent: '00-abc-def-01' }, properties: { contentType: 'application/octet-stream', type: 'order.placed', correlationId: 'c-1' } }, { schema: f.schema }),
    );
    const relay = f.relay();
    await relay.start();
    const [m] = await waitFor(async () => {
      const got = await f.drain();
      return got.length > 0 ? got : undefined;
    }, { what: 'the message' });
    expect(m!.content.equals(body)).toBe(true);
    expect(m!.properties.messageId).toBe(id);
    expect(m!.properties.headers).toEqual({ 'x-tenant': 't1', traceparent: '00-abc-def-01', 'idempotency-key': id });
    expect(m!.properties).toMatchObject({ contentType: 'application/octet-stream', type: 'order.placed', correlationId: 'c-1', deliveryMode: 2 });
  });

  test('staging outside a transaction, after COMMIT, or through a Pool is refused with OutboxTransactionError; nothing is staged', async () => {
    const client = await f.pool.connect();
    try {
      await expect(stageOutbox(client, placed('no-begin'), { schema: f.schema })).rejects.toThrow(OutboxTransactionError);
      await client.query('BEGIN');
      const outbox = transactionOutbox(client, { schema: f.schema });
      await outbox.stage(placed('inside'));
      await client.query('COMMIT');
      await expect(outbox.stage(placed('after-commit'))).rejects.toThrow(OutboxTransactionError);
    } finally {
      client.release();
    }
    await expect(stageOutbox(f.pool, placed('pool'), { schema: f.schema })).rejects.toThrow(/BEGIN and COMMIT/);
    expect((await f.rows()).length).toBe(1);
    await expect(stageOutbox(f.pool, { to: { exchange: 'x' }, body: 'b' } as never, { schema: f.schema })).rejects.toThrow(InvalidOutboxMessageError);
    await expect(stageOutbox(f.pool, placed('h', { headers: { 'idempotency-key': 'mine' } }), { schema: f.schema })).rejects.toThrow(/reserved/);
  });

  test('staging into a database without the outbox migration names the fix (SchemaMismatchError: twophase postgres migrate); a relay older than its table is refused', async () => {
    const bare = await freshSchema('outbox_bare', { migrated: false });
    try {
      const client = await bare.pool.connect();
      try {
        await client.query('BEGIN');
        await expect(stageOutbox(client, placed('x'), { schema: bare.schema })).rejects.toThrow(SchemaMismatchError);
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
      const store = new PostgresOutboxStore({ pool: bare.pool }, { schema: bare.schema });
      await expect(store.ready()).rejects.toThrow(/twophase postgres migrate/);
      await migrate(bare.pool, { schema: bare.schema });
      await store.ready();
      // A table migrated by a newer twophase refuses this (older) relay.
      await bare.pool.query(`INSERT INTO ${bare.schema}.twophase_migrations (version, name) VALUES (99, 'from the future')`);
      await expect(store.ready()).rejects.toThrow(/newer twophase.*upgrade this relay/);
    } finally {
      await bare.cleanup();
    }
  });

  test('an unroutable message (mandatory, returned by the broker) is a failure: recorded with reason unroutable, retried, never removed', async () => {
    await f.inTransaction((c) => stageOutbox(c, { to: { exchange: f.exchange, routingKey: 'nobody-bound' }, body: 'lost?' }, { schema: f.schema }));
    const failures: unknown[] = [];
    const relay = f.relay({ observer: { onEvent: (e) => e.type === 'failed' && failures.push(e.error) } }, { retryBackoff: { initialDelayMs: 60_000, maxDelayMs: 60_000, multiplier: 1, jitter: 0 } });
    await relay.start();
    await waitFor(() => failures.length > 0, { what: 'the failed publish' });
    expect(failures[0]).toBeInstanceOf(UnroutableError);
    const [row] = await waitFor(async () => {
      const rows = await f.rows();
      return rows[0]?.attempts === 1 ? rows : undefined;
    }, { what: 'the failure recorded' });
    expect(row).toMatchObject({ state: 'pending', attempts: 1, lease_owner: null });
    expect(row!.last_error).toMatch(/unroutable|NO_ROUTE|returned/i);
    // The error names the fix, not only the symptom.
    expect(row!.last_error).toMatch(/no queue is bound to exchange ".*" with a binding that matches routing key "nobody-bound": bind a queue/);
    expect(row!.available_in_ms).toBeGreaterThan(30_000);
    expect(relay.health().published).toBe(0);
  });

  test('a message to an exchange that does not exist fails alone (unroutable, naming the exchange); the messages published beside it are not touched', async () => {
    const missing = `${f.exchange}.missing`;
    await f.inTransaction(async (c) => {
      const outbox = transactionOutbox(c, { schema: f.schema });
      await outbox.stage({ to: { exchange: missing, routingKey: 'placed' }, body: 'nowhere' });
      for (let i = 0; i < 5; i++) await outbox.stage(placed(`beside-${i}`));
    });
    const failures: unknown[] = [];
    // One attempt each: a message failed by its neighbour's publish would be dead at once.
    const relay = f.relay({ observer: { onEvent: (e) => e.type === 'failed' && failures.push(e.error) } }, { maxAttempts: 1 });
    await relay.start();
    const rows = await waitFor(async () => {
      const r = await f.rows();
      return r.length === 1 && r[0]!.state === 'dead' ? r : undefined;
    }, { what: 'the five published and removed, the one to the missing exchange dead' });
    expect(rows[0]).toMatchObject({ state: 'dead', attempts: 1, dead_reason: 'unroutable' });
    expect(rows[0]!.last_error).toContain(`exchange "${missing}" does not exist`);
    expect(rows[0]!.last_error).toMatch(/declare the exchange .*or correct the name/);
    expect(failures).toHaveLength(1);
    expect(failures[0]).toBeInstanceOf(UnroutableError);
    const got = await waitFor(async () => {
      const d = await f.drain();
      return d.length > 0 ? d : undefined;
    }, { what: 'the five messages' });
    const all = [...got];
    await waitFor(async () => {
      all.push(...(await f.drain()));
      return all.length >= 5;
    }, { what: 'all five messages' });
    expect(all.map((m) => (JSON.parse(m.content.toString()) as { orderId: string }).orderId).sort()).toEqual(['beside-0', 'beside-1', 'beside-2', 'beside-3', 'beside-4']);
  });

  test('a poison message backs off, then is dead with its reason after maxAttempts; its key holds, other keys are published', async () => {
    await f.inTransaction(async (c) => {
      const outbox = transactionOutbox(c, { schema: f.schema });
      await outbox.stage({ to: { exchange: f.exchange, routingKey: 'nobody-bound' }, body: 'poison', orderingKey: 'k-poison' });
      await outbox.stage(placed('behind-poison', { orderingKey: 'k-poison' }));
      for (let i = 0; i < 5; i++) await outbox.stage(placed(`other-${i}`, { orderingKey: `k-${i}` }));
    });
    const relay = f.relay({}, { maxAttempts: 3 });
    await relay.start();
    const rows = await waitFor(async () => {
      const r = await f.rows();
      return r.some((x) => x.state === 'dead') ? r : undefined;
    }, { what: 'the poison message dead' });
    const got = await waitFor(async () => {
      const m = await f.drain();
      return m.length > 0 ? m : undefined;
    });
    expect(got.map((m) => JSON.parse(m.content.toString()).orderId).sort()).toEqual(['other-0', 'other-1', 'other-2', 'other-3', 'other-4']);
    expect(rows.find((r) => r.state === 'dead')).toMatchObject({ attempts: 3, dead_reason: 'unroutable', ordering_key: 'k-poison' });
    // 'hold': the message behind the dead one stays unpublished.
    expect((await f.rows()).map((r) => [r.ordering_key, r.state])).toEqual([
      ['k-poison', 'dead'],
      ['k-poison', 'pending'],
    ]);
    expect(await relay.stats()).toMatchObject({ pending: 1, dead: { unroutable: 1 } });
  });

  test("deadKeyPolicy 'continue': the messages behind a dead one are published", async () => {
    await f.inTransaction(async (c) => {
      const outbox = transactionOutbox(c, { schema: f.schema });
      await outbox.stage({ to: { exchange: f.exchange, routingKey: 'nobody-bound' }, body: 'poison', orderingKey: 'k' });
      await outbox.stage(placed('behind', { orderingKey: 'k' }));
    });
    const relay = f.relay({}, { maxAttempts: 1, deadKeyPolicy: 'continue' });
    await relay.start();
    const got = await waitFor(async () => {
      const m = await f.drain();
      return m.length > 0 ? m : undefined;
    });
    expect(JSON.parse(got[0]!.content.toString())).toEqual({ orderId: 'behind' });
    // Its row is deleted after the confirm, so possibly a moment after the message arrived.
    await waitFor(async () => (await f.rows()).length === 1, { what: 'the published row removed' });
    expect((await f.rows()).map((r) => r.state)).toEqual(['dead']);
  });

  test('a downstream twophase consumer applies a message published twice (a relay that could not remove it) once', async () => {
    const h = new Harness();
    try {
      const queue = h.queue('outbox-down', [f.exchange]);
      const applied: string[] = [];
      const outcomes: string[] = [];
      const observers = [{ onEvent: (e: ConsumerEvent) => outcomes.push(e.type) }];
      const consumer = h.consumer({ source: h.source({ queue, bindings: [{ exchange: f.exchange, routingKey: 'down' }] }), claimer: new InMemoryClaimer(), observers }, async (m) => {
        applied.push(m.key);
        return ack();
      });
      await consumer.start();
      const [id] = await f.inTransaction((c) => stageOutbox(c, { to: { exchange: f.exchange, routingKey: 'down' }, body: { orderId: 'o-dup' } }, { schema: f.schema }));
      const publisher = f.rabbit();
      await publisher.start();
      const claim = await f.store().claim({ owner: 'test', limit: 10, leaseMs: 5000, systems: ['rabbitmq'], deadKeyPolicy: 'hold' });
      const record: OutboxRecord = claim.records[0]!;
      await publisher.publish(record);
      await publisher.publish(record); // as a second relay would after a lost DELETE
      await publisher.close();
      await waitFor(() => outcomes.includes('committed') && outcomes.includes('done_duplicate'), { what: 'the copy applied and the duplicate acked as done' });
      expect(applied).toEqual([`test:${id}`]);
    } finally {
      await h.cleanup();
    }
  });

  test('LISTEN/NOTIFY wakes an idle relay at COMMIT (polling every 10 minutes)', async () => {
    const store = f.store();
    let claims = 0;
    const counting = Object.assign(Object.create(store) as typeof store, { claim: async (r: Parameters<typeof store.claim>[0]) => store.claim(r).finally(() => claims++) });
    const relay = f.relay({ store: counting, notifier: new PostgresOutboxNotifier({ pool: f.pool }, { schema: f.schema }) }, { pollIntervalMs: 600_000 });
    await relay.start();
    expect(relay.health().listening).toBe(true);
    // The first claim of each lane ran (empty); the relay now sleeps until notified.
    await waitFor(() => claims === relay.options.claimConcurrency);
    await f.inTransaction((c) => stageOutbox(c, placed('o-notified'), { schema: f.schema }));
    const got = await waitFor(async () => {
      const m = await f.drain();
      return m.length > 0 ? m : undefined;
    }, { what: 'the message published after the notification', timeoutMs: 15_000 });
    expect(JSON.parse(got[0]!.content.toString())).toEqual({ orderId: 'o-notified' });
  });

  test('several staging calls in one transaction queue one NOTIFY (the first); the relay still wakes at COMMIT', async () => {
    const relay = f.relay({ notifier: new PostgresOutboxNotifier({ pool: f.pool }, { schema: f.schema }) }, { pollIntervalMs: 600_000 });
    await relay.start();
    const notifyArgs: unknown[] = [];
    await f.inTransaction(async (c) => {
      // The client itself, with a note of each staging statement's notify argument.
      const recording = {
        query: (text: string, params?: unknown[]) => {
          if (text.includes('twophase_outbox_stage(')) notifyArgs.push(params?.[7]);
          return c.query(text, params);
        },
      };
      const outbox = transactionOutbox(recording, { schema: f.schema });
      for (const id of ['o-1', 'o-2', 'o-3']) await outbox.stage(placed(id));
    });
    expect(notifyArgs).toEqual([true, false, false]);
    const got = await waitFor(async () => {
      const m = await f.drain();
      return m.length === 3 ? m : undefined;
    }, { what: 'the three messages published after the one notification', timeoutMs: 15_000 });
    expect(got.map((m) => (JSON.parse(m.content.toString()) as { orderId: string }).orderId).sort()).toEqual(['o-1', 'o-2', 'o-3']);
    await relay.stop();
  });

  test('a lost LISTEN session: the relay polls meanwhile, the notifier listens again and notifications wake the relay', async () => {
    const appName = `tp-outbox-listen-${process.pid}-${Date.now()}`;
    const listenPool = new Pool(pgConfig({ application_name: appName, max: 2 }));
    listenPool.on('error', () => undefined);
    try {
      const relay = f.relay({ notifier: new PostgresOutboxNotifier({ pool: listenPool, logger: f.logger }, { schema: f.schema, reconnectDelayMs: 50 }) }, { pollIntervalMs: 600_000 });
      await relay.start();
      expect(relay.health().listening).toBe(true);
      await f.pool.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [appName]);
      await waitFor(() => f.logger.has('notifications lost'), { what: 'the lost session reported' });
      await waitFor(() => relay.health().listening, { what: 'listening again' });
      await f.inTransaction((c) => stageOutbox(c, placed('o-after-reconnect'), { schema: f.schema }));
      const got = await waitFor(async () => {
        const m = await f.drain();
        return m.length > 0 ? m : undefined;
      }, { what: 'the message published after the notification', timeoutMs: 15_000 });
      expect(JSON.parse(got[0]!.content.toString())).toEqual({ orderId: 'o-after-reconnect' });
      await relay.stop();
    } finally {
      await listenPool.end();
    }
  });

  test('polling alone (no notifier, as behind a transaction-pooling proxy) publishes too', async () => {
    const relay = f.relay({}, { pollIntervalMs: 20 });
    await relay.start();
    expect(relay.health().listening).toBe(false);
    await f.inTransaction((c) => stageOutbox(c, placed('o-polled'), { schema: f.schema, notify: false }));
    const got = await waitFor(async () => {
      const m = await f.drain();
      return m.length > 0 ? m : undefined;
    });
    expect(JSON.parse(got[0]!.content.toString())).toEqual({ orderId: 'o-polled' });
  });
});
