/**
 * examples/http-idempotency over real HTTP (the Express app listening on port 0, requests with
 * fetch) against real PostgreSQL and Redis: the claims in the PostgreSQL inbox (transactional
 * mode: the payment row commits with the key) or in Redis (the row is written beside the claim).
 * Every test counts payment rows per key: the table has no unique key, so a duplicate would show.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import type { Redis } from 'ioredis';
import type { Claimer } from '../../../src';
import { PostgresClaimer } from '../../../adapters/postgres';
import { RedisClaimer } from '../../../adapters/redis';
import { type Charge, createPaymentsApp, createPaymentsTable, ProviderRefusedError } from '../../../examples/http-idempotency/app';
import { describeWithServices } from '../../support/services';
import { connectRedis, deleteMatching, silentLogger, uniquePrefix } from '../redis/support/redis-helpers';
import { freshSchema, type SchemaFixture } from './support/pg-helpers';

type Store = 'postgres-transactional' | 'redis';

describeWithServices(['postgres', 'redis'], 'examples/http-idempotency over HTTP (real PostgreSQL and Redis)', () => {
  let f: SchemaFixture;
  let redis: Redis;
  let prefix: string;
  let server: Server | undefined;
  let base = '';
  let table = '';
  beforeEach(async () => {
    f = await freshSchema('http');
    table = `${f.schema}.payments`;
    await createPaymentsTable(f.pool, table);
    redis = await connectRedis();
    prefix = uniquePrefix('http');
  });
  afterEach(async () => {
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
    await deleteMatching(redis, `${prefix}*`);
    await redis.quit();
    await f.cleanup();
  });

  async function start(store: Store, options: { charge?: Charge; waitMs?: number } = {}): Promise<void> {
    const claimer: Claimer =
      store === 'redis'
        ? new RedisClaimer({ redis, logger: silentLogger }, { prefix })
        : new PostgresClaimer({ pool: f.pool, logger: silentLogger }, { schema: f.schema, mode: 'transactional' });
    const app = createPaymentsApp({ claimer, pool: f.pool, table, leaseTtlMs: 5000, ...options });
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  function post(key: string | undefined, body: unknown, account = 'acct-1'): Promise<Response> {
    return fetch(`${base}/payments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-account': account, ...(key === undefined ? {} : { 'idempotency-key': key }) },
      body: JSON.stringify(body),
    });
  }

  async function rows(key: string): Promise<number> {
    const r = await f.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE idempotency_key = $1`, [key]);
    return Number(r.rows[0]!.n);
  }

  /** A charge that waits until `open()` is called, counting its calls. */
  function gatedCharge() {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let entered!: () => void;
    const started = new Promise<void>((resolve) => (entered = resolve));
    const calls = { count: 0 };
    const charge: Charge = async () => {
      calls.count++;
      entered();
      await gate;
    };
    return { charge, open, started, calls };
  }

  describe.each<Store>(['postgres-transactional', 'redis'])('claims in %s', (store) => {
    test('a repeat gets the first status code and body with Idempotent-Replayed: true; one payment row', async () => {
      await start(store);
      const first = await post('pay-1', { amount: 1200 });
      const firstBody = (await first.json()) as { id: string };
      expect(first.status).toBe(201);
      expect(first.headers.get('idempotent-replayed')).toBe('false');
      const again = await post('pay-1', { amount: 1200 });
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.json()).toEqual(firstBody);
      expect(await rows('pay-1')).toBe(1);
    });

    test('a repeat while the first request runs gets 409 with Retry-After; then the first completes once', async () => {
      const g = gatedCharge();
      await start(store, { charge: g.charge });
      const first = post('pay-2', { amount: 500 });
      await g.started;
      const during = await post('pay-2', { amount: 500 });
      expect(during.status).toBe(409);
      expect(during.headers.get('retry-after')).toBe('1');
      expect(await during.json()).toEqual({ error: 'request_in_progress' });
      g.open();
      expect((await first).status).toBe(201);
      expect(g.calls.count).toBe(1);
      expect(await rows('pay-2')).toBe(1);
    });

    test('20 concurrent identical requests, waiting for the first: one payment, one body for all', async () => {
      const g = gatedCharge();
      await start(store, { charge: g.charge, waitMs: 10_000 });
      const all = Array.from({ length: 20 }, () => post('pay-3', { amount: 700 }));
      await g.started;
      g.open();
      const responses = await Promise.all(all);
      const bodies = await Promise.all(responses.map((r) => r.json() as Promise<{ id: string }>));
      expect(responses.map((r) => r.status)).toEqual(Array(20).fill(201));
      expect(new Set(bodies.map((b) => b.id)).size).toBe(1);
      expect(responses.filter((r) => r.headers.get('idempotent-replayed') === 'false')).toHaveLength(1);
      expect(g.calls.count).toBe(1);
      expect(await rows('pay-3')).toBe(1);
    });

    test('the same key with another body gets 422; the first payment stands alone', async () => {
      await start(store);
      expect((await post('pay-4', { amount: 100 })).status).toBe(201);
      const reused = await post('pay-4', { amount: 999 });
      expect(reused.status).toBe(422);
      expect(await reused.json()).toEqual({ error: 'idempotency_key_reused_with_another_body' });
      expect(await rows('pay-4')).toBe(1);
    });

    test('the same key from another account is another payment (scoped by actor)', async () => {
      await start(store);
      expect((await post('pay-5', { amount: 100 }, 'acct-1')).status).toBe(201);
      expect((await post('pay-5', { amount: 100 }, 'acct-2')).status).toBe(201);
      expect(await rows('pay-5')).toBe(2);
    });

    test('no key, or a bad body, answers 400 before anything is claimed', async () => {
      await start(store);
      expect((await post(undefined, { amount: 100 })).status).toBe(400);
      expect((await post('pay-6', { amount: -1 })).status).toBe(400);
      expect((await post('pay-6', { amount: 100 })).status).toBe(201);
    });

    test('a charge with an unknown outcome answers 500 and blocks the key (409 previous_attempt_failed); a refused charge frees it', async () => {
      let mode: 'unknown' | 'refused' | 'ok' = 'unknown';
      await start(store, {
        charge: async () => {
          if (mode === 'unknown') throw new Error('provider timed out');
          if (mode === 'refused') throw new ProviderRefusedError('connection refused');
        },
      });
      expect((await post('pay-7', { amount: 100 })).status).toBe(500);
      mode = 'ok';
      const blocked = await post('pay-7', { amount: 100 });
      expect(blocked.status).toBe(409);
      expect(((await blocked.json()) as { error: string }).error).toBe('previous_attempt_failed');
      expect(await rows('pay-7')).toBe(0);

      mode = 'refused';
      expect((await post('pay-8', { amount: 100 })).status).toBe(503);
      mode = 'ok';
      expect((await post('pay-8', { amount: 100 })).status).toBe(201);
      expect(await rows('pay-8')).toBe(1);
    });
  });
});
