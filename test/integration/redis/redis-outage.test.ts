/**
 * Outages on a private redis-server started on a free loopback port: stopped, paused
 * (CLIENT PAUSE), read-only (a replica after a failover), out of memory, script cache flushed,
 * restarted. Claims fail fast with ClaimerUnavailableError, nothing runs after its deadline, and
 * work resumes on the same claimer when Redis is back. Scenarios S13 and S14.
 */
import Redis, { type RedisOptions } from 'ioredis';
import { ClaimerUnavailableError, type ClaimResult, LeaseLostError } from '../../../src';
import { RedisClaimer, type RedisClaimerOptions } from '../../../adapters/redis';
import { describeWithServices } from '../../support/services';
import { IOREDIS_MAJOR, protocolOptions, recordingLogger, REDIS_PROTOCOLS, type RespVersion, uniquePrefix } from './support/redis-helpers';
import { waitFor } from '../../support/wait';
import { freePort, RedisServerProcess } from './support/redis-process';

const opts = { leaseTtlMs: 10_000, doneTtlMs: 60_000 };

function acquired(result: ClaimResult) {
  if (result.state !== 'acquired') throw new Error(`expected acquired, got ${result.state}`);
  return result;
}

/** Resolves with how long `promise` took to settle and its rejection (or undefined). */
async function timed(promise: Promise<unknown>): Promise<{ ms: number; error: unknown }> {
  const start = performance.now();
  try {
    await promise;
    return { ms: performance.now() - start, error: undefined };
  } catch (error) {
    return { ms: performance.now() - start, error };
  }
}

describeWithServices(['redis'], 'RedisClaimer outages on a private redis-server', () => {
  describe.each(REDIS_PROTOCOLS)('RESP%i', (protocol) => outageSuite(protocol));
});

/** The suite, run once per RESP version (REDIS_PROTOCOLS), each on its own private server. */
function outageSuite(protocol: RespVersion): void {
  let server: RedisServerProcess;
  let admin: Redis;
  const clients: Redis[] = [];
  const claimers: RedisClaimer[] = [];

  /**
   * A client with ioredis defaults (offline queue on, maxRetriesPerRequest 20) except a quick
   * reconnect, and no error listener of its own: the claimer's listener is the only one.
   */
  async function setup(options: RedisClaimerOptions = {}, clientOptions: RedisOptions = {}) {
    const client = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true, retryStrategy: () => 100, ...protocolOptions(protocol), ...clientOptions });
    clients.push(client);
    const log = recordingLogger();
    const claimer = new RedisClaimer({ redis: client, logger: log.logger }, { prefix: uniquePrefix('outage'), ...options });
    claimers.push(claimer);
    await claimer.ready();
    return { client, claimer, log };
  }

  beforeAll(async () => {
    server = await RedisServerProcess.start();
    admin = new Redis({ host: '127.0.0.1', port: server.port, retryStrategy: () => 100, maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined);
  }, 30_000);

  afterEach(async () => {
    if (!server.running) await server.startAgain();
    await Promise.all(claimers.splice(0).map((c) => c.close()));
    for (const client of clients.splice(0)) client.disconnect();
    await admin.flushall();
  });

  afterAll(async () => {
    admin?.disconnect();
    await server?.destroy();
  });

  test('S14: Redis stopped: claims and commits fail fast with ClaimerUnavailableError, the process survives, and work resumes after restart', async () => {
    const { client, claimer, log } = await setup({ operationTimeoutMs: 1000 });
    const held = acquired(await claimer.claim('held-before-outage', opts));
    await acquired(await claimer.claim('committed-before-outage', opts)).receipt.commit();

    await server.stop();
    await waitFor(() => client.status !== 'ready', { timeoutMs: 5000, intervalMs: 10, what: 'the client to notice the outage' });

    const claimAttempt = await timed(claimer.claim('during-outage', opts));
    expect(claimAttempt.error).toBeInstanceOf(ClaimerUnavailableError);
    expect(claimAttempt.ms).toBeLessThan(50); // not queued, not waiting for the deadline
    const commitAttempt = await timed(held.receipt.commit());
    expect(commitAttempt.error).toBeInstanceOf(ClaimerUnavailableError);
    expect(commitAttempt.ms).toBeLessThan(50);
    const many = await timed(claimer.claimMany([{ key: 'during-outage-2', options: opts }]));
    expect(many.error).toBeInstanceOf(ClaimerUnavailableError);

    // Reconnect attempts raise client errors; the claimer absorbs and logs them (rate limited).
    await waitFor(() => claimer.stats.clientErrors >= 3, { timeoutMs: 5000, intervalMs: 20, what: 'several client error events' });
    expect(log.calls.filter((c) => c.level === 'warn' && /client error/.test(c.msg ?? ''))).toHaveLength(1);

    const reloadsBefore = claimer.stats.scriptReloads;
    await server.startAgain(); // empty: no persistence, empty script cache
    const resumed = await waitFor(() => claimer.claim('after-restart', opts), { timeoutMs: 10_000, intervalMs: 50, what: 'claims to resume' });
    expect(resumed.state).toBe('acquired');
    await acquired(resumed).receipt.commit('ok');
    // The restart emptied the script cache: recovered through NOSCRIPT → EVAL, and counted.
    expect(claimer.stats.scriptReloads).toBeGreaterThan(reloadsBefore);
    // Nothing attempted during the outage was queued and run later.
    expect(acquired(await claimer.claim('during-outage', opts)).attempt).toBe(1);
    // A restart without persistence loses the lease itself: its late commit is refused, never guessed.
    await expect(held.receipt.commit()).rejects.toBeInstanceOf(LeaseLostError);
  });

  test('S14: CLIENT PAUSE: operations reject at their deadline, and the held scripts write nothing when Redis resumes', async () => {
    const { claimer } = await setup({ operationTimeoutMs: 300 });
    const lease = acquired(await claimer.claim('leased-before-pause', opts));

    await admin.client('PAUSE', 1500, 'ALL');
    const [claimAttempt, commitAttempt] = await Promise.all([timed(claimer.claim('claimed-during-pause', opts)), timed(lease.receipt.commit('late'))]);
    for (const attempt of [claimAttempt, commitAttempt]) {
      expect(attempt.error).toBeInstanceOf(ClaimerUnavailableError);
      expect(attempt.ms).toBeGreaterThanOrEqual(250);
      expect(attempt.ms).toBeLessThan(1000);
    }
    // When the pause ends Redis runs both held calls; past their deadline, they refuse to write.
    await waitFor(() => claimer.stats.lateCallsRefused >= 1, { timeoutMs: 5000, intervalMs: 25, what: 'the held calls to be refused' });
    expect(claimer.stats.deadlinesExceeded).toBeGreaterThanOrEqual(2);
    // The claim was not written: a new claim is the key's first attempt.
    expect(acquired(await claimer.claim('claimed-during-pause', opts)).attempt).toBe(1);
    // The commit was not written either: the key is still leased (busy), and the retried commit succeeds.
    expect((await claimer.claim('leased-before-pause', opts)).state).toBe('busy');
    await lease.receipt.commit('retried');
    const done = await claimer.claim('leased-before-pause', opts);
    expect(done.state === 'done' && done.result).toBe('retried');
  });

  test('S14: READONLY after a failover (the node became a replica) is ClaimerUnavailableError; writable again, work resumes', async () => {
    const { claimer } = await setup({ operationTimeoutMs: 1000 });
    await acquired(await claimer.claim('done-before', opts)).receipt.commit(1);
    const nowhere = await freePort([server.port]);
    await admin.replicaof('127.0.0.1', nowhere);
    try {
      await expect(claimer.claim('while-readonly', opts)).rejects.toBeInstanceOf(ClaimerUnavailableError);
      await expect(claimer.claim('while-readonly', opts)).rejects.toThrow(/READONLY/);
    } finally {
      await admin.replicaof('NO', 'ONE');
    }
    expect((await claimer.claim('while-readonly', opts)).state).toBe('acquired');
    expect((await claimer.claim('done-before', opts)).state).toBe('done');
  });

  test('S14: out of memory under noeviction is ClaimerUnavailableError, never a guessed state', async () => {
    const { claimer } = await setup();
    await acquired(await claimer.claim('done-before-oom', opts)).receipt.commit();
    await admin.config('SET', 'maxmemory', '1');
    try {
      await expect(claimer.claim('during-oom', opts)).rejects.toThrow(ClaimerUnavailableError);
      await expect(claimer.claim('during-oom', opts)).rejects.toThrow(/OOM/);
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    expect((await claimer.claim('during-oom', opts)).state).toBe('acquired');
  });

  test('S13: SCRIPT FLUSH between messages: claim, extend and commit recover through NOSCRIPT, and the reloads are counted', async () => {
    const { claimer } = await setup({ coalesce: false });
    const first = acquired(await claimer.claim('msg-1', opts));
    await first.receipt.extend(10_000);
    await first.receipt.commit();
    expect(claimer.stats.scriptReloads).toBe(0);

    await admin.script('FLUSH');
    const second = acquired(await claimer.claim('msg-2', opts));
    await admin.script('FLUSH');
    await second.receipt.extend(10_000);
    await admin.script('FLUSH');
    await second.receipt.commit('two');
    await admin.script('FLUSH');
    const third = acquired(await claimer.claim('msg-3', opts));
    await admin.script('FLUSH');
    await third.receipt.release();
    expect(claimer.stats.scriptReloads).toBe(5);
    const done = await claimer.claim('msg-2', opts);
    expect(done.state === 'done' && done.result).toBe('two');
  });

  for (const variant of [
    { name: 'coalesced multi-key calls', options: { coalesce: true }, client: {} },
    { name: 'ioredis auto-pipelining', options: { coalesce: false }, client: { enableAutoPipelining: true } },
  ]) {
    test(`S13: SCRIPT FLUSH with batched commit and extend (${variant.name}): no NOSCRIPT, lease lost or failed commit surfaces`, async () => {
      const { claimer } = await setup(variant.options, variant.client);
      const keys = Array.from({ length: 30 }, (_, i) => `batch-${i}`);
      const claims = await Promise.all(keys.map((key) => claimer.claim(key, opts)));
      const receipts = claims.map((c) => acquired(c).receipt);
      await admin.script('FLUSH');
      await Promise.all(receipts.map((r) => r.extend(10_000)));
      await admin.script('FLUSH');
      await Promise.all(receipts.map((r, i) => r.commit(i)));
      await admin.script('FLUSH');
      const again = await Promise.all(keys.map((key) => claimer.claim(key, opts)));
      expect(again.map((c) => c.state === 'done' && c.result)).toEqual(keys.map((_, i) => i));
      expect(claimer.stats.scriptReloads).toBeGreaterThanOrEqual(3);
    });
  }

  test('ready() connects a lazyConnect client, and rejects with ClaimerUnavailableError within readyTimeoutMs when Redis is down', async () => {
    const lazy = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true, retryStrategy: () => 100, ...protocolOptions(protocol) });
    clients.push(lazy);
    const claimer = new RedisClaimer({ redis: lazy, logger: recordingLogger().logger }, { prefix: uniquePrefix('ready'), readyTimeoutMs: 500 });
    claimers.push(claimer);
    expect(lazy.status).toBe('wait');
    await claimer.ready();
    expect(lazy.status).toBe('ready');

    await server.stop();
    await waitFor(() => lazy.status !== 'ready', { timeoutMs: 5000, intervalMs: 10, what: 'the client to notice the outage' });
    const attempt = await timed(claimer.ready());
    expect(attempt.error).toBeInstanceOf(ClaimerUnavailableError);
    expect(attempt.ms).toBeLessThan(1500);
  });

  // ioredis 6 on RESP3 can hand RESP3-only reply types over as they are (replyMapping 'resp3'):
  // CONFIG GET then answers a map ({ policy: value }) instead of a flat array.
  const replyMappings = protocol === 3 && IOREDIS_MAJOR >= 6 ? ['legacy', 'resp3'] : ['legacy'];
  test.each(replyMappings)('ready() warns when maxmemory-policy could evict records, and not under noeviction (replyMapping %s)', async (replyMapping) => {
    for (const [policy, warns] of [
      ['allkeys-lru', true],
      ['volatile-ttl', true],
      ['noeviction', false],
    ] as const) {
      await admin.config('SET', 'maxmemory-policy', policy);
      const { log } = await setup({}, replyMapping === 'legacy' ? {} : ({ replyMapping } as RedisOptions));
      expect(log.calls.filter((c) => /could not read maxmemory-policy/.test(c.msg ?? ''))).toEqual([]);
      const warnings = log.calls.filter((c) => c.level === 'warn' && /maxmemory-policy/.test(c.msg ?? ''));
      expect(warnings.length).toBe(warns ? 1 : 0);
      if (warns) expect(warnings[0]!.obj).toMatchObject({ maxmemoryPolicy: policy });
    }
  });

  test('ready() warns about client settings with no bound on command latency', async () => {
    const { log } = await setup({}, { maxRetriesPerRequest: null });
    expect(log.calls.some((c) => c.level === 'warn' && /commandTimeout/.test(c.msg ?? ''))).toBe(true);
  });
}
