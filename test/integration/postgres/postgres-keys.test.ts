/**
 * `twophase keys diagnose` / `keys purge` on the real PostgreSQL: every state a key can be in,
 * and expired rows deleted in bounded batches with counts.
 */
import { namespaceKey } from '../../../src';
import { diagnoseKey, PostgresClaimer, purgeExpired, SchemaMismatchError } from '../../../adapters/postgres';
import { runCli } from '../../../adapters/cli';
import { describeWithServices } from '../../support/services';
import { freshSchema, pgUrl, type SchemaFixture, uniqueSchema } from './support/pg-helpers';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describeWithServices(['postgres'], 'twophase keys diagnose / purge (postgres)', () => {
  let f: SchemaFixture;
  beforeEach(async () => {
    f = await freshSchema('keys');
  });
  afterEach(() => f.cleanup());

  test('diagnose: missing, in_progress, lease_expired, replayable, fingerprint_conflict, failed, expired', async () => {
    const claimer = new PostgresClaimer({ pool: f.pool }, { schema: f.schema });
    const d = (key: string, fingerprint?: string) => diagnoseKey(f.pool, { schema: f.schema, key, ...(fingerprint ? { fingerprint } : {}) });
    expect(await d('nope')).toEqual({ state: 'missing', key: 'nope' });

    await claimer.claim('busy', { leaseTtlMs: 60_000, doneTtlMs: 60_000 });
    expect(await d('busy')).toMatchObject({ state: 'in_progress', attempt: 1 });

    await claimer.claim('stale', { leaseTtlMs: 100, doneTtlMs: 60_000 });
    const done = await claimer.claim('done', { leaseTtlMs: 1000, doneTtlMs: 60_000, fingerprint: 'fp-a' });
    if (done.state === 'acquired') await done.receipt.commit({ reply: 'ok' });
    const failed = await claimer.claim('failed', { leaseTtlMs: 1000, doneTtlMs: 60_000 });
    if (failed.state === 'acquired') await failed.receipt.release({ resetAttempts: true });
    const gone = await claimer.claim('gone', { leaseTtlMs: 100, doneTtlMs: 100 });
    if (gone.state === 'acquired') await gone.receipt.commit();
    await sleep(250);

    expect(await d('stale')).toMatchObject({ state: 'lease_expired' });
    expect(await d('done')).toMatchObject({ state: 'replayable', result: { reply: 'ok' } });
    expect(await d('done', 'fp-b')).toMatchObject({ state: 'fingerprint_conflict', givenFingerprint: 'fp-b' });
    expect(await d('failed')).toMatchObject({ state: 'failed', retryable: false });
    expect(await d('gone')).toMatchObject({ state: 'expired', status: 'completed' });
  });

  test('CLI diagnose --consumer namespaces the key as the consumer does; --json is one stable object', async () => {
    const claimer = new PostgresClaimer({ pool: f.pool }, { schema: f.schema });
    const r = await claimer.claim(namespaceKey('payments', 'order-7'), { leaseTtlMs: 1000, doneTtlMs: 60_000 });
    if (r.state === 'acquired') await r.receipt.commit(42);
    const out: string[] = [];
    const io = { stdout: (t: string) => void out.push(t), stderr: (t: string) => void out.push(t) };
    const code = await runCli(['keys', 'diagnose', '--store', 'postgres', '--url', pgUrl(), '--schema', f.schema, '--consumer', 'payments', '--key', 'order-7', '--json'], { io });
    expect(code).toBe(0);
    expect(JSON.parse(out.join(''))).toMatchObject({ state: 'replayable', key: 'payments:order-7', result: 42 });
    out.length = 0;
    expect(await runCli(['keys', 'diagnose', '--store', 'mysql', '--key', 'x'], { io })).toBe(2);
    expect(await runCli(['keys', 'diagnose', '--store', 'postgres', '--prefix', 'p', '--key', 'x'], { io })).toBe(2);
  });

  test('CLI diagnose on a schema not migrated: the hint carries the same --schema (and --url), and running it as printed makes diagnose work', async () => {
    const schema = uniqueSchema('keys_unmigrated');
    const err: string[] = [];
    const io = { stdout: () => undefined, stderr: (t: string) => void err.push(t) };
    try {
      expect(await runCli(['keys', 'diagnose', '--store', 'postgres', '--url', pgUrl(), '--schema', schema, '--key', 'k'], { io, env: {} })).toBe(1);
      expect(err.join('')).toContain(`run \`twophase postgres migrate --url ${pgUrl()} --schema ${schema}\``);
      err.length = 0;
      // The URL from the environment: the hint needs no --url, still the --schema.
      expect(await runCli(['keys', 'diagnose', '--store', 'postgres', '--schema', schema, '--key', 'k'], { io, env: { DATABASE_URL: pgUrl() } })).toBe(1);
      expect(err.join('')).toContain(`run \`twophase postgres migrate --schema ${schema}\``);
      const printed = /`(twophase postgres migrate [^`]*)`/.exec(err.join(''))![1]!.split(' ');
      expect(await runCli(printed.slice(1), { io, env: { DATABASE_URL: pgUrl() } })).toBe(0);
      expect(await runCli(['keys', 'diagnose', '--store', 'postgres', '--schema', schema, '--key', 'k'], { io, env: { DATABASE_URL: pgUrl() } })).toBe(0);
    } finally {
      await f.pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    }
  });

  test('CLI purge on a schema not migrated (a misspelled --schema): exit 1 with the migrate hint for that schema, not "nothing to purge"', async () => {
    const schema = uniqueSchema('keys_purge_unmigrated');
    const out: string[] = [];
    const io = { stdout: (t: string) => void out.push(t), stderr: (t: string) => void out.push(t) };
    expect(await runCli(['keys', 'purge', '--store', 'postgres', '--url', pgUrl(), '--schema', schema], { io, env: {} })).toBe(1);
    expect(out.join('')).not.toContain('nothing to purge');
    expect(out.join('')).toContain(`none of the twophase tables`);
    expect(out.join('')).toContain(`--schema ${schema}`);
    await expect(purgeExpired(f.pool, { schema })).rejects.toBeInstanceOf(SchemaMismatchError);
  });

  test('purge deletes only rows expired long enough, in bounded batches, and reports counts; --dry-run deletes nothing', async () => {
    const claimer = new PostgresClaimer({ pool: f.pool }, { schema: f.schema });
    const entries = await claimer.claimMany!(Array.from({ length: 25 }, (_, i) => ({ key: `old-${i}`, options: { leaseTtlMs: 100, doneTtlMs: 100 } })));
    for (const e of entries) if (e.ok && e.result.state === 'acquired') await e.result.receipt.commit();
    await claimer.claim('fresh', { leaseTtlMs: 60_000, doneTtlMs: 60_000 });
    await sleep(300);
    const out: string[] = [];
    const io = { stdout: (t: string) => void out.push(t), stderr: (t: string) => void out.push(t) };
    expect(await runCli(['keys', 'purge', '--store', 'postgres', '--url', pgUrl(), '--schema', f.schema, '--older-than', '100ms', '--dry-run', '--json'], { io })).toBe(0);
    expect(JSON.parse(out.join('')).tables.twophase_inbox.deleted).toBe(25);
    const report = await purgeExpired(f.pool, { schema: f.schema, olderThanMs: 100, batchSize: 10 });
    expect(report.tables.twophase_inbox).toEqual({ deleted: 25, batches: 3 });
    const left = await f.pool.query(`SELECT count(*)::int AS n FROM ${f.schema}.twophase_inbox`);
    expect(left.rows[0].n).toBe(1);
  });
});
