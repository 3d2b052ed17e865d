/**
 * RedisClaimer specifics on the shared Redis (127.0.0.1:6379), each test in its own namespace:
 * its kind, fencing and stale owners (S19), clock skew (S24), the key layout, the stored record
 * and its size, batching, options and close.
 */
import type Redis from 'ioredis';
import { performance } from 'node:perf_hooks';
import {
  type ClaimResult,
  ConfigurationError,
  InvalidKeyError,
  LeaseLostError,
  namespaceKey,
} from '../../../src';
import { RedisClaimer, type RedisClaimerOptions, recordKey } from '../../../adapters/redis';
import { describeWithServices } from '../../support/services';
import { connectRedis, deleteMatching, REDIS_PROTOCOLS, type RespVersion, silentLogger, sleep, uniquePrefix } from './support/redis-helpers';
import { waitFor } from '../../support/wait';

function acquired(result: ClaimResult) {
  if (result.state !== 'acquired') throw new Error(`expected acquired, got ${result.state}`);
  return result;
}

describeWithServices(['redis'], 'RedisClaimer on 127.0.0.1:6379', () => {
  describe.each(REDIS_PROTOCOLS)('RESP%i', (protocol) => claimerSuite(protocol));
});

/** The suite, run once per RESP version (REDIS_PROTOCOLS). */
function claimerSuite(protocol: RespVersion): void {
  let client: Redis;
  const prefixes: string[] = [];
  const claimers: RedisClaimer[] = [];

  function make(options: RedisClaimerOptions = {}, clock?: { now(): number }): { claimer: RedisClaimer; prefix: string } {
    const prefix = options.prefix ?? uniquePrefix('claimer');
    prefixes.push(prefix);
    const claimer = new RedisClaimer({ redis: client, logger: silentLogger, clock }, { ...options, prefix });
    claimers.push(claimer);
    return { claimer, prefix };
  }

  beforeAll(async () => {
    client = await connectRedis(undefined, {}, protocol);
  });
  afterEach(async () => {
    await Promise.all(claimers.splice(0).map((c) => c.close()));
    for (const prefix of prefixes.splice(0)) await deleteMatching(client, `${prefix}:*`);
  });
  afterAll(async () => {
    await client.quit();
  });

  test('reports its own kind: distributed', () => {
    expect(make().claimer.kind).toBe('distributed');
  });

  test('S19: a stale owner after takeover cannot commit, extend or release over the new owner; fences increase', async () => {
    const { claimer, prefix } = make();
    const key = namespaceKey('billing', 'order-19');
    const ttl = { leaseTtlMs: 200, doneTtlMs: 60_000 };
    const a = acquired(await claimer.claim(key, ttl));
    await sleep(300); // Redis judges the lease expired
    const b = acquired(await claimer.claim(key, { leaseTtlMs: 30_000, doneTtlMs: 60_000 }));
    expect(b.receipt.fencingToken).toBeGreaterThan(a.receipt.fencingToken);
    const bRecord = await client.get(recordKey(prefix, key));

    await expect(a.receipt.extend(30_000)).rejects.toBeInstanceOf(LeaseLostError);
    await expect(a.receipt.commit({ by: 'a' })).rejects.toBeInstanceOf(LeaseLostError);
    await expect(a.receipt.release()).resolves.toBeUndefined();
    // B's record is byte for byte what it was.
    expect(await client.get(recordKey(prefix, key))).toBe(bRecord);
    // A's receipt stays lost, also after B leaves.
    await b.receipt.commit({ by: 'b' });
    await expect(a.receipt.commit()).rejects.toBeInstanceOf(LeaseLostError);
    const done = await claimer.claim(key, ttl);
    expect(done.state === 'done' && done.result).toEqual({ by: 'b' });
  });

  test('fencing tokens keep increasing when the record is gone (deleted or evicted) and across claimers', async () => {
    const { claimer, prefix } = make();
    const other = make({ prefix }).claimer;
    const key = 'fence-gone';
    const tokens: number[] = [];
    for (let i = 0; i < 6; i++) {
      const c = acquired(await (i % 2 ? other : claimer).claim(key, { leaseTtlMs: 1000, doneTtlMs: 1000 }));
      tokens.push(c.receipt.fencingToken);
      if (i % 3 === 2) await client.del(recordKey(prefix, key)); // as if evicted or expired
      else await c.receipt.release();
    }
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1]!);
    expect(tokens.every((t) => Number.isSafeInteger(t))).toBe(true);
  });

  test('S24: a client clock 30 s ahead (or behind) neither steals a live lease nor changes its expiry: Redis judges it', async () => {
    const base = { now: () => performance.now() };
    const ahead = { now: () => performance.now() + 30_000 };
    const behind = { now: () => performance.now() - 30_000 };
    const { claimer: b, prefix } = make({}, base);
    const a = make({ prefix }, ahead).claimer;
    const c = make({ prefix }, behind).claimer;
    const dateNow = jest.spyOn(Date, 'now').mockImplementation(() => new Date().getTime() + 30_000);
    try {
      const lease = { leaseTtlMs: 20_000, doneTtlMs: 60_000 };
      const held = acquired(await b.claim('skewed', lease));
      expect((await a.claim('skewed', lease)).state).toBe('busy');
      expect((await c.claim('skewed', lease)).state).toBe('busy');
      // The stored lease end is in server time: now (TIME) + 20 s, whatever the clients' clocks say.
      const [seconds, micros] = await client.time();
      const serverNowMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
      const record = (await client.get(recordKey(prefix, 'skewed')))!;
      const leaseEnd = Number(record.split('|')[4]);
      expect(leaseEnd - serverNowMs).toBeGreaterThan(19_000);
      expect(leaseEnd - serverNowMs).toBeLessThanOrEqual(20_000);
      // The skewed claimers operate normally (deadlines measure elapsed time only).
      await held.receipt.extend(20_000);
      await held.receipt.commit();
      expect((await a.claim('skewed', lease)).state).toBe('done');
      const short = { leaseTtlMs: 200, doneTtlMs: 60_000 };
      acquired(await a.claim('skewed-short', short));
      expect((await c.claim('skewed-short', short)).state).toBe('busy');
      // It expires on the server's clock, not later for the clock running behind.
      await waitFor(async () => (await c.claim('skewed-short', short)).state === 'acquired', { timeoutMs: 2000, intervalMs: 20, what: 'server-side expiry' });
    } finally {
      dateNow.mockRestore();
    }
  });

  test('keys: braces and percent signs are escaped so the hash tag spans the whole key, one-to-one', async () => {
    const { claimer, prefix } = make();
    expect(recordKey(prefix, 'a{b}c')).toBe(`${prefix}:{a%7Bb%7Dc}`);
    expect(recordKey(prefix, '50%')).toBe(`${prefix}:{50%25}`);
    const keys = ['a{b', 'a%7Bb', 'a}b', 'a%7Db', '{}', '%'];
    const results = await Promise.all(keys.map((key) => claimer.claim(key, { leaseTtlMs: 5000, doneTtlMs: 5000 })));
    expect(results.map((r) => r.state)).toEqual(keys.map(() => 'acquired'));
    expect(new Set(keys.map((k) => recordKey(prefix, k))).size).toBe(keys.length);
    await expect(claimer.claim('nul\u0000key', { leaseTtlMs: 5000, doneTtlMs: 5000 })).rejects.toBeInstanceOf(InvalidKeyError);
  });

  test('a key holding data twophase did not write is a ConfigurationError, not a guessed state', async () => {
    const { claimer, prefix } = make();
    await client.set(recordKey(prefix, 'foreign-string'), 'hello');
    await client.hset(recordKey(prefix, 'foreign-hash'), 'a', '1');
    const ttl = { leaseTtlMs: 5000, doneTtlMs: 5000 };
    await expect(claimer.claim('foreign-string', ttl)).rejects.toBeInstanceOf(ConfigurationError);
    await expect(claimer.claim('foreign-hash', ttl)).rejects.toBeInstanceOf(ConfigurationError);
    expect(await client.get(recordKey(prefix, 'foreign-string'))).toBe('hello');
  });

  test('the record holds state, fence, attempts, fingerprint, result; a fingerprint may contain any character', async () => {
    const { claimer, prefix } = make();
    const fingerprint = 'sha256|weird|{x}\n';
    const ttl = { leaseTtlMs: 5000, doneTtlMs: 60_000, fingerprint };
    const first = acquired(await claimer.claim('rec', ttl));
    await first.receipt.release();
    const second = acquired(await claimer.claim('rec', ttl));
    expect(second.attempt).toBe(2);
    await second.receipt.commit({ reply: 'a|b', n: 1 });
    const raw = (await client.get(recordKey(prefix, 'rec')))!;
    expect(raw).toBe(`D|${second.receipt.fencingToken}||2||${Buffer.byteLength(fingerprint)}|${fingerprint}{"reply":"a|b","n":1}`);
    const done = await claimer.claim('rec', ttl);
    expect(done.state === 'done' && done.result).toEqual({ reply: 'a|b', n: 1 });
    const pttl = await client.pttl(recordKey(prefix, 'rec'));
    expect(pttl).toBeGreaterThan(55_000);
    expect(pttl).toBeLessThanOrEqual(60_000);
  });

  test('steady state after commit: one small key per business key (MEMORY USAGE measured)', async () => {
    const { claimer, prefix } = make();
    const keys = Array.from({ length: 200 }, (_, i) => namespaceKey('billing', `order-${String(i).padStart(8, '0')}`));
    const ttl = { leaseTtlMs: 5000, doneTtlMs: 3_600_000 };
    const entries = await claimer.claimMany(keys.map((key) => ({ key, options: ttl })));
    await Promise.all(entries.map((e, i) => (e.ok && e.result.state === 'acquired' ? e.result.receipt.commit(i < 100 ? undefined : { status: 'ok', id: i }) : undefined)));
    let count = 0;
    let cursor = '0';
    do {
      const [next, found] = await client.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      count += found.length;
    } while (cursor !== '0');
    expect(count).toBe(keys.length);
    const usage = await Promise.all(keys.map((k) => client.memory('USAGE', recordKey(prefix, k)) as Promise<number>));
    const plain = usage.slice(0, 100);
    const withResult = usage.slice(100);
    const keyBytes = Buffer.byteLength(recordKey(prefix, keys[0]!));
    console.log(
      `MEMORY USAGE per done key: ${Math.max(...plain)} bytes (Redis key ${keyBytes} bytes, no result); ` +
        `${Math.max(...withResult)} bytes with a 25-byte result`,
    );
    expect(Math.max(...plain)).toBeLessThanOrEqual(keyBytes + 100);
    expect(Math.max(...withResult)).toBeLessThanOrEqual(keyBytes + 130);
  });

  test('coalescing: concurrent claims and commits travel as few multi-key script calls', async () => {
    const { claimer } = make();
    const ttl = { leaseTtlMs: 5000, doneTtlMs: 5000 };
    const before = claimer.stats;
    const claims = await Promise.all(Array.from({ length: 64 }, (_, i) => claimer.claim(`co-${i}`, ttl)));
    await Promise.all(claims.map((c) => acquired(c).receipt.commit()));
    const after = claimer.stats;
    expect(after.operations - before.operations).toBe(128);
    // Per kind: the first goes out alone (nothing in flight), the other 63 as two calls.
    expect(after.scriptCalls - before.scriptCalls).toBeLessThanOrEqual(6);
  });

  test('coalescing: a batch too small to split in two calls of 8 keys goes as one call', async () => {
    const { claimer } = make({ coalesce: true });
    const ttl = { leaseTtlMs: 5000, doneTtlMs: 5000 };
    const before = claimer.stats.scriptCalls;
    const claims = await Promise.all(Array.from({ length: 12 }, (_, i) => claimer.claim(`small-${i}`, ttl)));
    expect(claims.every((c) => c.state === 'acquired')).toBe(true);
    // The first goes out alone (nothing in flight), the other 11 as one call (not 8 + 3).
    expect(claimer.stats.scriptCalls - before).toBe(2);
  });

  test('coalescing adds no wait when nothing is in flight: one operation, one call at once', async () => {
    const { claimer } = make({ coalesce: true });
    const before = claimer.stats.scriptCalls;
    const c = acquired(await claimer.claim('alone', { leaseTtlMs: 5000, doneTtlMs: 5000 }));
    await c.receipt.commit();
    expect(claimer.stats.scriptCalls - before).toBe(2);
  });

  test('claimMany: chunks of maxBatchKeys, answers in request order', async () => {
    const { claimer } = make({ maxBatchKeys: 50 });
    const ttl = { leaseTtlMs: 5000, doneTtlMs: 5000 };
    const keys = Array.from({ length: 420 }, (_, i) => `many-${i}`);
    const before = claimer.stats.scriptCalls;
    const entries = await claimer.claimMany([...keys, keys[0]!].map((key) => ({ key, options: ttl })));
    expect(claimer.stats.scriptCalls - before).toBe(9);
    expect(entries.slice(0, 420).every((e) => e.ok && e.result.state === 'acquired')).toBe(true);
    const last = entries[420]!;
    expect(last.ok && last.result.state).toBe('busy');
  });

  test('commitMany: the receipts travel as one script call even with coalescing off; a different doneTtlMs goes in its own call', async () => {
    const { claimer, prefix } = make({ coalesce: false });
    const entries = await claimer.claimMany(Array.from({ length: 30 }, (_, i) => ({ key: `cm-${i}`, options: { leaseTtlMs: 5000, doneTtlMs: 60_000 } })));
    const receipts = entries.map((e) => (e.ok && e.result.state === 'acquired' ? e.result.receipt : undefined)).filter((r) => r !== undefined);
    expect(receipts).toHaveLength(30);
    const before = claimer.stats.scriptCalls;
    expect((await claimer.commitMany(receipts.map((receipt, i) => ({ receipt, result: i })))).every((e) => e.ok)).toBe(true);
    expect(claimer.stats.scriptCalls - before).toBe(1);
    const done = await claimer.claim('cm-29', { leaseTtlMs: 5000, doneTtlMs: 60_000 });
    expect(done.state === 'done' && done.result).toBe(29);

    // Two retentions in one batch: two calls, each record with its own PX.
    const short = acquired(await claimer.claim('cm-short', { leaseTtlMs: 5000, doneTtlMs: 20_000 }));
    const long = acquired(await claimer.claim('cm-long', { leaseTtlMs: 5000, doneTtlMs: 90_000 }));
    const mid = claimer.stats.scriptCalls;
    expect((await claimer.commitMany([{ receipt: short.receipt }, { receipt: long.receipt }])).every((e) => e.ok)).toBe(true);
    expect(claimer.stats.scriptCalls - mid).toBe(2);
    const [shortTtl, longTtl] = await Promise.all([client.pttl(recordKey(prefix, 'cm-short')), client.pttl(recordKey(prefix, 'cm-long'))]);
    expect(shortTtl).toBeGreaterThan(15_000);
    expect(shortTtl).toBeLessThanOrEqual(20_000);
    expect(longTtl).toBeGreaterThan(85_000);
  });

  test('coalesced claims with different TTLs in one turn: one call per TTL pair, each record with its own lease end and retention', async () => {
    const { claimer, prefix } = make({ coalesce: true });
    const a = { leaseTtlMs: 1000, doneTtlMs: 20_000 };
    const b = { leaseTtlMs: 9000, doneTtlMs: 90_000 };
    const results = await Promise.all(['t-0', 't-1', 't-2', 't-3'].map((key, i) => claimer.claim(key, i % 2 ? b : a)));
    expect(results.every((r) => r.state === 'acquired')).toBe(true);
    const ttls = await Promise.all(['t-0', 't-1', 't-2', 't-3'].map((key) => client.pttl(recordKey(prefix, key))));
    expect(ttls[0]).toBeLessThanOrEqual(20_000);
    expect(ttls[2]).toBeLessThanOrEqual(20_000);
    expect(ttls[1]).toBeGreaterThan(85_000);
    expect(ttls[3]).toBeGreaterThan(85_000);
    await sleep(1100);
    // a's leases ended (takeover possible), b's live on.
    expect((await claimer.claim('t-0', a)).state).toBe('acquired');
    expect((await claimer.claim('t-1', b)).state).toBe('busy');
  });

  test('options are validated at construction, naming the field and the value', () => {
    const bad: Array<[RedisClaimerOptions, RegExp]> = [
      [{ operationTimeoutMs: 0 }, /operationTimeoutMs.*got 0/],
      [{ operationTimeoutMs: 1.5 }, /operationTimeoutMs/],
      [{ maxBatchKeys: 0 }, /maxBatchKeys/],
      [{ maxResultBytes: -1 }, /maxResultBytes/],
      [{ coalesce: { windowMs: 500 } }, /coalesce.windowMs/],
      [{ prefix: '' }, /prefix/],
      [{ prefix: 'a{b' }, /prefix/],
    ];
    for (const [options, message] of bad) {
      expect(() => new RedisClaimer({ redis: client }, options)).toThrow(ConfigurationError);
      expect(() => new RedisClaimer({ redis: client }, options)).toThrow(message);
    }
    expect(() => new RedisClaimer({ redis: {} as Redis })).toThrow(ConfigurationError);
  });

  test('a bounded result: maxResultBytes applies', async () => {
    const { claimer } = make({ maxResultBytes: 16 });
    const c = acquired(await claimer.claim('small-results', { leaseTtlMs: 5000, doneTtlMs: 5000 }));
    await expect(c.receipt.commit('x'.repeat(20))).rejects.toThrow(/16-byte limit/);
    await c.receipt.commit('ok');
  });

  test('close() sends coalesced operations still waiting, then refuses new ones; it leaves the client open', async () => {
    const { claimer } = make({ coalesce: { windowMs: 20 } });
    const ttl = { leaseTtlMs: 5000, doneTtlMs: 5000 };
    const c = acquired(await claimer.claim('closing', ttl));
    const commit = c.receipt.commit('before-close');
    await claimer.close();
    await expect(commit).resolves.toBeUndefined();
    await expect(claimer.claim('after-close', ttl)).rejects.toThrow(/closed/);
    expect(client.status).toBe('ready');
    const fresh = make().claimer;
    expect((await fresh.claim('closing', ttl)).state).toBe('acquired'); // different namespace
  });
}
