/**
 * RedisClaimer on a real 3-master Redis Cluster started here on free loopback ports
 * (redis-server --cluster-enabled yes + redis-cli --cluster create), torn down after:
 * the conformance suite unchanged, and scenario S16 (CROSSSLOT and hash tags).
 */
import Redis, { type Cluster } from 'ioredis';
import { ConfigurationError, namespaceKey } from '../../../src';
import { hashSlot, RedisClaimer, recordKey, recordSlot } from '../../../adapters/redis';
import { describeWithServices } from '../../support/services';
import { type ClaimerFactory, describeClaimerConformance } from '../../conformance/claimer-conformance';
import { describeRunOnceConformance } from '../../conformance/run-once-conformance';
import { ReplyFaults } from '../../conformance/reply-faults';
import { replyDroppingClient } from './support/reply-dropping-client';
import { connectCluster, deleteMatching, REDIS_PROTOCOLS, type RespVersion, silentLogger, sleep, uniquePrefix } from './support/redis-helpers';
import { RedisClusterProcess } from './support/redis-process';

const LEASE_TTL_MS = 250;
const opts = { leaseTtlMs: 5_000, doneTtlMs: 60_000 };

// The cluster is a private fixture; it only needs the redis binaries, which the redis service implies.
describeWithServices(['redis'], 'RedisClaimer on a 3-master Redis Cluster', () => {
  let cluster: RedisClusterProcess;
  let client: Cluster;
  const extraClients: Array<Redis | Cluster> = [];

  beforeAll(async () => {
    cluster = await RedisClusterProcess.start(3);
    client = await connectCluster(cluster.ports);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(extraClients.map((c) => c.quit().catch(() => c.disconnect())));
    await client?.quit();
    await cluster?.destroy();
  });

  // The conformance suite once per RESP version (REDIS_PROTOCOLS), each on its own Cluster client.
  const byProtocol = new Map<RespVersion, Cluster>();
  async function clientFor(protocol: RespVersion): Promise<Cluster> {
    let c = byProtocol.get(protocol);
    if (!c) {
      c = await connectCluster(cluster.ports, {}, protocol);
      byProtocol.set(protocol, c);
      extraClients.push(c);
    }
    return c;
  }

  for (const protocol of REDIS_PROTOCOLS) {
    for (const coalesce of [true, false]) {
      describe(`RESP${protocol}, ${coalesce ? 'coalescing' : 'no coalescing'}`, () => {
        const name = `RedisClaimer on Cluster (RESP${protocol}, ${coalesce ? 'coalescing' : 'no coalescing'})`;
        const factory: ClaimerFactory = async () => {
          const c = await clientFor(protocol);
          const prefix = uniquePrefix('cluster');
          const faults = new ReplyFaults();
          const claimer = new RedisClaimer({ redis: replyDroppingClient(c, faults), logger: silentLogger }, { prefix, coalesce });
          await claimer.ready();
          return {
            claimer,
            leaseTtlMs: LEASE_TTL_MS,
            advance: (ms) => sleep(ms),
            dropNextReply: (operation) => faults.dropNext(operation),
            cleanup: async () => {
              await claimer.close();
              await deleteMatching(c, `${prefix}:*`);
            },
          };
        };
        describeClaimerConformance(name, factory, { claimMany: true, commitMany: true, transactional: false });
        describeRunOnceConformance(name, factory);
      });
    }
  }

  test('the cluster has 3 masters', () => {
    expect(client.nodes('master')).toHaveLength(3);
  });

  test('S16: hashSlot agrees with CLUSTER KEYSLOT, braces and multi-byte keys included', async () => {
    const samples = ['plain', 'a{b}c', '{}x', 'x{}', '{a}{b}', 'ключ-鍵-🔑', 'p:{order-1}', 'p:{a%7Bb}', ''.padEnd(300, 'z')];
    for (let i = 0; i < 200; i++) samples.push(`k-${i}-${Math.random().toString(36)}`);
    const node = client.nodes('master')[0]!;
    const expected = await Promise.all(samples.map((s) => node.cluster('KEYSLOT', s)));
    expect(samples.map((s) => hashSlot(s))).toEqual(expected);
  });

  test('S16: keys are <prefix>:{<ns>:<messageId>}, one slot per business key, and every operation succeeds', async () => {
    const prefix = uniquePrefix('s16');
    const claimer = new RedisClaimer({ redis: client, logger: silentLogger }, { prefix });
    await claimer.ready();
    const keys = Array.from({ length: 40 }, (_, i) => namespaceKey('billing', `msg-${i}`));
    keys.push(namespaceKey('billing', 'has}{braces'), namespaceKey('billing', 'has%7Bpercent'));
    for (const key of keys) {
      const claim = await claimer.claim(key, opts);
      expect(claim.state).toBe('acquired');
      if (claim.state !== 'acquired') continue;
      await claim.receipt.extend(5_000);
      await claim.receipt.commit({ key });
      const redisKey = recordKey(prefix, key);
      expect(redisKey).toMatch(new RegExp(`^${prefix}:\\{billing:[^{}]+\\}$`));
      expect(await client.cluster('KEYSLOT', redisKey)).toBe(recordSlot(key));
      expect(await client.exists(redisKey)).toBe(1);
      const again = await claimer.claim(key, opts);
      expect(again.state === 'done' && again.result).toEqual({ key });
    }
    // A released key on a cluster: release, then claim again.
    const released = await claimer.claim(namespaceKey('billing', 'released'), opts);
    if (released.state !== 'acquired') throw new Error('expected acquired');
    await released.receipt.release();
    expect((await claimer.claim(namespaceKey('billing', 'released'), opts)).state).toBe('acquired');
    await claimer.close();
    await deleteMatching(client, `${prefix}:*`);
  });

  test('S16: claimMany spreads over every master, one script call per slot, in request order', async () => {
    const prefix = uniquePrefix('s16-many');
    const claimer = new RedisClaimer({ redis: client, logger: silentLogger }, { prefix });
    const keys = Array.from({ length: 300 }, (_, i) => `order-${i}`);
    const slots = new Set(keys.map(recordSlot));
    const before = claimer.stats.scriptCalls;
    const entries = await claimer.claimMany(keys.map((key) => ({ key, options: opts })));
    expect(claimer.stats.scriptCalls - before).toBe(slots.size);
    expect(entries.map((e) => e.ok && e.result.state)).toEqual(keys.map(() => 'acquired'));
    // Commits of concurrent receipts are coalesced the same way.
    await Promise.all(entries.map((e, i) => (e.ok && e.result.state === 'acquired' ? e.result.receipt.commit(i) : undefined)));
    const again = await claimer.claimMany(keys.map((key) => ({ key, options: opts })));
    expect(again.map((e) => e.ok && e.result.state === 'done' && e.result.result)).toEqual(keys.map((_, i) => i));
    const perMaster = await Promise.all(client.nodes('master').map((n) => n.dbsize()));
    expect(perMaster.every((n) => n > 0)).toBe(true);
    await claimer.close();
    await deleteMatching(client, `${prefix}:*`);
  });

  test('S16: with the ioredis keyPrefix option on the Cluster client', async () => {
    const prefixed = await connectCluster(cluster.ports, { keyPrefix: 'app1:' });
    extraClients.push(prefixed);
    const prefix = uniquePrefix('s16-kp');
    const claimer = new RedisClaimer({ redis: prefixed, logger: silentLogger }, { prefix });
    await claimer.ready();
    const keys = Array.from({ length: 50 }, (_, i) => `kp-${i}`);
    const entries = await claimer.claimMany(keys.map((key) => ({ key, options: opts })));
    await Promise.all(entries.map((e) => (e.ok && e.result.state === 'acquired' ? e.result.receipt.commit() : undefined)));
    const single = await claimer.claim('kp-single', opts);
    if (single.state !== 'acquired') throw new Error('expected acquired');
    await single.receipt.commit('one');
    expect((await claimer.claim('kp-single', opts)).state).toBe('done');
    // The full key carries the client's keyPrefix before ours.
    expect(await client.exists(`app1:${recordKey(prefix, 'kp-single')}`)).toBe(1);
    expect(await client.exists(recordKey(prefix, 'kp-single'))).toBe(0);
    await claimer.close();
    await deleteMatching(prefixed, `${prefix}:*`);
  });

  test('S16: a prefix or an ioredis keyPrefix containing braces is refused with ConfigurationError', async () => {
    expect(() => new RedisClaimer({ redis: client }, { prefix: 'app{1}' })).toThrow(ConfigurationError);
    expect(() => new RedisClaimer({ redis: client }, { prefix: 'app}' })).toThrow(ConfigurationError);
    const braced = await connectCluster(cluster.ports, { keyPrefix: '{tenant}:', lazyConnect: true });
    extraClients.push(braced);
    expect(() => new RedisClaimer({ redis: braced })).toThrow(/keyPrefix/);
  });

  test('S16: CROSSSLOT from a plain client on a cluster node maps to ConfigurationError', async () => {
    const plain = new Redis({ host: '127.0.0.1', port: cluster.ports[0], lazyConnect: true, maxRetriesPerRequest: 1 });
    plain.on('error', () => undefined);
    extraClients.push(plain);
    await plain.connect();
    const prefix = uniquePrefix('s16-crossslot');
    const claimer = new RedisClaimer({ redis: plain, logger: silentLogger }, { prefix });
    // ready() refuses the combination up front ...
    await expect(claimer.ready()).rejects.toBeInstanceOf(ConfigurationError);
    // ... and without it, a multi-key call fails with CROSSSLOT, mapped to ConfigurationError per entry.
    const keys = ['a', 'b', 'c', 'd', 'e', 'f'];
    expect(new Set(keys.map(recordSlot)).size).toBeGreaterThan(1);
    const entries = await claimer.claimMany(keys.map((key) => ({ key, options: opts })));
    for (const entry of entries) {
      expect(entry.ok).toBe(false);
      if (!entry.ok) {
        expect(entry.error).toBeInstanceOf(ConfigurationError);
        expect(entry.error.message).toMatch(/CROSSSLOT/);
      }
    }
    await claimer.close();
  });
});
