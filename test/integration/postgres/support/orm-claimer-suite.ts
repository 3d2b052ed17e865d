/**
 * The PostgreSQL claimer's transactional mode on one ORM's transaction port (Prisma, Kysely,
 * TypeORM), against the shared PostgreSQL: the effect, written with the library's own API on
 * `receipt.transaction`, commits with the claim; a release rolls it back; a concurrent claim is busy
 * at once; a SIGKILL between the effect and the COMMIT leaves exactly one effect after the
 * redelivery; a hung owner cannot commit late; `ctx.outbox` stages in the same transaction; runOnce
 * runs through the port; and a write through the library's global object stays outside the inbox.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import type { ClaimOptions, OutboxEnvelope } from '../../../../src';
import { runOnce } from '../../../../src';
import { PostgresClaimer, TransactionAbortedError, type TransactionReceipt } from '../../../../adapters/postgres';
import { waitFor } from '../../../support/wait';
import { silentLogger } from '../../redis/support/redis-helpers';
import { freshSchema, pgConfig, type SchemaFixture } from './pg-helpers';
import { createEffectTable } from './port-contract';
import { type OrmName, type OrmUnderTest, ormUnderTest } from './orm-libraries';
import type { CrashChildConfig } from './crash-child';

const OPTIONS: ClaimOptions = { leaseTtlMs: 5000, doneTtlMs: 60_000 };

export function describeClaimerThroughOrm(name: OrmName): void {
  describe(`PostgresClaimer transactional mode on the ${name} port`, () => {
    let f: SchemaFixture;
    let lib: OrmUnderTest<unknown>;
    let claimer: PostgresClaimer<unknown>;
    let child: ChildProcess | undefined;
    beforeEach(async () => {
      f = await freshSchema(`orm_more_${name.replace('-', '_')}`);
      await createEffectTable(f.pool, f.schema);
      lib = await ormUnderTest(name, f.schema);
      claimer = new PostgresClaimer({ pool: lib.claimerPool ?? f.pool, logger: silentLogger, transactions: lib.port }, { schema: f.schema, mode: 'transactional' });
    });
    afterEach(async () => {
      if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      child = undefined;
      // A test that failed midway may leave a claim's transaction open: end it so the schema can go.
      await f.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state LIKE 'idle in transaction%' AND query LIKE '%${f.schema}%'`);
      await lib.close();
      await f.cleanup();
    });

    async function count(key: string): Promise<number> {
      return (await f.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${f.schema}.effect WHERE key = $1`, [key])).rows[0]!.n;
    }
    async function acquire(key: string, options: ClaimOptions = OPTIONS): Promise<{ receipt: TransactionReceipt<unknown>; attempt: number }> {
      const claim = await claimer.claim(key, options);
      if (claim.state !== 'acquired') throw new Error(`expected acquired, got ${claim.state}`);
      lib.checkClaimTransaction?.(claim.receipt.transaction);
      return { receipt: claim.receipt as TransactionReceipt<unknown>, attempt: claim.attempt };
    }

    test('ready() passes; the effect and the completed claim become visible together at commit', async () => {
      await claimer.ready();
      const { receipt, attempt } = await acquire('k1');
      expect(attempt).toBe(1);
      await lib.writeEffect(receipt.transaction, 'k1', receipt.fencingToken);
      expect(await count('k1')).toBe(0);
      await receipt.commit({ ok: 1 });
      expect(await count('k1')).toBe(1);
      expect(await claimer.claim('k1', OPTIONS)).toMatchObject({ state: 'done', result: { ok: 1 } });
    });

    test('release rolls the effect back; the next claim is attempt 2 with a higher fencing token and commits once', async () => {
      const first = await acquire('k2');
      await lib.writeEffect(first.receipt.transaction, 'k2', first.receipt.fencingToken);
      await first.receipt.release();
      expect(await count('k2')).toBe(0);
      const second = await acquire('k2');
      expect(second.attempt).toBe(2);
      expect(second.receipt.fencingToken).toBeGreaterThan(first.receipt.fencingToken);
      await lib.writeEffect(second.receipt.transaction, 'k2', second.receipt.fencingToken);
      await second.receipt.commit();
      expect(await count('k2')).toBe(1);
    });

    test('a concurrent duplicate is busy at once (no wait for the holder)', async () => {
      const holder = await acquire('k3');
      const started = performance.now();
      expect((await claimer.claim('k3', OPTIONS)).state).toBe('busy');
      expect(performance.now() - started).toBeLessThan(1000);
      await holder.receipt.release();
      const next = await acquire('k3');
      await next.receipt.release();
    });

    test('SIGKILL of a child process between the effect and the COMMIT: the effect rolls back; the redelivery is attempt 2 and leaves exactly one effect', async () => {
      await f.pool.query(`CREATE TABLE ${f.schema}.markers (name text NOT NULL)`);
      const config: CrashChildConfig = { schema: f.schema, pg: pgConfig({ max: 4 }), orm: name, key: 'order-1' };
      child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, 'crash-child.ts'), JSON.stringify(config)], {
        stdio: ['ignore', 'ignore', 'inherit'],
        env: { ...process.env, TS_NODE_TRANSPILE_ONLY: 'true' },
      });
      const running = child;
      const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()));
      await waitFor(async () => (await f.pool.query(`SELECT 1 FROM ${f.schema}.markers WHERE name = 'inserted'`)).rowCount === 1, { what: 'the effect written, not committed', timeoutMs: 90_000 });
      expect((await claimer.claim('order-1', OPTIONS)).state).toBe('busy');
      expect(await count('order-1')).toBe(0);
      running.kill('SIGKILL');
      await exited;
      expect(running.signalCode).toBe('SIGKILL');
      await waitFor(async () => (await f.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND query LIKE '%${f.schema}%'`)).rows[0].n === 0, {
        what: 'the dead session ended',
        timeoutMs: 20_000,
      });
      expect(await count('order-1')).toBe(0);
      const redelivery = await acquire('order-1');
      expect(redelivery.attempt).toBe(2);
      await lib.writeEffect(redelivery.receipt.transaction, 'order-1', redelivery.receipt.fencingToken);
      await redelivery.receipt.commit({ done: true });
      expect(await count('order-1')).toBe(1);
      expect(await claimer.claim('order-1', OPTIONS)).toMatchObject({ state: 'done', result: { done: true } });
    }, 150_000);

    test('a hung owner cannot commit late: past the lease the server ends its session, its commit rejects, a second worker commits once', async () => {
      const hung = await acquire('k6', { leaseTtlMs: 400, doneTtlMs: 60_000 });
      await lib.writeEffect(hung.receipt.transaction, 'k6', hung.receipt.fencingToken);
      // The hung session: the one holding a lock on this schema's effect table (its uncommitted write).
      const [pid] = (await f.pool.query<{ pid: number }>(`SELECT DISTINCT pid FROM pg_locks WHERE relation = '${f.schema}.effect'::regclass AND pid <> pg_backend_pid()`)).rows.map((r) => r.pid);
      expect(pid).toBeDefined();
      await new Promise((r) => setTimeout(r, 450));
      // The server ends the session once the lease has passed; on a loaded machine that can take
      // longer than the lease itself (a claim meanwhile is busy, rightly): wait for it to be gone.
      await waitFor(async () => (await f.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).rowCount === 0, { what: 'the hung session ended by the server', timeoutMs: 20_000 });
      const second = await acquire('k6');
      await lib.writeEffect(second.receipt.transaction, 'k6', second.receipt.fencingToken);
      const late = await hung.receipt.commit().then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(late).toBeInstanceOf(TransactionAbortedError);
      // The server ended the session, so the COMMIT was never sent: nothing was applied, and the
      // message says so (never "may have committed").
      expect((late as Error).message).toMatch(/did not commit \(.+\); nothing was applied$/);
      await second.receipt.commit();
      expect(await count('k6')).toBe(1);
      const fence = (await f.pool.query<{ amount: number }>(`SELECT amount FROM ${f.schema}.effect WHERE key = 'k6'`)).rows[0]!.amount;
      expect(fence).toBe(second.receipt.fencingToken);
    });

    test('ctx.outbox stages in the same transaction: the message commits with the effect, and vanishes with a release', async () => {
      const released = await acquire('k7');
      await lib.writeEffect(released.receipt.transaction, 'k7', 1);
      await released.receipt.outbox.stage([envelope('b7')]);
      await released.receipt.release();
      const committed = await acquire('k7');
      await lib.writeEffect(committed.receipt.transaction, 'k7', 2);
      await committed.receipt.outbox.stage([envelope('a7')]);
      await committed.receipt.commit();
      const rows = await f.pool.query<{ id: string }>(`SELECT id::text FROM ${f.schema}.twophase_outbox`);
      expect(rows.rows.map((r) => r.id)).toEqual([envelope('a7').id]);
      expect(await count('k7')).toBe(1);
    });

    test('runOnce with the claimer: a failure rolls the write back; then ran, then replayed; one effect', async () => {
      const options = { claimer, scope: { operation: 'report' }, key: 'day-1', leaseTtlMs: 5000, doneTtlMs: 60_000 };
      await expect(
        runOnce<null, unknown>(options, async ({ transaction, fencingToken }) => {
          lib.checkClaimTransaction?.(transaction);
          await lib.writeEffect(transaction, 'day-1', fencingToken);
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect(await count('day-1')).toBe(0);
      const fn = async ({ transaction, fencingToken }: { transaction: unknown; fencingToken: number }) => {
        await lib.writeEffect(transaction, 'day-1', fencingToken);
        return { rows: 1 };
      };
      expect(await runOnce(options, fn)).toMatchObject({ status: 'ran', committed: true, result: { rows: 1 } });
      expect(await runOnce(options, fn)).toMatchObject({ status: 'replayed', result: { rows: 1 } });
      expect(await count('day-1')).toBe(1);
    });

    test('the mistake the docs warn of: a write through the library outside ctx.transaction commits on its own and survives the release', async () => {
      const { receipt } = await acquire('k8');
      await lib.port.transaction((other) => lib.writeEffect(other, 'k8', 1), { timeoutMs: 5000, maxWaitMs: 5000 }); // another transaction of the same library
      await lib.writeEffect(receipt.transaction, 'k8', 2);
      await receipt.release();
      const left = await f.pool.query<{ amount: number }>(`SELECT amount FROM ${f.schema}.effect WHERE key = 'k8'`);
      expect(left.rows).toEqual([{ amount: 1 }]);
    });
  });
}

function envelope(label: string): OutboxEnvelope {
  const id = `00000000-0000-4000-8000-${Buffer.from(label.padEnd(6, '0')).toString('hex').slice(0, 12)}`;
  return { id, system: 'rabbitmq', destination: { exchange: 'x', routingKey: 'r' }, headers: {}, properties: {}, body: Buffer.from(label), orderingKey: null };
}
