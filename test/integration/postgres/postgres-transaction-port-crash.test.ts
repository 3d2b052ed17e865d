/**
 * SIGKILL of a worker process whose claim runs inside a database library's transaction
 * (node-postgres's port, Drizzle's, and Kysely's on the claimer's pool), between the effect and the COMMIT: PostgreSQL rolls the
 * transaction back when the connection drops and frees the key at once; the attempt count, written
 * outside the transaction, survives; the redelivery (a claim by another worker) runs once, so
 * exactly one effect remains.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { PostgresClaimer } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { waitFor } from '../../support/wait';
import { silentLogger } from '../redis/support/redis-helpers';
import { freshSchema, pgConfig, type SchemaFixture } from './support/pg-helpers';
import { PORT_NAMES, portUnderTest } from './support/ports';
import type { CrashChildConfig } from './support/crash-child';

describeWithServices(['postgres'], 'transaction port: SIGKILL of the worker between the effect and the COMMIT', () => {
  let f: SchemaFixture;
  let child: ChildProcess | undefined;
  beforeEach(async () => {
    f = await freshSchema('ormcore_crash');
    await f.pool.query(`CREATE TABLE ${f.schema}.effects (key text NOT NULL, fence bigint NOT NULL); CREATE TABLE ${f.schema}.markers (name text NOT NULL)`);
  });
  afterEach(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await f.cleanup();
  });

  test.each(PORT_NAMES)('%s: the effect rolls back with the dead session; the redelivery is attempt 2 and leaves exactly one effect', async (portName) => {
    const count = async () => (await f.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${f.schema}.effects`)).rows[0]!.n;
    const config: CrashChildConfig = { schema: f.schema, pg: pgConfig({ max: 4 }), port: portName, key: 'order-1' };
    child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, 'support', 'crash-child.ts'), JSON.stringify(config)], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, TS_NODE_TRANSPILE_ONLY: 'true' },
    });
    const exited = new Promise<void>((resolve) => child!.once('exit', () => resolve()));
    await waitFor(async () => (await f.pool.query(`SELECT 1 FROM ${f.schema}.markers WHERE name = 'inserted'`)).rowCount === 1, { what: 'the effect written, not committed', timeoutMs: 60_000 });
    const claimer = new PostgresClaimer({ pool: f.pool, logger: silentLogger, transactions: portUnderTest(portName, f.pool).port }, { schema: f.schema, mode: 'transactional' });
    // While the child holds the key: busy, and its effect is invisible.
    expect((await claimer.claim('order-1', { leaseTtlMs: 5000, doneTtlMs: 60_000 })).state).toBe('busy');
    expect(await count()).toBe(0);
    child.kill('SIGKILL');
    await exited;
    expect(child.signalCode).toBe('SIGKILL');
    await waitFor(async () => (await f.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND query LIKE '%${f.schema}%'`)).rows[0].n === 0, {
      what: 'the dead session ended',
      timeoutMs: 20_000,
    });
    expect(await count()).toBe(0);
    const p = portUnderTest(portName, f.pool);
    const redelivery = await claimer.claim('order-1', { leaseTtlMs: 5000, doneTtlMs: 60_000 });
    if (redelivery.state !== 'acquired') throw new Error(`expected acquired, got ${redelivery.state}`);
    expect(redelivery.attempt).toBe(2);
    await p.write(redelivery.receipt.transaction, `${f.schema}.effects`, 'order-1', redelivery.receipt.fencingToken);
    await redelivery.receipt.commit({ done: true });
    expect(await count()).toBe(1);
    expect(await claimer.claim('order-1', { leaseTtlMs: 5000, doneTtlMs: 60_000 })).toMatchObject({ state: 'done', result: { done: true } });
  }, 120_000);
});
