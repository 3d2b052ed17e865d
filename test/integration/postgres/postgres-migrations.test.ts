/**
 * The inbox migrations on the real PostgreSQL: up on an empty schema, an idempotent re-run,
 * the outbox's leases as HOT updates (migration 5), the CHECK constraints refusing bad rows, the foreign key refusing an unknown tenant, the
 * startup check failing closed, and the CLI (`twophase postgres migrate`).
 */
import { createHash } from 'node:crypto';
import {
  MIGRATIONS,
  migrate,
  PostgresClaimer,
  SchemaMismatchError,
  stageOutbox,
} from '../../../adapters/postgres';
import { runCli } from '../../../adapters/cli';
import { describeWithServices } from '../../support/services';
import { freshSchema, pgUrl, type SchemaFixture, uniqueSchema } from './support/pg-helpers';

const digest = (text: string) => createHash('sha256').update(text).digest();

describeWithServices(['postgres'], 'PostgreSQL inbox migrations', () => {
  let f: SchemaFixture;
  afterEach(async () => {
    await f?.cleanup();
  });

  test('up on an empty schema applies every migration in order and records it; a re-run applies nothing', async () => {
    f = await freshSchema('mig', { migrated: false });
    const first = await migrate(f.pool, { schema: f.schema, tenants: f.tenants });
    expect(first.alreadyApplied).toEqual([]);
    expect(first.applied.map((m) => m.version)).toEqual(MIGRATIONS.map((m) => m.version));
    const recorded = await f.pool.query(`SELECT version FROM ${f.schema}.twophase_migrations ORDER BY version`);
    expect(recorded.rows.map((r) => r.version)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    const again = await migrate(f.pool, { schema: f.schema, tenants: f.tenants });
    expect(again.applied).toEqual([]);
    expect(again.alreadyApplied).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(again.sql).toEqual([]);
  });

  test('concurrent runs apply each version once (advisory lock)', async () => {
    f = await freshSchema('migrace', { migrated: false });
    const runs = await Promise.all([1, 2, 3].map(() => migrate(f.pool, { schema: f.schema, tenants: f.tenants })));
    expect(runs.flatMap((r) => r.applied.map((m) => m.version)).sort()).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  test('without the tenants table the tenant inbox stays pending (reported as skipped) and is applied later', async () => {
    f = await freshSchema('migskip', { migrated: false });
    const first = await migrate(f.pool, { schema: f.schema });
    expect(first.applied.map((m) => m.version)).toEqual([1, 3, 4, 5, 6, 7]);
    expect(first.skipped.map((m) => m.version)).toEqual([2]);
    const later = await migrate(f.pool, { schema: f.schema, tenants: f.tenants });
    expect(later.applied.map((m) => m.version)).toEqual([2]);
  });

  test('a dry run lists the SQL and changes nothing', async () => {
    f = await freshSchema('migdry', { migrated: false });
    const dry = await migrate(f.pool, { schema: f.schema, tenants: f.tenants, dryRun: true });
    expect(dry.applied.map((m) => m.version)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(dry.sql.join('\n')).toContain('CREATE TABLE');
    const exists = await f.pool.query('SELECT to_regnamespace($1) AS s', [f.schema]);
    expect(exists.rows[0].s).toBeNull();
  });

  test('migration 5: a relay claim leases 1 KiB outbox rows as HOT updates (no new row version in the indexes)', async () => {
    f = await freshSchema('mighot');
    const body = Buffer.alloc(1024, 120);
    const client = await f.pool.connect();
    try {
      await client.query('BEGIN');
      await stageOutbox(client, [1, 2, 3].map((i) => ({ to: { topic: 't', key: `k${i}` }, body })), { schema: f.schema, notify: false });
      await client.query('COMMIT');
      // pg_stat_xact_user_tables counts this transaction's own changes, at once.
      const updates = async () =>
        (await client.query<{ upd: string; hot: string }>(`SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_xact_user_tables WHERE schemaname = $1 AND relname = 'twophase_outbox'`, [f.schema])).rows[0]!;
      await client.query('BEGIN');
      const claimed = await client.query<{ seq: string; fencing_token: string }>(`SELECT seq, fencing_token FROM ${f.schema}.twophase_outbox_claim('o', 10, 30000, '{kafka}', true)`);
      expect(claimed.rows).toHaveLength(3);
      expect(await updates()).toEqual({ upd: '3', hot: '3' });
      await client.query('COMMIT');
    } finally {
      await client.query('ROLLBACK').catch(() => undefined);
      client.release();
    }
  });

  test('CHECK constraints refuse bad rows: digest length, status, attempt, fencing token, outcome size and shape', async () => {
    f = await freshSchema('migcheck');
    const insert = (overrides: Record<string, unknown>) => {
      const row: Record<string, unknown> = {
        key_digest: digest('k'),
        fingerprint: null,
        status: 'processing',
        attempt: 1,
        owner_token: 'o',
        fencing_token: 1,
        outcome: '{}',
        expires_at: new Date(Date.now() + 60_000),
        ...overrides,
      };
      const names = Object.keys(row);
      return f.pool.query(`INSERT INTO ${f.schema}.twophase_inbox (${names.join(', ')}) VALUES (${names.map((_, i) => `$${i + 1}`).join(', ')})`, Object.values(row));
    };
    const refused = async (overrides: Record<string, unknown>, constraint: string) => {
      await expect(insert(overrides)).rejects.toMatchObject({ code: '23514', constraint });
    };
    await refused({ key_digest: Buffer.from('short') }, 'twophase_inbox_key_digest_sha256');
    await refused({ fingerprint: Buffer.alloc(31) }, 'twophase_inbox_fingerprint_sha256');
    await refused({ status: 'done' }, 'twophase_inbox_status');
    await refused({ attempt: 0 }, 'twophase_inbox_attempt_positive');
    await refused({ fencing_token: 0 }, 'twophase_inbox_fencing_token_positive');
    await refused({ owner_token: '' }, 'twophase_inbox_owner_token');
    await refused({ status: 'completed', outcome: JSON.stringify({ result: 'x'.repeat(5000) }) }, 'twophase_inbox_outcome_size');
    await refused({ status: 'completed', outcome: '[1]' }, 'twophase_inbox_outcome_object');
    await refused({ outcome: '{"result": 1}' }, 'twophase_inbox_outcome_empty_while_processing');
    await refused({ key_text: 'k'.repeat(513) }, 'twophase_inbox_key_text_len');
    await expect(insert({})).resolves.toBeDefined();
    // created_at / updated_at come from the server clock
    const row = await f.pool.query(`SELECT created_at, updated_at FROM ${f.schema}.twophase_inbox`);
    expect(row.rows[0].created_at).toBeInstanceOf(Date);
  });

  test('the tenant inbox: the foreign key refuses an unknown tenant; keys are unique per tenant', async () => {
    f = await freshSchema('migfk');
    const insert = (tenant: string, key: string) =>
      f.pool.query(
        `INSERT INTO ${f.schema}.twophase_tenant_inbox (tenant_id, key_digest, status, attempt, owner_token, fencing_token, expires_at)
         VALUES ($1, $2, 'processing', 1, 'o', 1, clock_timestamp())`,
        [tenant, digest(key)],
      );
    await expect(insert('nobody', 'k')).rejects.toMatchObject({ code: '23503', constraint: 'twophase_tenant_inbox_tenant_fkey' });
    await insert('t1', 'k');
    await insert('t2', 'k');
    await expect(insert('t1', 'k')).rejects.toMatchObject({ code: '23505' });
  });

  test('start fails closed: ready() rejects with SchemaMismatchError on an unmigrated schema and on a changed column', async () => {
    f = await freshSchema('migready', { migrated: false });
    const claimer = new PostgresClaimer({ pool: f.pool }, { schema: f.schema });
    const unmigrated = await claimer.ready().catch((error: unknown) => error);
    expect(unmigrated).toBeInstanceOf(SchemaMismatchError);
    // Every difference listed, also when no migration ever ran (the common case).
    expect((unmigrated as SchemaMismatchError).problems).toEqual([
      `schema ${f.schema} does not exist`,
      `table ${f.schema}.twophase_migrations does not exist (no migration was applied)`,
      'migration 1 is not applied',
      `table ${f.schema}.twophase_inbox does not exist`,
    ]);
    expect((unmigrated as Error).message).toMatch(/- migration 1 is not applied/);
    await migrate(f.pool, { schema: f.schema });
    await expect(claimer.ready()).resolves.toBeUndefined();
    const tenantClaimer = new PostgresClaimer({ pool: f.pool }, { schema: f.schema, tenantOf: () => 't1' });
    await expect(tenantClaimer.ready()).rejects.toThrow(/lacks migration 2/);
    await expect(tenantClaimer.ready()).rejects.toMatchObject({ problems: ['migration 2 is not applied', `table ${f.schema}.twophase_tenant_inbox does not exist`] });
    await f.pool.query(`ALTER TABLE ${f.schema}.twophase_inbox ALTER COLUMN attempt TYPE bigint`);
    await expect(claimer.ready()).rejects.toThrow(/attempt is bigint, expected integer/);
  });

  test('CLI: twophase postgres migrate --url --schema [--dry-run] --json', async () => {
    f = await freshSchema('migcli', { migrated: false });
    const out: string[] = [];
    const io = { stdout: (t: string) => void out.push(t), stderr: (t: string) => void out.push(t) };
    const tenants = `${f.tenants.schema}.${f.tenants.table}`;
    expect(await runCli(['postgres', 'migrate', '--url', pgUrl(), '--schema', f.schema, '--tenants-table', tenants, '--dry-run', '--json'], { io })).toBe(0);
    const dry = JSON.parse(out.join(''));
    expect(dry).toMatchObject({ dryRun: true, applied: [{ version: 1 }, { version: 2 }, { version: 3 }, { version: 4 }, { version: 5 }, { version: 6 }, { version: 7 }] });
    out.length = 0;
    expect(await runCli(['postgres', 'migrate', '--url', pgUrl(), '--schema', f.schema, '--tenants-table', tenants, '--json'], { io })).toBe(0);
    expect(JSON.parse(out.join(''))).toMatchObject({ dryRun: false, applied: [{ version: 1 }, { version: 2 }, { version: 3 }, { version: 4 }, { version: 5 }, { version: 6 }, { version: 7 }] });
    out.length = 0;
    expect(await runCli(['postgres', 'migrate', '--url', pgUrl(), '--schema', f.schema], { io })).toBe(0);
    expect(out.join('')).toMatch(/up to date/);
    out.length = 0;
    const bad = uniqueSchema('x');
    expect(await runCli(['postgres', 'migrate', '--url', pgUrl(), '--schema', bad, '--tenants-table', 'public.no_such_table'], { io })).toBe(1);
    expect(out.join('')).toMatch(/does not exist/);
  });
});
