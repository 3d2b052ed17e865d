/**
 * The outbox relay's lease on real PostgreSQL + RabbitMQ: two relays at once neither
 * double-publish nor reorder a key; a slow publish keeps its lease by extending it; a relay whose
 * lease was taken over removes and marks nothing (fencing); stop() lets a publish in flight finish,
 * or gives the leases back at its deadline.
 */
import { Pool } from 'pg';
import { type OutboxRecord, type OutboxRelayEvent, runConsumers } from '../../../src';
import { PostgresOutboxStore } from '../../../adapters/postgres';
import { LoopbackProxy, type ProxiedPair } from '../../support/loopback-proxy';
import { pgConfig } from './support/pg-helpers';
import { transactionOutbox } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { waitFor } from '../../support/wait';
import { GatedPublisher, OutboxFixture } from './support/outbox-fixture';

describeWithServices(['rabbitmq', 'postgres'], 'outbox relay: leases, fencing, concurrency, stop', () => {
  let f: OutboxFixture;
  beforeEach(async () => {
    f = await OutboxFixture.create('outbox_relay');
  });
  afterEach(async () => {
    await f.cleanup();
  });

  const msg = (key: string, n: number) => ({ to: { exchange: f.exchange, routingKey: 'placed' }, body: { key, n }, orderingKey: key });

  test('two relays at once: every message published once, and each key in staging order', async () => {
    const keys = ['a', 'b', 'c', 'd', 'e', 'f'];
    const perKey = 15;
    // One transaction per round: staging order is commit order within each key.
    for (let n = 0; n < perKey; n++) {
      await f.inTransaction(async (c) => {
        const outbox = transactionOutbox(c, { schema: f.schema });
        for (const key of keys) await outbox.stage(msg(key, n));
      });
    }
    const published: Record<string, number> = {};
    const observer = (name: string) => ({ onEvent: (e: OutboxRelayEvent) => e.type === 'published' && (published[name] = (published[name] ?? 0) + 1) });
    const one = f.relay({ observer: observer('one') }, { name: 'one', batchSize: 7, keyConcurrency: 3 });
    const two = f.relay({ observer: observer('two') }, { name: 'two', batchSize: 7, keyConcurrency: 3 });
    await Promise.all([one.start(), two.start()]);
    const got: { key: string; n: number; id: string }[] = [];
    await waitFor(async () => {
      for (const m of await f.drain()) got.push({ ...(JSON.parse(m.content.toString()) as { key: string; n: number }), id: String(m.properties.messageId) });
      return got.length >= keys.length * perKey && (await f.rows()).length === 0;
    }, { what: 'every message published and removed' });
    expect(new Set(got.map((g) => g.id)).size).toBe(got.length);
    expect(got.length).toBe(keys.length * perKey);
    for (const key of keys) {
      expect(got.filter((g) => g.key === key).map((g) => g.n)).toEqual([...Array(perKey).keys()]);
    }
    expect((published.one ?? 0) + (published.two ?? 0)).toBe(keys.length * perKey);
  });

  test('stagers of one ordering key are serialized until COMMIT (sequence order = commit order); other keys do not wait', async () => {
    const [c1, c2, c3] = await Promise.all([f.pool.connect(), f.pool.connect(), f.pool.connect()]);
    try {
      for (const c of [c1, c2, c3]) await c.query('BEGIN');
      await transactionOutbox(c1, { schema: f.schema }).stage(msg('a', 1));
      await transactionOutbox(c2, { schema: f.schema }).stage(msg('b', 1)); // another key: no wait
      const pid3 = (await c3.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      let staged3 = false;
      const third = transactionOutbox(c3, { schema: f.schema }).stage(msg('a', 2)).then(() => (staged3 = true));
      await waitFor(async () => (await f.pool.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, [pid3])).rowCount === 1, { what: 'the second stager of key a waiting' });
      expect(staged3).toBe(false);
      await c2.query('COMMIT');
      await c1.query('COMMIT');
      await third;
      await c3.query('COMMIT');
    } finally {
      for (const c of [c1, c2, c3]) c.release();
    }
    const rows = await f.pool.query<{ k: string; n: number }>(`SELECT ordering_key AS k, convert_from(body, 'UTF8')::jsonb->>'n' AS n FROM ${f.schema}.twophase_outbox ORDER BY seq`);
    expect(rows.rows.filter((r) => r.k === 'a').map((r) => Number(r.n))).toEqual([1, 2]);
  });

  /** Holds the publishes of key `stuck` until `open()`; the others go straight to the broker. */
  function holdKey(stuck: string) {
    const inner = f.rabbit();
    const held: (() => void)[] = [];
    const publisher = {
      system: inner.system,
      start: () => inner.start(),
      close: () => inner.close(),
      publish: async (record: OutboxRecord) => {
        if (record.orderingKey === stuck) await new Promise<void>((resolve) => held.push(resolve));
        return inner.publish(record);
      },
    };
    return { publisher, held, open: () => held.splice(0).forEach((go) => go()) };
  }

  test('claimConcurrency 2 (the default): while one claim waits on the broker, the next is claimed and published; a key stays in order', async () => {
    const gate = holdKey('stuck');
    await f.inTransaction((c) => transactionOutbox(c, { schema: f.schema }).stage(msg('stuck', 0)));
    const relay = f.relay({ publisher: gate.publisher }, { pollIntervalMs: 50 });
    expect(relay.options.claimConcurrency).toBe(2);
    await relay.start();
    await waitFor(() => gate.held.length === 1, { what: 'the stuck publish in flight' });
    await f.inTransaction((c) => transactionOutbox(c, { schema: f.schema }).stageMany([msg('free', 0), msg('stuck', 1)]));
    // The free key goes out while the first claim still waits; the stuck key's next message does not overtake its head.
    await waitFor(async () => (await f.rows()).length === 2, { what: 'the free message published and removed' });
    const early = (await f.drain()).map((m) => JSON.parse(m.content.toString()) as { key: string; n: number });
    expect(early).toEqual([{ key: 'free', n: 0 }]);
    expect((await f.rows()).map((r) => r.lease_owner === null || r.lease_owner === relay.owner)).toEqual([true, true]);
    gate.open();
    await waitFor(async () => {
      gate.open();
      return (await f.rows()).length === 0;
    }, { what: 'the stuck key published' });
    await relay.stop();
    const late = (await f.drain()).map((m) => JSON.parse(m.content.toString()) as { key: string; n: number });
    expect(late).toEqual([{ key: 'stuck', n: 0 }, { key: 'stuck', n: 1 }]);
  });

  test('claimConcurrency 1: the next claim waits for the current one (nothing else is published while it waits)', async () => {
    const gate = holdKey('stuck');
    await f.inTransaction((c) => transactionOutbox(c, { schema: f.schema }).stage(msg('stuck', 0)));
    const relay = f.relay({ publisher: gate.publisher }, { pollIntervalMs: 50, claimConcurrency: 1 });
    await relay.start();
    await waitFor(() => gate.held.length === 1, { what: 'the stuck publish in flight' });
    await f.inTransaction((c) => transactionOutbox(c, { schema: f.schema }).stage(msg('free', 0)));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await f.drain()).toEqual([]);
    gate.open();
    await waitFor(async () => (await f.rows()).length === 0, { what: 'both published' });
    await relay.stop();
    expect((await f.drain()).map((m) => (JSON.parse(m.content.toString()) as { key: string }).key)).toEqual(['stuck', 'free']);
  });

  test('a slow publish keeps its lease: the relay extends it past leaseMs, so no other relay takes the message', async () => {
    await f.inTransaction((c) => transactionOutbox(c, { schema: f.schema }).stage(msg('slow', 0)));
    const gated = new GatedPublisher(f.rabbit());
    const relay = f.relay({ publisher: gated }, { leaseMs: 1000, extendIntervalMs: 100 });
    await relay.start();
    await waitFor(() => gated.waiting.length === 1, { what: 'the publish in flight' });
    const first = (await f.pool.query<{ at: Date }>(`SELECT lease_expires_at AS at FROM ${f.schema}.twophase_outbox`)).rows[0]!.at;
    // Wait, on the server's clock, until the first lease has run out.
    await waitFor(async () => (await f.pool.query<{ past: boolean }>('SELECT clock_timestamp() > $1 AS past', [first])).rows[0]!.past, { what: 'the first lease to run out' });
    const rival = await f.store().claim({ owner: 'rival', limit: 10, leaseMs: 1000, systems: ['rabbitmq'], deadKeyPolicy: 'hold' });
    expect(rival.records).toEqual([]);
    const [row] = await f.rows();
    expect(row!.lease_owner).toBe(relay.owner);
    gated.openAll();
    await waitFor(async () => (await f.rows()).length === 0, { what: 'published and removed' });
    expect((await f.drain()).length).toBe(1);
  });

  test('fencing: a relay whose lease was taken over publishes no more of it and removes nothing; the new holder keeps its rows', async () => {
    await f.inTransaction(async (c) => {
      const outbox = transactionOutbox(c, { schema: f.schema });
      await outbox.stage(msg('k', 0));
      await outbox.stage(msg('k', 1));
    });
    const gated = new GatedPublisher(f.rabbit());
    const events: OutboxRelayEvent[] = [];
    const relay = f.relay({ publisher: gated, observer: { onEvent: (e) => events.push(e) } }, { leaseMs: 5000, extendIntervalMs: 50 });
    await relay.start();
    await waitFor(() => gated.waiting.length === 1, { what: 'the first publish in flight' });
    // The lease runs out and the successor claims in one transaction: the expired rows stay locked
    // until it commits, so the old holder's own polls (every 50 ms) cannot claim them back meanwhile.
    const taken = await f.inTransaction(async (c) => {
      await c.query(`UPDATE ${f.schema}.twophase_outbox SET lease_expires_at = clock_timestamp() - interval '1 second' WHERE lease_owner IS NOT NULL`);
      return new PostgresOutboxStore({ pool: c as unknown as Pool }, { schema: f.schema }).claim({ owner: 'successor', limit: 10, leaseMs: 60_000, systems: ['rabbitmq'], deadKeyPolicy: 'hold' });
    });
    const store = f.store();
    expect(taken.records.map((r) => r.sequence)).toHaveLength(2);
    const old = events.find((e) => e.type === 'claimed')!;
    expect(taken.lease.fencingToken).toBeGreaterThan(old.type === 'claimed' ? old.fencingToken : Infinity);
    await waitFor(() => events.some((e) => e.type === 'lease_lost'), { what: 'the relay to notice the lost lease' });
    gated.openAll();
    await waitFor(() => events.some((e) => e.type === 'completed'), { what: 'the old holder to settle' });
    // The copy in flight reached the broker, the second message was never published by the old holder.
    expect(gated.waiting).toHaveLength(1);
    expect(events.find((e) => e.type === 'completed')).toMatchObject({ removed: 0 });
    const rows = await f.rows();
    expect(rows.map((r) => [r.lease_owner, r.fencing_token])).toEqual([
      ['successor', String(taken.lease.fencingToken)],
      ['successor', String(taken.lease.fencingToken)],
    ]);
    // The store's own statements under the old token change nothing either.
    const oldLease = { owner: relay.owner, fencingToken: old.type === 'claimed' ? old.fencingToken : 0 };
    const seqs = rows.map((r) => r.seq);
    expect(await store.extend(oldLease, seqs, 1000)).toEqual([]);
    expect(await store.release(oldLease, seqs)).toBe(0);
    expect(await store.fail(oldLease, [{ sequence: seqs[0]!, reason: 'x', error: 'x', retryInMs: undefined }])).toBe(0);
    expect(await store.complete(oldLease, seqs)).toBe(0);
    expect(await store.complete(taken.lease, seqs)).toBe(2);
  });

  test('stop() lets a publish in flight finish: it is confirmed and removed', async () => {
    await f.inTransaction((c) => transactionOutbox(c, { schema: f.schema }).stage(msg('stop', 0)));
    const gated = new GatedPublisher(f.rabbit());
    const relay = f.relay({ publisher: gated }, { shutdownTimeoutMs: 30_000 });
    await relay.start();
    await waitFor(() => gated.waiting.length === 1);
    const stopping = relay.stop();
    expect(relay.health().state).toBe('stopping');
    gated.openAll();
    await stopping;
    expect(relay.health().state).toBe('stopped');
    expect(await f.rows()).toEqual([]);
    expect((await f.drain()).length).toBe(1);
  });

  test('stop() past shutdownTimeoutMs gives the leases back; another relay publishes the messages (same ids)', async () => {
    const ids = await f.inTransaction((c) => transactionOutbox(c, { schema: f.schema }).stageMany([msg('s', 0), msg('s', 1)]));
    const gated = new GatedPublisher(f.rabbit());
    const relay = f.relay({ publisher: gated }, { shutdownTimeoutMs: 100, leaseMs: 60_000 });
    await relay.start();
    await waitFor(() => gated.waiting.length === 1);
    await relay.stop();
    expect((await f.rows()).map((r) => r.lease_owner)).toEqual([null, null]);
    const next = f.relay();
    await next.start();
    // A drain takes what has arrived so far: gather until both are in.
    const got: Awaited<ReturnType<typeof f.drain>> = [];
    await waitFor(async () => {
      got.push(...(await f.drain()));
      return got.length === 2;
    }, { what: 'both messages published by the next relay' });
    expect(got.map((m) => m.properties.messageId)).toEqual(ids);
  });

  test('runConsumers runs a relay like a consumer: started, in the runner health, stopped by runner.stop()', async () => {
    await f.inTransaction((c) => transactionOutbox(c, { schema: f.schema }).stage(msg('runner', 0)));
    const relay = f.relay();
    const runner = await runConsumers([relay], { signals: [], exitProcess: false, logger: f.logger });
    await waitFor(async () => (await f.rows()).length === 0, { what: 'published by the relay under the runner' });
    expect(runner.health()).toMatchObject({ live: true, ready: true, consumers: [expect.objectContaining({ name: 'outbox-relay', state: 'running', published: 1 })] });
    await runner.stop();
    expect(relay.health().state).toBe('stopped');
    expect((await f.drain()).length).toBe(1);
  });

  test('runConsumers([relay]): the relay logs one info line when its start() completes, naming itself, its outbox table, its brokers and its concurrency', async () => {
    const relay = f.relay({}, { name: 'start-line-relay', batchSize: 20, keyConcurrency: 5, claimConcurrency: 3 });
    const runner = await runConsumers([relay], { signals: [], exitProcess: false, logger: f.logger });
    const started = f.logger.lines.filter((l) => /relay started/.test(l.msg ?? ''));
    expect(started).toEqual([
      {
        level: 'info',
        msg: 'twophase: outbox relay started',
        obj: {
          relay: 'start-line-relay',
          outbox: { store: 'postgresql', schema: f.schema, table: `${f.schema}.twophase_outbox` },
          systems: ['rabbitmq'],
          listening: false,
          batchSize: 20,
          claimConcurrency: 3,
          keyConcurrency: 5,
          pollIntervalMs: 50,
        },
      },
    ]);
    await runner.stop();
    expect(f.logger.lines.filter((l) => /relay started/.test(l.msg ?? ''))).toHaveLength(1);
  });

  test('a relay given no logger writes its start line on stderr, as a consumer does', async () => {
    const written: string[] = [];
    const write = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(chunk.toString());
      return true;
    });
    try {
      const relay = f.relay({ logger: undefined }, { name: 'default-logger-relay' });
      await relay.start();
      await relay.stop();
    } finally {
      write.mockRestore();
    }
    const lines = written.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.filter((l) => l.msg === 'twophase: outbox relay started')).toEqual([
      expect.objectContaining({ level: 'info', relay: 'default-logger-relay', outbox: { store: 'postgresql', schema: f.schema, table: `${f.schema}.twophase_outbox` }, systems: ['rabbitmq'] }),
    ]);
  });

  test('PostgreSQL unreachable: claims fail, the relay logs once and retries; once it answers, the messages are published', async () => {
    const proxy = new CuttableProxy(pgConfig().host!, Number(pgConfig().port));
    const port = await proxy.listen();
    const viaProxy = new Pool(pgConfig({ port, max: 2, connectionTimeoutMillis: 2000 }));
    viaProxy.on('error', () => undefined);
    try {
      const relay = f.relay({ store: new PostgresOutboxStore({ pool: viaProxy }, { schema: f.schema, operationTimeoutMs: 2000 }) }, { storeRetryDelayMs: 50 });
      await relay.start();
      proxy.down = true;
      await waitFor(() => f.logger.has('claiming failed'), { what: 'the failed claim logged' });
      await f.inTransaction((c) => transactionOutbox(c, { schema: f.schema }).stage(msg('outage', 0)));
      expect(relay.health()).toMatchObject({ live: true, state: 'running' });
      proxy.down = false;
      await waitFor(() => f.logger.has('the store answers again'), { what: 'the store back' });
      await waitFor(async () => (await f.rows()).length === 0, { what: 'published after the outage' });
      expect(f.logger.lines.filter((l) => l.msg?.includes('claiming failed'))).toHaveLength(1);
      expect((await f.drain()).length).toBe(1);
      await relay.stop();
    } finally {
      await viaProxy.end().catch(() => undefined);
      await proxy.close();
    }
  });
});

/** A proxy that, while `down`, cuts every connection that sends anything. */
class CuttableProxy extends LoopbackProxy {
  down = false;

  protected override fromClient(chunk: Buffer, pair: ProxiedPair): void {
    if (this.down) {
      pair.client.destroy();
      pair.upstream.destroy();
      return;
    }
    super.fromClient(chunk, pair);
  }
}
