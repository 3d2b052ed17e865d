/**
 * Rolling upgrade: replicas of the previous RedisClaimer version (its scripts kept verbatim in
 * support/record-v1) and of this one share a Redis, so each reads the records the other writes.
 * The record format (lua/includes/record.lua, v1) is unchanged; what changed is the scripts'
 * arguments and replies, which never leave one process.
 */
import type Redis from 'ioredis';
import { KeyConflictError, ReceiptStateError } from '../../../src';
import { RedisClaimer, recordKey } from '../../../adapters/redis';
import { describeWithServices } from '../../support/services';
import { connectRedis, deleteMatching, REDIS_PROTOCOLS, silentLogger, sleep, uniquePrefix } from './support/redis-helpers';
import { V1Replica } from './support/v1-scripts';

const LEASE = { leaseTtlMs: 30_000, doneTtlMs: 60_000 };

describeWithServices(['redis'], 'RedisClaimer records across versions (rolling upgrade)', () => {
  describe.each(REDIS_PROTOCOLS)('RESP%i', (protocol) => {
    let client: Redis;
    let prefix: string;
    let claimer: RedisClaimer;
    let old: V1Replica;

    beforeAll(async () => {
      client = await connectRedis(undefined, {}, protocol);
      old = new V1Replica(client);
    });
    beforeEach(async () => {
      prefix = uniquePrefix('compat');
      claimer = new RedisClaimer({ redis: client, logger: silentLogger }, { prefix });
      await claimer.ready();
    });
    afterEach(async () => {
      await claimer.close();
      await deleteMatching(client, `${prefix}:*`);
    });
    afterAll(async () => {
      await client.quit();
    });

    test('a key an old replica committed (result, fingerprint) reads as done here; another fingerprint conflicts', async () => {
      const k = recordKey(prefix, 'v1-done');
      const [code, fence] = await old.claim(k, 'old-owner-1', LEASE.leaseTtlMs, LEASE.doneTtlMs, 'fp-1');
      expect(code).toBe(1);
      expect(await old.commit(k, Number(fence), 'old-owner-1', LEASE.doneTtlMs, '{"paid":true}')).toBe(1);
      const now = await claimer.claim('v1-done', { ...LEASE, fingerprint: 'fp-1' });
      expect(now.state === 'done' && now.result).toEqual({ paid: true });
      await expect(claimer.claim('v1-done', { ...LEASE, fingerprint: 'fp-2' })).rejects.toBeInstanceOf(KeyConflictError);
    });

    test('a key an old replica released is taken over here at attempt 2 with a higher fence; a live old lease is busy', async () => {
      const released = recordKey(prefix, 'v1-released');
      const [, fence] = await old.claim(released, 'old-owner-2', LEASE.leaseTtlMs, LEASE.doneTtlMs);
      expect(await old.release(released, Number(fence), 'old-owner-2')).toBe(1);
      const taken = await claimer.claim('v1-released', LEASE);
      expect(taken.state).toBe('acquired');
      if (taken.state !== 'acquired') return;
      expect(taken.attempt).toBe(2);
      expect(taken.receipt.fencingToken).toBeGreaterThan(Number(fence));
      await taken.receipt.commit('new');

      await old.claim(recordKey(prefix, 'v1-live'), 'old-owner-3', LEASE.leaseTtlMs, LEASE.doneTtlMs);
      expect((await claimer.claim('v1-live', LEASE)).state).toBe('busy');
    });

    test('an expired old lease is taken over here; the old owner then loses its commit, and the new owner commits', async () => {
      const k = recordKey(prefix, 'v1-expired');
      const [, fence] = await old.claim(k, 'old-owner-4', 100, LEASE.doneTtlMs);
      await sleep(150);
      const taken = await claimer.claim('v1-expired', LEASE);
      expect(taken.state === 'acquired' && taken.attempt).toBe(2);
      expect(await old.commit(k, Number(fence), 'old-owner-4', LEASE.doneTtlMs)).toBe(0);
      if (taken.state === 'acquired') await expect(taken.receipt.commit()).resolves.toBeUndefined();
    });

    test('an old replica reads this version\'s records: busy lease, done with result, released with the count and the fence', async () => {
      const held = await claimer.claim('v2-held', LEASE);
      expect(held.state).toBe('acquired');
      const [busy] = await old.claim(recordKey(prefix, 'v2-held'), 'old-owner-5', LEASE.leaseTtlMs, LEASE.doneTtlMs);
      expect(busy).toBe(3);
      if (held.state === 'acquired') await claimer.commitMany([{ receipt: held.receipt, result: { n: 7 } }]);
      expect(await old.claim(recordKey(prefix, 'v2-held'), 'old-owner-5', LEASE.leaseTtlMs, LEASE.doneTtlMs)).toEqual([2, '{"n":7}']);

      const freed = await claimer.claim('v2-freed', { ...LEASE, fingerprint: 'fp=|x' });
      if (freed.state !== 'acquired') throw new Error(`expected acquired, got ${freed.state}`);
      await freed.receipt.release();
      const [code, fence, attempts] = await old.claim(recordKey(prefix, 'v2-freed'), 'old-owner-6', LEASE.leaseTtlMs, LEASE.doneTtlMs, 'fp=|x');
      expect([code, attempts]).toEqual([1, 2]);
      expect(Number(fence)).toBeGreaterThan(freed.receipt.fencingToken);
      // The old owner now holds the key, and this version sees its lease.
      await expect(freed.receipt.commit()).rejects.toBeInstanceOf(ReceiptStateError);
      expect((await claimer.claim('v2-freed', { ...LEASE, fingerprint: 'fp=|x' })).state).toBe('busy');
    });
  });
});
