/**
 * The transactional (inbox) mode inside a database library's own transaction, on the shared
 * PostgreSQL, with node-postgres's port, Drizzle's, and Kysely's over the claimer's pool: the claim, the handler's effect and the
 * completed row share the library's transaction; busy answers at once; attempts survive
 * rollbacks and ended sessions; a hung owner cannot commit late; runOnce and ctx.outbox work
 * through the port.
 */
import type { ClaimOptions, OutboxEnvelope } from '../../../src';
import { runOnce } from '../../../src';
import type { PoolClient } from 'pg';
import { pgTransactions, PostgresClaimer, TransactionAbortedError, TransactionMisuseError, type TransactionReceipt } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { silentLogger } from '../redis/support/redis-helpers';
import { freshSchema, type SchemaFixture } from './support/pg-helpers';
import { PORT_NAMES, portUnderTest, type PortUnderTest } from './support/ports';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { drizzleTransactions, type DrizzleTransaction } from '../../../adapters/postgres/orm/drizzle';

const OPTIONS: ClaimOptions = { leaseTtlMs: 5000, doneTtlMs: 60_000 };

describeWithServices(['postgres'], 'PostgresClaimer transactional mode through a transaction port', () => {
  describe.each(PORT_NAMES)('%s', (portName) => {
    let f: SchemaFixture;
    let p: PortUnderTest;
    let claimer: PostgresClaimer<unknown>;
    let effects: string;
    beforeEach(async () => {
      f = await freshSchema('ormcore_port');
      effects = `${f.schema}.effects`;
      await f.pool.query(`CREATE TABLE ${effects} (key text NOT NULL, fence bigint NOT NULL)`);
      p = portUnderTest(portName, f.pool);
      claimer = new PostgresClaimer({ pool: f.pool, logger: silentLogger, transactions: p.port }, { schema: f.schema, mode: 'transactional' });
    });
    afterEach(async () => {
      // A test that failed midway may leave a claim's transaction open: end it so the schema can go.
      await f.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state LIKE 'idle in transaction%' AND query LIKE '%${f.schema}%'`);
      await f.cleanup();
    });

    async function count(key: string): Promise<number> {
      return (await f.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${effects} WHERE key = $1`, [key])).rows[0]!.n;
    }
    async function status(key: string): Promise<string | undefined> {
      const { keyDigests } = await import('../../../adapters/postgres');
      const r = await f.pool.query<{ status: string }>(`SELECT status FROM ${f.schema}.twophase_inbox WHERE key_digest = $1`, [keyDigests(key, undefined).key]);
      return r.rows[0]?.status;
    }
    async function acquire(key: string, options: ClaimOptions = OPTIONS): Promise<{ receipt: TransactionReceipt<unknown>; attempt: number }> {
      const claim = await claimer.claim(key, options);
      if (claim.state !== 'acquired') throw new Error(`expected acquired, got ${claim.state}`);
      return { receipt: claim.receipt as TransactionReceipt<unknown>, attempt: claim.attempt };
    }

    test('ready() passes on a migrated schema; commit makes the effect and the completed claim visible together', async () => {
      await claimer.ready();
      const { receipt, attempt } = await acquire('k1');
      expect(attempt).toBe(1);
      await p.write(receipt.transaction, effects, 'k1', receipt.fencingToken);
      expect(await count('k1')).toBe(0);
      expect(await status('k1')).toBeUndefined();
      await receipt.commit({ ok: 1 });
      expect(await count('k1')).toBe(1);
      expect(await status('k1')).toBe('completed');
      const again = await claimer.claim('k1', OPTIONS);
      expect(again).toMatchObject({ state: 'done', result: { ok: 1 } });
      expect(await claimer.peek('k1')).toMatchObject({ state: 'done' });
    });

    test('release rolls the effect back; the next claim is attempt 2 and may commit', async () => {
      const first = await acquire('k2');
      await p.write(first.receipt.transaction, effects, 'k2', first.receipt.fencingToken);
      await first.receipt.release();
      expect(await count('k2')).toBe(0);
      expect(await status('k2')).toBeUndefined();
      const second = await acquire('k2');
      expect(second.attempt).toBe(2);
      expect(second.receipt.fencingToken).toBeGreaterThan(first.receipt.fencingToken);
      await p.write(second.receipt.transaction, effects, 'k2', second.receipt.fencingToken);
      await second.receipt.commit();
      expect(await count('k2')).toBe(1);
    });

    test('a concurrent claim of the same key is busy at once (no wait); peek says busy', async () => {
      const holder = await acquire('k3');
      const started = performance.now();
      const other = await claimer.claim('k3', OPTIONS);
      expect(other.state).toBe('busy');
      expect(performance.now() - started).toBeLessThan(1000);
      expect(await claimer.peek('k3')).toMatchObject({ state: 'busy', attempts: 1 });
      await holder.receipt.release();
      const next = await claimer.claim('k3', OPTIONS);
      expect(next.state).toBe('acquired');
      await next.receipt.release();
    });

    test('attempts count across rollbacks and a reset after a dead-letter starts at 1 again', async () => {
      for (const expected of [1, 2, 3]) {
        const { receipt, attempt } = await acquire('k4');
        expect(attempt).toBe(expected);
        await receipt.release();
      }
      const fourth = await acquire('k4');
      expect(fourth.attempt).toBe(4);
      await fourth.receipt.release({ resetAttempts: true });
      const fresh = await acquire('k4');
      expect(fresh.attempt).toBe(1);
      await fresh.receipt.release();
    });

    test('a session ended by the server (pg_terminate_backend) rolls back; the attempt count survives; the late commit rejects', async () => {
      const { receipt } = await acquire('k5');
      await p.write(receipt.transaction, effects, 'k5', receipt.fencingToken);
      await f.pool.query(
        // '%schema%effects%': Kysely quotes the names ("schema"."effects").
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND datname = current_database() AND query LIKE '%${f.schema}%effects%'`,
      );
      await expect(receipt.commit()).rejects.toBeInstanceOf(TransactionAbortedError);
      expect(await count('k5')).toBe(0);
      const next = await acquire('k5');
      expect(next.attempt).toBe(2);
      await p.write(next.receipt.transaction, effects, 'k5', next.receipt.fencingToken);
      await next.receipt.commit();
      expect(await count('k5')).toBe(1);
    });

    test('a hung owner cannot commit late: past the lease the server ends its session, its commit rejects, a second worker commits once', async () => {
      const hung = await acquire('k6', { leaseTtlMs: 400, doneTtlMs: 60_000 });
      await p.write(hung.receipt.transaction, effects, 'k6', hung.receipt.fencingToken);
      await new Promise((r) => setTimeout(r, 1200));
      const second = await acquire('k6');
      await p.write(second.receipt.transaction, effects, 'k6', second.receipt.fencingToken);
      const late = await hung.receipt.commit().then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(late).toBeInstanceOf(TransactionAbortedError);
      // The server ended the session, so node-postgres never sent the COMMIT: never "may have committed".
      expect((late as Error).message).toMatch(/did not commit \(.+\); nothing was applied$/);
      await second.receipt.commit();
      expect(await count('k6')).toBe(1);
      const fence = (await f.pool.query<{ fence: string }>(`SELECT fence::text FROM ${effects} WHERE key = 'k6'`)).rows[0]!.fence;
      expect(Number(fence)).toBe(second.receipt.fencingToken);
    });

    test('ctx.outbox stages through the port: the message commits with the effect, and vanishes with a release', async () => {
      const released = await acquire('k7');
      await released.receipt.outbox.stage([envelope('b7')]);
      await released.receipt.release();
      const committed = await acquire('k7');
      await committed.receipt.outbox.stage([envelope('a7')]);
      await committed.receipt.commit();
      const rows = await f.pool.query<{ id: string }>(`SELECT id::text FROM ${f.schema}.twophase_outbox`);
      expect(rows.rows.map((r) => r.id)).toEqual([envelope('a7').id]);
    });

    test('runOnce through the port: ran then replayed; a failure rolls the write back', async () => {
      const options = { claimer, scope: { operation: 'report' }, key: 'day-1', leaseTtlMs: 5000, doneTtlMs: 60_000 };
      const fn = async ({ transaction, fencingToken }: { transaction: unknown; fencingToken: number }) => {
        await p.write(transaction, effects, 'day-1', fencingToken);
        return { rows: 1 };
      };
      await expect(
        runOnce<null, unknown>({ ...options }, async ({ transaction, fencingToken }) => {
          await p.write(transaction, effects, 'day-1', fencingToken);
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect(await count('day-1')).toBe(0);
      expect(await runOnce(options, fn)).toMatchObject({ status: 'ran', committed: true, result: { rows: 1 } });
      expect(await runOnce(options, fn)).toMatchObject({ status: 'replayed', result: { rows: 1 } });
      expect(await count('day-1')).toBe(1);
    });
  });

  describe('pgTransactions', () => {
    let f: SchemaFixture;
    beforeEach(async () => {
      f = await freshSchema('ormcore_pgtx');
    });
    afterEach(async () => {
      await f.cleanup();
    });

    test('the client handed out refuses COMMIT inside the claim and any query once the transaction ended', async () => {
      const claimer = new PostgresClaimer({ pool: f.pool, logger: silentLogger, transactions: pgTransactions(f.pool) }, { schema: f.schema, mode: 'transactional' });
      const claim = await claimer.claim('g1', OPTIONS);
      if (claim.state !== 'acquired') throw new Error(claim.state);
      const client = (claim.receipt as TransactionReceipt<PoolClient>).transaction;
      await expect(client.query('COMMIT')).rejects.toBeInstanceOf(TransactionMisuseError);
      await claim.receipt.release();
      await expect(client.query('SELECT 1')).rejects.toBeInstanceOf(TransactionAbortedError);
    });
  });

  describe('drizzleTransactions over the claimer\'s own pool', () => {
    let f: SchemaFixture;
    beforeEach(async () => {
      f = await freshSchema('ormcost_drz');
      await f.pool.query(`CREATE TABLE ${f.schema}.effects (key text NOT NULL, fence bigint NOT NULL)`);
    });
    afterEach(async () => {
      await f.cleanup();
    });

    test('the claim runs as without a port: Drizzle sends no BEGIN or COMMIT, a handler COMMIT is refused, a savepoint works', async () => {
      const logged: string[] = [];
      const db = drizzle(f.pool, { logger: { logQuery: (query: string) => void logged.push(query.trim().toLowerCase()) } });
      const claimer = new PostgresClaimer({ pool: f.pool, logger: silentLogger, transactions: drizzleTransactions(db) }, { schema: f.schema, mode: 'transactional' });
      const claim = await claimer.claim('d1', OPTIONS);
      if (claim.state !== 'acquired') throw new Error(claim.state);
      const tx = (claim.receipt as TransactionReceipt<DrizzleTransaction<typeof db>>).transaction;
      await tx.execute(sql`INSERT INTO ${sql.raw(`${f.schema}.effects`)} (key, fence) VALUES ('d1', 1)`);
      // A savepoint rolled back keeps the outer effect.
      await expect(
        tx.transaction(async (inner) => {
          await inner.execute(sql`INSERT INTO ${sql.raw(`${f.schema}.effects`)} (key, fence) VALUES ('d1', 2)`);
          inner.rollback();
        }),
      ).rejects.toThrow(/Rollback/);
      expect(logged.filter((q) => q === 'begin' || q === 'commit')).toEqual([]);
      // Drizzle's logger logs the statement before the client refuses it.
      const refused = await tx.execute(sql`COMMIT`).then(() => undefined, (error: unknown) => error as Error & { cause?: unknown });
      expect(refused?.cause ?? refused).toBeInstanceOf(TransactionMisuseError);
      await expect(claim.receipt.commit()).rejects.toBeInstanceOf(TransactionAbortedError);
      expect((await f.pool.query(`SELECT count(*)::int AS n FROM ${f.schema}.effects`)).rows[0].n).toBe(0);
      expect(logged.some((q) => q.startsWith('insert into'))).toBe(true);

      const again = await claimer.claim('d1', OPTIONS);
      if (again.state !== 'acquired') throw new Error(again.state);
      expect(again.attempt).toBe(2);
      await (again.receipt as TransactionReceipt<DrizzleTransaction<typeof db>>).transaction.execute(sql`INSERT INTO ${sql.raw(`${f.schema}.effects`)} (key, fence) VALUES ('d1', 3)`);
      await again.receipt.commit();
      expect((await f.pool.query(`SELECT fence::int FROM ${f.schema}.effects`)).rows).toEqual([{ fence: 3 }]);
      expect(logged.filter((q) => q === 'begin' || q === 'commit')).toEqual(['commit']);
    });
  });

  describe('configuration', () => {
    let f: SchemaFixture;
    beforeEach(async () => {
      f = await freshSchema('ormcore_cfg', { migrated: false });
    });
    afterEach(async () => {
      await f.cleanup();
    });

    test('a port with per-chunk batches, the standalone mode or the tenant inbox is refused, naming why', () => {
      const port = portUnderTest('pg', f.pool).port;
      expect(() => new PostgresClaimer({ pool: f.pool, transactions: port }, { mode: 'transactional', transactionBatch: 'per-chunk' })).toThrow(/per-chunk.*each claim needs its own/);
      expect(() => new PostgresClaimer({ pool: f.pool, transactions: port }, {})).toThrow(/needs mode "transactional"/);
      expect(() => new PostgresClaimer({ pool: f.pool, transactions: port }, { mode: 'transactional', tenantOf: () => 't1' })).toThrow(/tenant inbox/);
      expect(() => new PostgresClaimer({ pool: f.pool, transactions: {} as never }, { mode: 'transactional' })).toThrow(/transaction port/);
    });

    test('ready() with a port needs migration 4', async () => {
      const { migrate } = await import('../../../adapters/postgres');
      await migrate(f.pool, { schema: f.schema });
      await f.pool.query(`DROP FUNCTION ${f.schema}.twophase_port_claim; DELETE FROM ${f.schema}.twophase_migrations WHERE version = 4`);
      const port = portUnderTest('pg', f.pool).port;
      await expect(new PostgresClaimer({ pool: f.pool, logger: silentLogger, transactions: port }, { schema: f.schema, mode: 'transactional' }).ready()).rejects.toThrow(/lacks migration 4/);
      await new PostgresClaimer({ pool: f.pool, logger: silentLogger }, { schema: f.schema, mode: 'transactional' }).ready();
    });
  });
});

function envelope(label: string): OutboxEnvelope {
  const id = `00000000-0000-4000-8000-${Buffer.from(label.padEnd(6, '0')).toString('hex').slice(0, 12)}`;
  return { id, system: 'rabbitmq', destination: { exchange: 'x', routingKey: 'r' }, headers: {}, properties: {}, body: Buffer.from(label), orderingKey: null };
}
