/**
 * `twophase keys diagnose --store redis` on the shared Redis (127.0.0.1:6379), each test in its
 * own prefix, deleted after: every state a real RedisClaimer leaves a key in, read back through
 * `diagnoseRedisKey` and through the CLI; `keys purge --store redis` refused with its reason.
 */
import type Redis from 'ioredis';
import { type ClaimResult, namespaceKey } from '../../../src';
import { diagnoseRedisKey, RedisClaimer, recordKey } from '../../../adapters/redis';
import { runCli } from '../../../adapters/cli';
import { describeWithServices } from '../../support/services';
import { connectRedis, deleteMatching, SHARED_REDIS, silentLogger, uniquePrefix } from './support/redis-helpers';
import { waitFor } from '../../support/wait';

const REDIS_URL = `redis://${SHARED_REDIS.host}:${SHARED_REDIS.port}`;

function acquired(result: ClaimResult) {
  if (result.state !== 'acquired') throw new Error(`expected acquired, got ${result.state}`);
  return result;
}

/** runCli with captured output; resolves with the exit code and what was written. */
async function cli(args: string[], env: Record<string, string | undefined> = {}) {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const code = await runCli(args, { io: { stdout: (t) => void stdout.push(t), stderr: (t) => void stderr.push(t) }, env });
  return { code, stdout: stdout.join(''), stderr: stderr.join('') };
}

describeWithServices(['redis'], 'twophase keys diagnose --store redis', () => {
  let client: Redis;
  let prefix: string;
  let claimer: RedisClaimer;
  beforeEach(async () => {
    client = await connectRedis();
    prefix = uniquePrefix('keys');
    claimer = new RedisClaimer({ redis: client, logger: silentLogger }, { prefix });
    await claimer.ready();
  });
  afterEach(async () => {
    await deleteMatching(client, `${prefix}:*`);
    await claimer.close();
    client.disconnect();
  });

  test('diagnoseRedisKey: missing, in_progress, lease_expired, replayable, released, fingerprint_conflict, foreign', async () => {
    const d = (key: string, fingerprint?: string) => diagnoseRedisKey(client, { prefix, key, ...(fingerprint === undefined ? {} : { fingerprint }) });
    expect(await d('nope')).toEqual({ state: 'missing', key: 'nope', redisKey: recordKey(prefix, 'nope') });

    const busy = acquired(await claimer.claim('busy', { leaseTtlMs: 60_000, doneTtlMs: 120_000 }));
    const inProgress = await d('busy');
    expect(inProgress).toMatchObject({ state: 'in_progress', attempt: 1, fencingToken: String(busy.receipt.fencingToken) });
    if (inProgress.state !== 'in_progress') throw new Error('unreachable');
    expect(inProgress.leaseLeftMs).toBeGreaterThan(50_000);
    expect(inProgress.leaseLeftMs).toBeLessThanOrEqual(60_000);
    expect(inProgress.retentionLeftMs).toBeGreaterThan(inProgress.leaseLeftMs);
    expect(inProgress.owner.length).toBeGreaterThan(0);

    acquired(await claimer.claim('stale', { leaseTtlMs: 100, doneTtlMs: 60_000 }));
    await waitFor(async () => (await d('stale')).state === 'lease_expired', { timeoutMs: 5000, intervalMs: 25, what: 'lease of "stale" to expire' });
    expect(await d('stale')).toMatchObject({ state: 'lease_expired', attempt: 1 });

    const done = acquired(await claimer.claim('done', { leaseTtlMs: 1000, doneTtlMs: 60_000, fingerprint: 'fp-a' }));
    await done.receipt.commit({ reply: 'ok', amount: 12.5 });
    expect(await d('done')).toMatchObject({ state: 'replayable', result: { reply: 'ok', amount: 12.5 }, attempt: 1, fencingToken: String(done.receipt.fencingToken) });
    expect(await d('done', 'fp-a')).toMatchObject({ state: 'replayable' });
    expect(await d('done', 'fp-b')).toMatchObject({ state: 'fingerprint_conflict', storedFingerprint: 'fp-a', givenFingerprint: 'fp-b' });

    // The fingerprint is stored by byte length, so `|` and multi-byte characters in it are read back whole.
    const odd = acquired(await claimer.claim('odd', { leaseTtlMs: 1000, doneTtlMs: 60_000, fingerprint: 'a|b€|' }));
    await odd.receipt.commit(['x|y']);
    expect(await d('odd', 'a|b€|')).toMatchObject({ state: 'replayable', result: ['x|y'] });
    expect(await d('odd', 'a|b€')).toMatchObject({ state: 'fingerprint_conflict', storedFingerprint: 'a|b€|' });

    const noResult = acquired(await claimer.claim('done-empty', { leaseTtlMs: 1000, doneTtlMs: 60_000 }));
    await noResult.receipt.commit();
    expect(await d('done-empty')).not.toHaveProperty('result');

    // Two acquisitions, then a release: the record keeps its attempt count for the next claim.
    const first = acquired(await claimer.claim('retry', { leaseTtlMs: 1000, doneTtlMs: 60_000 }));
    await first.receipt.release();
    const second = acquired(await claimer.claim('retry', { leaseTtlMs: 1000, doneTtlMs: 60_000 }));
    await second.receipt.release();
    expect(await d('retry')).toMatchObject({ state: 'released', attempt: 2, fencingToken: String(second.receipt.fencingToken) });

    // A dead-letter resets the attempt count: attempt 0, the next claim is attempt 1.
    const dead = acquired(await claimer.claim('dead', { leaseTtlMs: 1000, doneTtlMs: 60_000 }));
    await dead.receipt.release({ resetAttempts: true });
    expect(await d('dead')).toMatchObject({ state: 'released', attempt: 0 });

    await client.set(recordKey(prefix, 'other'), 'not a twophase record');
    await client.hset(recordKey(prefix, 'hash'), 'a', '1');
    expect(await d('other')).toMatchObject({ state: 'foreign' });
    expect(await d('hash')).toMatchObject({ state: 'foreign' });
  });

  test('CLI human output: a stored result and key with ESC sequences and bidi overrides print escaped (the JSON output keeps them as JSON escapes)', async () => {
    const key = 'order\u202e7';
    const first = acquired(await claimer.claim(key, { leaseTtlMs: 5000, doneTtlMs: 60_000 }));
    await first.receipt.commit({ note: 'paid\u001b]0;owned\u0007\u2066x' });
    const human = await cli(['keys', 'diagnose', '--store', 'redis', '--url', REDIS_URL, '--prefix', prefix, '--key', key]);
    expect(human.code).toBe(0);
    // eslint-disable-next-line no-control-regex -- matching control characters is the point
    expect(human.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
    expect(human.stdout).toContain('order\\u202e7');
    const json = await cli(['keys', 'diagnose', '--store', 'redis', '--url', REDIS_URL, '--prefix', prefix, '--key', key, '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ key });
  });

  test('diagnose writes nothing: the record and its retention are unchanged', async () => {
    const r = acquired(await claimer.claim('k', { leaseTtlMs: 60_000, doneTtlMs: 60_000 }));
    const before = await client.getBuffer(recordKey(prefix, 'k'));
    await diagnoseRedisKey(client, { prefix, key: 'k' });
    expect(await client.getBuffer(recordKey(prefix, 'k'))).toEqual(before);
    expect(await diagnoseRedisKey(client, { prefix, key: 'k' })).toMatchObject({ state: 'in_progress', fencingToken: String(r.receipt.fencingToken) });
  });

  test('CLI: --name/--consumer namespace the key as the consumer does; the full key works too; --json is one stable object', async () => {
    const full = namespaceKey('pay:ments', 'order-7');
    const r = acquired(await claimer.claim(full, { leaseTtlMs: 1000, doneTtlMs: 60_000 }));
    await r.receipt.commit(42);

    const byName = await cli(['keys', 'diagnose', '--store', 'redis', '--url', REDIS_URL, '--prefix', prefix, '--name', 'pay:ments', '--key', 'order-7', '--json']);
    expect(byName.code).toBe(0);
    const parsed = JSON.parse(byName.stdout) as Record<string, unknown>;
    expect(parsed).toEqual({
      state: 'replayable',
      key: full,
      redisKey: recordKey(prefix, full),
      result: 42,
      fencingToken: String(r.receipt.fencingToken),
      attempt: 1,
      retentionLeftMs: expect.any(Number),
    });
    const byConsumer = await cli(['keys', 'diagnose', '--store', 'redis', '--url', REDIS_URL, '--prefix', prefix, '--consumer', 'pay:ments', '--key', 'order-7', '--json']);
    expect(JSON.parse(byConsumer.stdout)).toMatchObject({ state: 'replayable', key: full });
    const byFullKey = await cli(['keys', 'diagnose', '--store', 'redis', '--url', REDIS_URL, '--prefix', prefix, '--key', full, '--json']);
    expect(JSON.parse(byFullKey.stdout)).toMatchObject({ state: 'replayable', key: full, result: 42 });
    const conflict = await cli(['keys', 'diagnose', '--store', 'redis', '--url', REDIS_URL, '--prefix', prefix, '--key', full, '--fingerprint', 'other', '--json']);
    expect(JSON.parse(conflict.stdout)).toMatchObject({ state: 'replayable' }); // committed without a fingerprint: nothing to conflict with
    const missing = await cli(['keys', 'diagnose', '--store', 'redis', '--url', REDIS_URL, '--prefix', prefix, '--name', 'pay:ments', '--key', 'order-8']);
    expect(missing.code).toBe(0);
    expect(JSON.parse(missing.stdout)).toMatchObject({ state: 'missing', key: namespaceKey('pay:ments', 'order-8') });
  });

  test('CLI: the URL comes from $TWOPHASE_REDIS_URL; in_progress and released through the CLI', async () => {
    const lease = acquired(await claimer.claim('live', { leaseTtlMs: 30_000, doneTtlMs: 60_000 }));
    const out = await cli(['keys', 'diagnose', '--store', 'redis', '--prefix', prefix, '--key', 'live', '--json'], { TWOPHASE_REDIS_URL: REDIS_URL });
    expect(out.code).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({ state: 'in_progress', attempt: 1, leaseLeftMs: expect.any(Number) });
    await lease.receipt.release();
    const released = await cli(['keys', 'diagnose', '--store', 'redis', '--prefix', prefix, '--key', 'live', '--json'], { TWOPHASE_REDIS_URL: REDIS_URL });
    expect(JSON.parse(released.stdout)).toMatchObject({ state: 'released', attempt: 1 });
  });

  test('CLI: an unreachable Redis is exit 1 with the error as JSON; postgres-only options and a bad prefix are usage errors', async () => {
    const down = await cli(['keys', 'diagnose', '--store', 'redis', '--url', 'redis://127.0.0.1:1', '--key', 'k', '--json']);
    expect(down.code).toBe(1);
    expect(JSON.parse(down.stdout)).toMatchObject({ type: 'error', error: expect.any(String) });
    const tenant = await cli(['keys', 'diagnose', '--store', 'redis', '--url', REDIS_URL, '--tenant', 't1', '--key', 'k']);
    expect(tenant.code).toBe(2);
    expect(tenant.stderr).toMatch(/--tenant applies to --store postgres only/);
    expect((await cli(['keys', 'diagnose', '--store', 'redis', '--url', REDIS_URL, '--schema', 's', '--key', 'k'])).code).toBe(2);
    const badPrefix = await cli(['keys', 'diagnose', '--store', 'redis', '--url', REDIS_URL, '--prefix', 'a{b}', '--key', 'k', '--json']);
    expect(badPrefix.code).toBe(1);
    expect(JSON.parse(badPrefix.stdout).error).toMatch(/prefix/);
  });

  test('keys purge --store redis is refused with the reason: Redis expires records itself', async () => {
    const out = await cli(['keys', 'purge', '--store', 'redis', '--json']);
    expect(out.code).toBe(2);
    expect(out.stderr).toMatch(/supports --store postgres only: Redis deletes each twophase record itself/);
    expect(out.stdout).toBe('');
  });
});
