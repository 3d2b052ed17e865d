/**
 * Hostile schema and tenants-table names on the real PostgreSQL: names with quotes, spaces,
 * semicolons, upper case and non-ASCII characters work in every mode with tenant text and
 * results that look like SQL; a name with `$` is refused when the claimer, the migration or the
 * key tools are built (the transactional mode writes values into its statements as literals, and
 * the migrations quote function bodies with `$fn$`: a `$` in a name could end up outside its quotes).
 */
import { randomBytes } from 'node:crypto';
import { Pool } from 'pg';
import { ConfigurationError } from '../../../src';
import { diagnoseKey, migrate, PostgresClaimer } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { pgConfig } from './support/pg-helpers';

describeWithServices(['postgres'], 'PostgreSQL: hostile identifiers', () => {
  let pool: Pool;
  const schemas: string[] = [];
  beforeAll(() => {
    pool = new Pool(pgConfig());
    pool.on('error', () => undefined);
  });
  afterAll(async () => {
    for (const s of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${s.replace(/"/g, '""')}" CASCADE`).catch(() => undefined);
    await pool.end();
  });

  const opts = { leaseTtlMs: 5000, doneTtlMs: 60_000 };
  const tenant = `t1'); DROP TABLE x; --"$1`;
  const result = { note: `$2 ' " ; $1 \\ end` };

  test.each([
    ['quote, space and semicolon', `tp "q" ; s ${randomBytes(3).toString('hex')}`],
    ['upper case and non-ASCII', `TP_Ünï_${randomBytes(3).toString('hex')}`],
  ])('a schema named with %s: migrate, then claim and commit in both modes with SQL-looking tenant text and result', async (_label, schema) => {
    const app = `${schema}_app`;
    schemas.push(schema, app);
    await pool.query(`CREATE SCHEMA "${app.replace(/"/g, '""')}"; CREATE TABLE "${app.replace(/"/g, '""')}"."ten ""ants" (id text PRIMARY KEY)`);
    await pool.query(`INSERT INTO "${app.replace(/"/g, '""')}"."ten ""ants" VALUES ($1)`, [tenant]);
    await migrate(pool, { schema, tenants: { schema: app, table: 'ten "ants', column: 'id' } });
    for (const mode of ['transactional', 'standalone'] as const) {
      const claimer = new PostgresClaimer({ pool }, { schema, mode, tenantOf: () => tenant });
      const key = `order-${mode}`;
      const first = await claimer.claim(key, opts);
      expect(first.state).toBe('acquired');
      if (first.state !== 'acquired') return;
      await first.receipt.commit(result);
      const again = await claimer.claim(key, opts);
      expect(again).toMatchObject({ state: 'done', result });
    }
  });

  test('a name with "$" is refused where it is given: claimer schema, migration schema and tenants table, key tools', async () => {
    expect(() => new PostgresClaimer({ pool }, { schema: 'tp_$1_x', mode: 'transactional' })).toThrow(ConfigurationError);
    expect(() => new PostgresClaimer({ pool }, { schema: 'tp_$1_x' })).toThrow(/schema must not contain "\$"/);
    await expect(migrate(pool, { schema: 'tp_$fn$' })).rejects.toThrow(ConfigurationError);
    await expect(migrate(pool, { schema: `tp_ok_${randomBytes(3).toString('hex')}`, tenants: { table: 'te$1nants' } })).rejects.toThrow(/tenants.table must not contain "\$"/);
    await expect(diagnoseKey(pool, { schema: 'tp_$1', key: 'k' })).rejects.toThrow(ConfigurationError);
  });
});
