/**
 * runOnce on the PostgreSQL claimer: in transactional mode `fn` gets the claim's transaction, so
 * its writes commit with the key or roll back with a failure; in standalone mode the failure
 * policies leave the inbox statuses `failed_retryable` (record) and `failed_permanent` (release).
 */
import type { PoolClient } from 'pg';
import { InProgressError, PreviousAttemptFailedError, runOnce, type RunOnceOptions } from '../../../src';
import { PostgresClaimer } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { silentLogger } from '../redis/support/redis-helpers';
import { freshSchema, type SchemaFixture } from './support/pg-helpers';

describeWithServices(['postgres'], 'runOnce on PostgreSQL', () => {
  let f: SchemaFixture;
  beforeEach(async () => {
    f = await freshSchema('runonce');
    await f.pool.query(`CREATE TABLE ${f.schema}.effects (job text NOT NULL, fencing bigint NOT NULL)`);
  });
  afterEach(async () => {
    await f.cleanup();
  });

  function options(mode: 'transactional' | 'standalone', key: string): RunOnceOptions {
    return {
      claimer: new PostgresClaimer({ pool: f.pool, logger: silentLogger }, { schema: f.schema, mode }),
      scope: { operation: 'nightly-report', tenant: 'acme' },
      key,
      leaseTtlMs: 5000,
      doneTtlMs: 60_000,
    };
  }

  async function effects(job: string): Promise<number> {
    const r = await f.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${f.schema}.effects WHERE job = $1`, [job]);
    return Number(r.rows[0]!.n);
  }

  test('transactional: fn writes through context.transaction; the row commits with the key; a repeat replays', async () => {
    const write = async ({ transaction, fencingToken }: { transaction: PoolClient; fencingToken: number }) => {
      await transaction.query(`INSERT INTO ${f.schema}.effects VALUES ($1, $2)`, ['2026-12-01', fencingToken]);
      return { rows: 1 };
    };
    const first = await runOnce<{ rows: number }, PoolClient>(options('transactional', '2026-12-01'), write);
    const again = await runOnce<{ rows: number }, PoolClient>(options('transactional', '2026-12-01'), write);
    expect(first).toMatchObject({ status: 'ran', committed: true, result: { rows: 1 } });
    expect(again).toMatchObject({ status: 'replayed', result: { rows: 1 } });
    expect(await effects('2026-12-01')).toBe(1);
  });

  test.each(['transactional', 'standalone'] as const)('%s: the result keeps its key order through the jsonb column; a row written before (result only) still reads back; a result too large to carry its text keeps its values', async (mode) => {
    const first = await runOnce(options(mode, 'order-1'), () => ({ zeta: 1, a: 2, mm: { y: 1, b: 2 } }));
    const replay = await runOnce(options(mode, 'order-1'), () => ({ other: true }));
    expect(JSON.stringify(replay.result)).toBe(JSON.stringify(first.result));
    // SQL over the column still sees the value under "result".
    const stored = await f.pool.query<{ outcome: { result: unknown; result_text?: string } }>(`SELECT outcome FROM ${f.schema}.twophase_inbox WHERE status = 'completed'`);
    expect(stored.rows).toEqual([{ outcome: { result: { a: 2, mm: { b: 2, y: 1 }, zeta: 1 }, result_text: '{"zeta":1,"a":2,"mm":{"y":1,"b":2}}' } }]);
    // A row as an older version wrote it: the value under "result", in jsonb's order.
    await f.pool.query(`UPDATE ${f.schema}.twophase_inbox SET outcome = '{"result": {"zeta": 1, "a": 2}}'::jsonb WHERE status = 'completed'`);
    expect(await runOnce(options(mode, 'order-1'), () => null)).toMatchObject({ status: 'replayed', result: { a: 2, zeta: 1 } });
    // Near the 4096-byte bound the text does not fit beside the value: the row is written as before.
    const big = { zz: 'x'.repeat(3000), a: 1 };
    await runOnce(options(mode, 'order-2'), () => big);
    const bigReplay = await runOnce(options(mode, 'order-2'), () => null);
    expect(bigReplay).toMatchObject({ status: 'replayed', result: big });
  });

  test('transactional: a statement that fails (NOT NULL) rolls the write back with the claim; by default the key is not blocked and the next call runs as attempt 1', async () => {
    await expect(
      runOnce<null, PoolClient>(options('transactional', 'd2'), async ({ transaction }) => {
        await transaction.query(`INSERT INTO ${f.schema}.effects VALUES ('d2', 1)`);
        await transaction.query(`INSERT INTO ${f.schema}.effects VALUES ('d2', NULL)`);
        return null;
      }),
    ).rejects.toThrow(/null value/);
    expect(await effects('d2')).toBe(0);
    const next = await runOnce<null, PoolClient>(options('transactional', 'd2'), async ({ transaction }) => {
      await transaction.query(`INSERT INTO ${f.schema}.effects VALUES ('d2', 2)`);
      return null;
    });
    expect(next).toMatchObject({ status: 'ran', committed: true, attempt: 1 });
    expect(await effects('d2')).toBe(1);
  });

  test("transactional with onFailure: 'record' (effects outside the transaction): the failure stays recorded until retry: true", async () => {
    const recorded = { ...options('transactional', 'd3'), onFailure: 'record' as const };
    await expect(runOnce(recorded, () => Promise.reject(new Error('report generator crashed')))).rejects.toThrow('report generator crashed');
    await expect(runOnce(recorded, () => null)).rejects.toBeInstanceOf(PreviousAttemptFailedError);
    const retried = await runOnce<null, PoolClient>({ ...recorded, retry: true }, async ({ transaction }) => {
      await transaction.query(`INSERT INTO ${f.schema}.effects VALUES ('d3', 2)`);
      return null;
    });
    expect(retried).toMatchObject({ status: 'ran', committed: true });
    expect(await effects('d3')).toBe(1);
  });

  test("transactional with onFailure: 'record': ten calls at the same moment after the failure are all refused as a previous failure, none as in progress; a run in flight is busy", async () => {
    const recorded = { ...options('transactional', 'd4'), onFailure: 'record' as const, waitMs: 0 };
    await expect(runOnce(recorded, () => Promise.reject(new Error('x')))).rejects.toThrow('x');
    const outcomes = await Promise.allSettled(Array.from({ length: 10 }, () => runOnce(recorded, () => null)));
    expect(outcomes.map((r) => (r.status === 'rejected' ? (r.reason as Error).name : r.status))).toEqual(Array.from({ length: 10 }, () => 'PreviousAttemptFailedError'));
    // While a run holds the key (its advisory lock), a repeat is in progress, not a failure.
    let entered!: () => void;
    const started = new Promise<void>((resolve) => (entered = resolve));
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const running = runOnce({ ...recorded, retry: true }, async () => {
      entered();
      await gate;
      return null;
    });
    await started;
    await expect(runOnce(recorded, () => null)).rejects.toBeInstanceOf(InProgressError);
    open();
    await expect(running).resolves.toMatchObject({ status: 'ran', committed: true });
  });

  test("standalone: 'record' leaves failed_retryable and blocks; 'release' leaves failed_permanent and the next call is attempt 1", async () => {
    const status = async () => (await f.pool.query<{ status: string; attempt: number }>(`SELECT status, attempt FROM ${f.schema}.twophase_inbox`)).rows;
    await expect(runOnce(options('standalone', 'r1'), () => Promise.reject(new Error('x')))).rejects.toThrow('x');
    expect(await status()).toEqual([{ status: 'failed_retryable', attempt: 1 }]);
    await expect(runOnce(options('standalone', 'r1'), () => 1)).rejects.toBeInstanceOf(PreviousAttemptFailedError);

    await f.pool.query(`DELETE FROM ${f.schema}.twophase_inbox`);
    await expect(runOnce({ ...options('standalone', 'r2'), onFailure: 'release' }, () => Promise.reject(new Error('y')))).rejects.toThrow('y');
    expect(await status()).toEqual([{ status: 'failed_permanent', attempt: 1 }]);
    await expect(runOnce(options('standalone', 'r2'), () => 2)).resolves.toMatchObject({ status: 'ran', attempt: 1, result: 2 });
    expect(await status()).toEqual([{ status: 'completed', attempt: 1 }]);
  });
});
