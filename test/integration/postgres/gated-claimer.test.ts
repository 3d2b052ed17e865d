/**
 * GatedClaimer on the real stores: a RedisClaimer gate (shared Redis, a unique prefix) in front of
 * a PostgresClaimer truth (shared PostgreSQL, a fresh schema).
 * - the conformance suite, unchanged, with a standalone truth (the transactional truth's lease is
 *   its transaction, so the takeover rules of the suite do not apply to it; its rules are below);
 * - with a transactional truth: duplicates cost no PostgreSQL round trip (pool checkouts counted),
 *   a key done in PostgreSQL but missing in Redis is answered from PostgreSQL and repopulated, and
 *   a key whose transaction rolled back is never done in Redis (both holes of docs/gated.md).
 */
import { Pool, type PoolClient } from 'pg';
import type Redis from 'ioredis';
import { ClaimerUnavailableError, type ClaimResult } from '../../../src';
import { GatedClaimer } from '../../../adapters/gated';
import { PostgresClaimer, TransactionAbortedError } from '../../../adapters/postgres';
import { diagnoseRedisKey, recordKey, RedisClaimer } from '../../../adapters/redis';
import { type ClaimerFactory, describeClaimerConformance } from '../../conformance/claimer-conformance';
import { describeRunOnceConformance } from '../../conformance/run-once-conformance';
import { ReplyFaults } from '../../conformance/reply-faults';
import { describeWithServices } from '../../support/services';
import { connectRedis, silentLogger, uniquePrefix } from '../redis/support/redis-helpers';
import { freshSchema, pgConfig } from './support/pg-helpers';
import { type InboxFixture, inboxFixture, writeLedger } from './support/inbox-fixture';
import { replyDroppingPool } from './support/reply-dropping-pool';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function acquired(result: ClaimResult) {
  if (result.state !== 'acquired') throw new Error(`expected acquired, got ${result.state}`);
  return result;
}

describeWithServices(['redis', 'postgres'], 'GatedClaimer: Redis gate, PostgreSQL truth', () => {
  let redis: Redis;
  beforeAll(async () => {
    redis = await connectRedis();
  });
  afterAll(() => redis?.disconnect());

  const gatedFactory: ClaimerFactory = async () => {
    const f = await freshSchema('gconf');
    const faults = new ReplyFaults();
    const prefix = uniquePrefix('gated-conf');
    const gate = new RedisClaimer({ redis, logger: silentLogger }, { prefix });
    const truth = new PostgresClaimer({ pool: replyDroppingPool(f.pool, faults) }, { schema: f.schema });
    const claimer = new GatedClaimer({ gate, truth, logger: silentLogger });
    await claimer.ready();
    return {
      claimer,
      leaseTtlMs: 1000,
      advance: sleep,
      dropNextReply: (operation) => faults.dropNext(operation),
      cleanup: async () => {
        await gate.close();
        await f.cleanup();
      },
    };
  };
  describeClaimerConformance('GatedClaimer (RedisClaimer gate, standalone PostgresClaimer truth)', gatedFactory, { claimMany: false, commitMany: false, transactional: false });
  describeRunOnceConformance('GatedClaimer (RedisClaimer gate, standalone PostgresClaimer truth)', gatedFactory);

  describe('with a transactional truth', () => {
    let f: InboxFixture;
    let prefix: string;
    let claimer: GatedClaimer;
    let gate: RedisClaimer;
    let checkouts: number;
    const opts = { leaseTtlMs: 5000, doneTtlMs: 60_000 };

    beforeEach(async () => {
      f = await inboxFixture('gated');
      prefix = uniquePrefix('gated');
      checkouts = 0;
      f.pool.on('acquire', () => void checkouts++);
      gate = new RedisClaimer({ redis, logger: silentLogger }, { prefix });
      const truth = new PostgresClaimer({ pool: f.pool, logger: silentLogger }, { schema: f.schema, mode: 'transactional' });
      claimer = new GatedClaimer({ gate, truth, logger: silentLogger });
      await claimer.ready();
    });
    afterEach(async () => {
      await gate.close();
      await f.cleanup();
    });

    /** Claims `key`, writes its ledger row through the transaction, commits with `result`. */
    async function book(key: string, result: unknown = { booked: key }): Promise<void> {
      const a = acquired(await claimer.claim(key, opts));
      await writeLedger(a.receipt.transaction as PoolClient, f.ledger, key);
      await a.receipt.commit(result as never);
    }

    const redisState = async (key: string) => (await diagnoseRedisKey(redis, { key, prefix })).state;

    test('a duplicate of a completed key and concurrent duplicates of a key in flight cost no PostgreSQL round trip', async () => {
      const a = acquired(await claimer.claim('pay-1', opts));
      await writeLedger(a.receipt.transaction as PoolClient, f.ledger, 'pay-1');
      const before = checkouts;
      const concurrent = await Promise.all(Array.from({ length: 20 }, () => claimer.claim('pay-1', opts)));
      expect(concurrent.every((r) => r.state === 'busy')).toBe(true);
      expect(checkouts).toBe(before);
      await a.receipt.commit({ booked: 'pay-1' });
      expect(await redisState('pay-1')).toBe('replayable'); // copied after the COMMIT
      const afterCommit = checkouts;
      const dups = await Promise.all(Array.from({ length: 50 }, () => claimer.claim('pay-1', opts)));
      expect(dups.every((r) => r.state === 'done' && JSON.stringify(r.result) === '{"booked":"pay-1"}')).toBe(true);
      expect(checkouts).toBe(afterCommit);
      expect((await f.counts()).get('pay-1')).toBe(1);
      expect(claimer.stats).toMatchObject({ gateAnswers: 70, truthClaims: 1, fallbackClaims: 0 });
    });

    test('a key done in PostgreSQL but missing in Redis: answered from PostgreSQL with its result, repopulated, then served by Redis', async () => {
      await book('pay-2', { receipt: 'r-2' });
      await redis.del(recordKey(prefix, 'pay-2'));
      expect(await redisState('pay-2')).toBe('missing');
      const first = await claimer.claim('pay-2', opts);
      expect(first.state === 'done' && first.result).toEqual({ receipt: 'r-2' });
      expect(await redisState('pay-2')).toBe('replayable');
      expect(await redis.pttl(recordKey(prefix, 'pay-2'))).toBeGreaterThan(opts.doneTtlMs - 5000); // the done TTL
      const before = checkouts;
      const second = await claimer.claim('pay-2', opts);
      expect(second.state === 'done' && second.result).toEqual({ receipt: 'r-2' });
      expect(checkouts).toBe(before);
      expect((await f.counts()).get('pay-2')).toBe(1);
      expect(claimer.stats.repopulated).toBe(1);
    });

    test('hole 2: an effect whose transaction rolls back (a failed statement) leaves no done key in Redis; the redelivery books once', async () => {
      const a = acquired(await claimer.claim('pay-3', opts));
      const tx = a.receipt.transaction as PoolClient;
      await writeLedger(tx, f.ledger, 'pay-3');
      await tx.query('SELECT 1/0').catch(() => undefined); // aborts the transaction
      await expect(a.receipt.commit({ booked: 'pay-3' })).rejects.toBeInstanceOf(TransactionAbortedError);
      expect(await redisState('pay-3')).toBe('released');
      expect((await f.counts()).get('pay-3')).toBeUndefined();
      await book('pay-3');
      expect((await f.counts()).get('pay-3')).toBe(1);
    });

    test('hole 2: the session is terminated before the COMMIT: the late commit fails, Redis never says done, the next claim runs the effect once', async () => {
      const a = acquired(await claimer.claim('pay-4', opts));
      const tx = a.receipt.transaction as PoolClient;
      await writeLedger(tx, f.ledger, 'pay-4');
      const pid = (await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await f.pool.query('SELECT pg_terminate_backend($1)', [pid]);
      await expect(a.receipt.commit({ booked: 'pay-4' })).rejects.toBeInstanceOf(TransactionAbortedError);
      expect(['released', 'missing']).toContain(await redisState('pay-4'));
      await a.receipt.release().catch(() => undefined);
      const next = acquired(await claimer.claim('pay-4', opts));
      expect(next.attempt).toBe(2);
      await writeLedger(next.receipt.transaction as PoolClient, f.ledger, 'pay-4');
      await next.receipt.commit();
      expect((await f.counts()).get('pay-4')).toBe(1);
    });

    test('a key whose gate lease outlived its rolled-back transaction (the owner died) is busy until the lease ends, then runs, never done', async () => {
      const short = { leaseTtlMs: 600, doneTtlMs: 60_000 };
      const a = acquired(await claimer.claim('pay-5', short));
      const tx = a.receipt.transaction as PoolClient;
      await writeLedger(tx, f.ledger, 'pay-5');
      // The owner dies: its session ends (PostgreSQL rolls back), and nobody releases the gate lease.
      const pid = (await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await f.pool.query('SELECT pg_terminate_backend($1)', [pid]);
      expect(await redisState('pay-5')).toBe('in_progress');
      expect((await claimer.claim('pay-5', short)).state).toBe('busy');
      await sleep(800);
      const next = acquired(await claimer.claim('pay-5', short));
      await writeLedger(next.receipt.transaction as PoolClient, f.ledger, 'pay-5');
      await next.receipt.commit();
      expect((await f.counts()).get('pay-5')).toBe(1);
      await a.receipt.release().catch(() => undefined);
    });

    test('PostgreSQL unreachable: duplicates of completed keys are still answered by Redis; a new key fails closed (ClaimerUnavailableError)', async () => {
      await book('pay-7', { receipt: 'r-7' });
      const deadPool = new Pool(pgConfig({ port: 1, connectionTimeoutMillis: 200 }));
      deadPool.on('error', () => undefined);
      const cut = new GatedClaimer({ gate, truth: new PostgresClaimer({ pool: deadPool, logger: silentLogger }, { schema: f.schema, mode: 'transactional', operationTimeoutMs: 500 }), logger: silentLogger });
      try {
        const dup = await cut.claim('pay-7', opts);
        expect(dup.state === 'done' && dup.result).toEqual({ receipt: 'r-7' });
        await expect(cut.claim('pay-8', opts)).rejects.toBeInstanceOf(ClaimerUnavailableError);
        expect(await redisState('pay-8')).toBe('released'); // the gate lease was given back
      } finally {
        await deadPool.end();
      }
    });

    test('a release (handler failure, requeue) rolls the effect back and frees the key in both stores', async () => {
      const a = acquired(await claimer.claim('pay-6', opts));
      await writeLedger(a.receipt.transaction as PoolClient, f.ledger, 'pay-6');
      await a.receipt.release();
      expect(await redisState('pay-6')).toBe('released');
      expect((await f.counts()).get('pay-6')).toBeUndefined();
      const b = acquired(await claimer.claim('pay-6', opts));
      expect(b.attempt).toBe(2);
      await b.receipt.release({ resetAttempts: true });
    });
  });
});
