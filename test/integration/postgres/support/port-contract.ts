/**
 * The transaction port's contract, run on one library's port against the shared PostgreSQL: a
 * fresh schema per test holding an `effect (id serial, key text, amount int, created_at)` table
 * that the library writes with its own API. Each ORM suite calls {@link describePortContract}
 * with a factory that builds the library's object on that schema.
 */
import type { Pool } from 'pg';
import type { TransactionLimits, TransactionPort } from '../../../../adapters/postgres/transaction-port';
import { freshSchema, type SchemaFixture } from './pg-helpers';

/** The library's side of one test: its port, its own way to write the effect, and its shutdown. */
export interface PortUnderTest<Tx> {
  readonly port: TransactionPort<Tx>;
  /** Inserts one effect row through the library's own API (model, query builder, repository). */
  writeEffect(tx: Tx, key: string, amount: number): Promise<void>;
  close(): Promise<void>;
}

export type PortFactory<Tx> = (fixture: SchemaFixture) => Promise<PortUnderTest<Tx>>;

export const LIMITS: TransactionLimits = { timeoutMs: 10_000, maxWaitMs: 5_000 };

/** The effect table, in `schema`. */
export async function createEffectTable(pool: Pool, schema: string): Promise<void> {
  await pool.query(
    `CREATE TABLE ${schema}.effect (id serial PRIMARY KEY, key text NOT NULL, amount integer NOT NULL, created_at timestamp(3) NOT NULL DEFAULT now())`,
  );
}

export async function effectCount(pool: Pool, schema: string, key: string): Promise<number> {
  const r = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.effect WHERE key = $1`, [key]);
  return r.rows[0]!.n;
}

class Boom extends Error {}

export function describePortContract<Tx>(label: string, name: string, factory: PortFactory<Tx>): void {
  describe(`the ${name} transaction port`, () => {
    let f: SchemaFixture;
    let lib: PortUnderTest<Tx>;
    beforeEach(async () => {
      f = await freshSchema(label);
      await createEffectTable(f.pool, f.schema);
      lib = await factory(f);
    });
    afterEach(async () => {
      await lib.close();
      await f.cleanup();
    });

    test(`is named ${name}`, () => {
      expect(lib.port.name).toBe(name);
    });

    test('commits the library write and the port statement together when work resolves, resolving with its value', async () => {
      const value = await lib.port.transaction(async (tx) => {
        await lib.writeEffect(tx, 'c1', 1);
        await lib.port.query(tx, `INSERT INTO ${f.schema}.effect (key, amount) VALUES ($1, $2)`, ['c1', 2]);
        return 'done';
      }, LIMITS);
      expect(value).toBe('done');
      expect(await effectCount(f.pool, f.schema, 'c1')).toBe(2);
    });

    test('rolls both back when work rejects, rejecting with the same error', async () => {
      const boom = new Boom('handler failed');
      await expect(
        lib.port.transaction(async (tx) => {
          await lib.writeEffect(tx, 'r1', 1);
          await lib.port.query(tx, `INSERT INTO ${f.schema}.effect (key, amount) VALUES ($1, $2)`, ['r1', 2]);
          throw boom;
        }, LIMITS),
      ).rejects.toBe(boom);
      expect(await effectCount(f.pool, f.schema, 'r1')).toBe(0);
    });

    test('query binds $n values (never spliced) and answers rows as column → value for text, integer, boolean and NULL', async () => {
      const hostile = `o'brien'); DROP TABLE ${f.schema}.effect; --`;
      const rows = await lib.port.transaction(
        (tx) => lib.port.query(tx, 'SELECT $1::text AS t, $2::integer AS i, $3::boolean AS b, $4::text AS n, $1::text = $5::text AS same', [hostile, 42, true, null, hostile]),
        LIMITS,
      );
      expect(rows).toEqual([{ t: hostile, i: 42, b: true, n: null, same: true }]);
      expect(await effectCount(f.pool, f.schema, 'x')).toBe(0); // the table is still there
    });

    test('query runs on the transaction connection: it sees the uncommitted library write, which no other connection sees', async () => {
      await lib.port.transaction(async (tx) => {
        await lib.writeEffect(tx, 'v1', 5);
        const inside = await lib.port.query(tx, `SELECT count(*)::int AS n, sum(amount)::int AS total FROM ${f.schema}.effect WHERE key = $1`, ['v1']);
        expect(inside).toEqual([{ n: 1, total: 5 }]);
        expect(await effectCount(f.pool, f.schema, 'v1')).toBe(0);
      }, LIMITS);
      expect(await effectCount(f.pool, f.schema, 'v1')).toBe(1);
    });

    test('UPDATE … RETURNING, INSERT … RETURNING and DELETE … RETURNING all answer their rows', async () => {
      const rows = await lib.port.transaction(async (tx) => {
        const inserted = await lib.port.query(tx, `INSERT INTO ${f.schema}.effect (key, amount) VALUES ($1, 1), ($1, 2) RETURNING amount::int AS amount`, ['u1']);
        const updated = await lib.port.query(tx, `UPDATE ${f.schema}.effect SET amount = amount + 10 WHERE key = $1 RETURNING amount::int AS amount`, ['u1']);
        const deleted = await lib.port.query(tx, `DELETE FROM ${f.schema}.effect WHERE key = $1 AND amount = $2 RETURNING key`, ['u1', 11]);
        const none = await lib.port.query(tx, `UPDATE ${f.schema}.effect SET amount = 0 WHERE key = $1 RETURNING key`, ['absent']);
        return { inserted, updated, deleted, none };
      }, LIMITS);
      expect(rows.inserted).toEqual([{ amount: 1 }, { amount: 2 }]);
      expect([...rows.updated].map((r) => r.amount).sort()).toEqual([11, 12]);
      expect(rows.deleted).toEqual([{ key: 'u1' }]);
      expect(rows.none).toEqual([]);
    });

    test('a COMMIT that fails (a deferred unique constraint) rejects the transaction and commits nothing', async () => {
      await f.pool.query(`ALTER TABLE ${f.schema}.effect ADD CONSTRAINT effect_key_unique UNIQUE (key) DEFERRABLE INITIALLY DEFERRED`);
      let workResolved = false;
      const outcome = lib.port.transaction(async (tx) => {
        await lib.writeEffect(tx, 'd1', 1);
        await lib.port.query(tx, `INSERT INTO ${f.schema}.effect (key, amount) VALUES ($1, 2)`, ['d1']);
        workResolved = true;
        return 'work resolved';
      }, LIMITS);
      await expect(outcome).rejects.toThrow(/effect_key_unique|unique/i);
      expect(workResolved).toBe(true);
      expect(await effectCount(f.pool, f.schema, 'd1')).toBe(0);
    });

    test('two transactions run on two connections at once: a row lock held by one blocks the other until it commits', async () => {
      await f.pool.query(`INSERT INTO ${f.schema}.effect (key, amount) VALUES ('lock', 0)`);
      let releaseFirst!: () => void;
      const firstHolds = new Promise<void>((resolve) => (releaseFirst = resolve));
      let firstLocked!: () => void;
      const locked = new Promise<void>((resolve) => (firstLocked = resolve));
      const first = lib.port.transaction(async (tx) => {
        await lib.port.query(tx, `SELECT 1 FROM ${f.schema}.effect WHERE key = 'lock' FOR UPDATE`, []);
        firstLocked();
        await firstHolds;
        await lib.port.query(tx, `UPDATE ${f.schema}.effect SET amount = amount + 1 WHERE key = 'lock'`, []);
      }, LIMITS);
      await locked;
      const second = lib.port.transaction(
        (tx) => lib.port.query(tx, `SELECT 1 AS one FROM ${f.schema}.effect WHERE key = 'lock' FOR UPDATE NOWAIT`, []),
        LIMITS,
      );
      await expect(second).rejects.toThrow(/could not obtain lock/);
      releaseFirst();
      await first;
      const after = await f.pool.query<{ amount: number }>(`SELECT amount FROM ${f.schema}.effect WHERE key = 'lock'`);
      expect(after.rows[0]!.amount).toBe(1);
    });
  });
}
