/**
 * GatedClaimer when its gate fails: a private redis-server on a free port that the test stops,
 * pauses (CLIENT PAUSE), flushes and restarts, in front of a transactional PostgresClaimer on the
 * shared PostgreSQL (a fresh schema). Claims fall back to PostgreSQL alone (duplicates are still
 * refused, every effect is booked once), and the same claimer returns to the gate once Redis is
 * back, without a restart. Ledger rows are counted per key (the ledger has no unique key).
 */
import type { PoolClient } from 'pg';
import Redis from 'ioredis';
import type { ClaimResult } from '../../../src';
import { GatedClaimer } from '../../../adapters/gated';
import { PostgresClaimer } from '../../../adapters/postgres';
import { RedisClaimer } from '../../../adapters/redis';
import { describeWithServices } from '../../support/services';
import { silentLogger, uniquePrefix} from '../redis/support/redis-helpers';
import { waitFor } from '../../support/wait';
import { RedisServerProcess } from '../redis/support/redis-process';
import { type InboxFixture, inboxFixture, writeLedger } from './support/inbox-fixture';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const opts = { leaseTtlMs: 5000, doneTtlMs: 60_000 };
const GATE_RETRY_MS = 300;

function acquired(result: ClaimResult) {
  if (result.state !== 'acquired') throw new Error(`expected acquired, got ${result.state}`);
  return result;
}

describeWithServices(['redis', 'postgres'], 'GatedClaimer: gate outages on a private redis-server', () => {
  let server: RedisServerProcess;
  let admin: Redis;
  let client: Redis;
  let gate: RedisClaimer;
  let claimer: GatedClaimer;
  let f: InboxFixture;
  let checkouts: number;
  const warnings: string[] = [];
  const logger = { ...silentLogger, warn: (_o: object, msg?: string) => void warnings.push(msg ?? '') };

  beforeAll(async () => {
    server = await RedisServerProcess.start();
    admin = new Redis({ host: '127.0.0.1', port: server.port, retryStrategy: () => 100, maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined);
  }, 30_000);
  afterAll(async () => {
    admin?.disconnect();
    await server?.destroy();
  });

  beforeEach(async () => {
    if (!server.running) await server.startAgain();
    warnings.length = 0;
    f = await inboxFixture('gout');
    checkouts = 0;
    f.pool.on('acquire', () => void checkouts++);
    client = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true, retryStrategy: () => 100 });
    gate = new RedisClaimer({ redis: client, logger: silentLogger }, { prefix: uniquePrefix('gout'), operationTimeoutMs: 200 });
    const truth = new PostgresClaimer({ pool: f.pool, logger: silentLogger }, { schema: f.schema, mode: 'transactional' });
    claimer = new GatedClaimer({ gate, truth, logger }, { gateRetryMs: GATE_RETRY_MS });
  });
  afterEach(async () => {
    await admin.call('CLIENT', 'UNPAUSE').catch(() => undefined);
    await gate.close();
    client.disconnect();
    await f.cleanup();
  });

  /** Claims concurrently `copies` times; books the one acquired; returns the other states. */
  async function bookAmong(key: string, copies: number): Promise<string[]> {
    const results = await Promise.all(Array.from({ length: copies }, () => claimer.claim(key, opts)));
    const winners = results.filter((r) => r.state === 'acquired');
    expect(winners).toHaveLength(1);
    const a = acquired(winners[0]!);
    await writeLedger(a.receipt.transaction as PoolClient, f.ledger, key);
    await a.receipt.commit({ booked: key });
    return results.filter((r) => r.state !== 'acquired').map((r) => r.state);
  }

  /** Waits until the gate answers again: a claim served without any PostgreSQL checkout. */
  async function backToGate(key: string): Promise<void> {
    await waitFor(
      async () => {
        await sleep(GATE_RETRY_MS);
        const before = checkouts;
        const r = await claimer.claim(key, opts);
        return r.state === 'done' && checkouts === before && !claimer.gateDown;
      }, { timeoutMs: 20_000, intervalMs: 25, what: 'duplicates served by the gate again' });
  }

  test('Redis stopped: duplicates during the outage are refused by PostgreSQL, each effect books once; after a restart the same claimer repopulates and returns to the gate', async () => {
    await claimer.ready();
    await server.stop();
    const others = await bookAmong('out-1', 10);
    expect(others.every((s) => s === 'busy')).toBe(true);
    const dup = await claimer.claim('out-1', opts);
    expect(dup.state === 'done' && dup.result).toEqual({ booked: 'out-1' });
    expect(claimer.gateDown).toBe(true);
    expect(claimer.stats.fallbackClaims).toBeGreaterThanOrEqual(11);
    expect(warnings.filter((w) => /failed/.test(w))).toHaveLength(1);

    await server.startAgain(); // empty: no persistence
    await waitFor(() => client.status === 'ready', { timeoutMs: 10_000, intervalMs: 25, what: 'client reconnected' });
    await backToGate('out-1');
    expect(claimer.stats.repopulated).toBeGreaterThanOrEqual(1);
    expect(warnings.filter((w) => /answers again/.test(w))).toHaveLength(1);
    expect((await f.counts()).get('out-1')).toBe(1);
  });

  test('Redis paused (CLIENT PAUSE): claims fall back after the gate deadline, stay correct, and return to the gate after the pause', async () => {
    await claimer.ready();
    await admin.call('CLIENT', 'PAUSE', '4000', 'ALL');
    const started = performance.now();
    const others = await bookAmong('pause-1', 5);
    expect(others.every((s) => s === 'busy')).toBe(true);
    expect(performance.now() - started).toBeLessThan(3000); // not held for the whole pause
    const dup = await claimer.claim('pause-1', opts);
    expect(dup.state === 'done' && dup.result).toEqual({ booked: 'pause-1' });
    await admin.call('CLIENT', 'UNPAUSE');
    await backToGate('pause-1');
    expect((await f.counts()).get('pause-1')).toBe(1);
  });

  test('Redis flushed (FLUSHALL): every completed key is answered from PostgreSQL with its result and repopulated; none is booked again', async () => {
    await claimer.ready();
    const keys = Array.from({ length: 20 }, (_, i) => `flush-${i}`);
    for (const key of keys) await bookAmong(key, 1);
    await admin.flushall();
    const answers = await Promise.all(keys.map((key) => claimer.claim(key, opts)));
    expect(answers.map((r) => (r.state === 'done' ? r.result : r.state))).toEqual(keys.map((key) => ({ booked: key })));
    expect(claimer.stats.repopulated).toBe(20);
    const before = checkouts;
    const again = await Promise.all(keys.map((key) => claimer.claim(key, opts)));
    expect(again.every((r) => r.state === 'done')).toBe(true);
    expect(checkouts).toBe(before);
    const counts = await f.counts();
    expect(keys.every((key) => counts.get(key) === 1)).toBe(true);
  });

  test('Redis down at start: ready() succeeds on PostgreSQL alone (logged), claims are correct, and the gate is used once Redis is up', async () => {
    await server.stop();
    const quickGate = new RedisClaimer({ redis: client, logger: silentLogger }, { prefix: uniquePrefix('gout-start'), operationTimeoutMs: 200, readyTimeoutMs: 300 });
    const truth = new PostgresClaimer({ pool: f.pool, logger: silentLogger }, { schema: f.schema, mode: 'transactional' });
    const startingDown = new GatedClaimer({ gate: quickGate, truth, logger }, { gateRetryMs: GATE_RETRY_MS });
    await startingDown.ready();
    expect(startingDown.gateDown).toBe(true);
    claimer = startingDown;
    await bookAmong('start-1', 3);
    await server.startAgain();
    await waitFor(() => client.status === 'ready', { timeoutMs: 10_000, intervalMs: 25, what: 'client reconnected' });
    await backToGate('start-1');
    await quickGate.close();
    expect((await f.counts()).get('start-1')).toBe(1);
  });
});
