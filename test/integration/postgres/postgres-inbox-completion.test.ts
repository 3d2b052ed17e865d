/**
 * The transactional inbox's completion, with and without migration 7 (`twophase_complete`): a
 * claimer whose schema has the migration completes through the function, one without it through
 * the inline statement, and both keep the same rules on the real PostgreSQL: the key is done with
 * its result, the attempt count is forgotten and the attempt stored, a row a standalone claimer of the same table holds live is never overwritten (the
 * commit fails, nothing is applied), and an expired row is taken over.
 */
import type { PoolClient } from 'pg';
import { PostgresClaimer, TransactionAbortedError } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { freshSchema, type SchemaFixture } from './support/pg-helpers';

const opts = { leaseTtlMs: 5000, doneTtlMs: 60_000 };

describeWithServices(['postgres'], 'PostgresClaimer transactional completion', () => {
  describe.each([
    ['with migration 7 (twophase_complete)', true],
    ['without migration 7 (inline statement)', false],
  ])('%s', (_label, withFunction) => {
    let f: SchemaFixture;
    let sent: string[];
    let warnings: string[];
    let claimer: PostgresClaimer;

    beforeEach(async () => {
      f = await freshSchema('complete');
      await f.pool.query(`CREATE TABLE ${f.schema}.ledger (key text NOT NULL)`);
      if (!withFunction) {
        await f.pool.query(`DROP FUNCTION ${f.schema}.twophase_complete; DELETE FROM ${f.schema}.twophase_migrations WHERE version = 7`);
      }
      sent = [];
      warnings = [];
      // Records every statement text sent on the pool's clients (the claimer's and the handler's).
      const patched = new WeakSet<object>();
      f.pool.on('acquire', (client) => {
        if (patched.has(client)) return;
        patched.add(client);
        const query = client.query.bind(client) as (...a: unknown[]) => unknown;
        (client as unknown as { query: (...a: unknown[]) => unknown }).query = (...args: unknown[]) => {
          const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string } | undefined)?.text;
          if (typeof text === 'string') sent.push(text);
          return query(...args);
        };
      });
      const logger = { debug: () => undefined, info: () => undefined, warn: (_o: unknown, msg: string) => void warnings.push(msg), error: () => undefined };
      claimer = new PostgresClaimer({ pool: f.pool, logger }, { schema: f.schema, mode: 'transactional' });
      await claimer.ready();
    });
    afterEach(() => f.cleanup());

    const completions = () => sent.filter((t) => /COMMIT/.test(t) && /twophase_complete\(|twophase_inbox AS t/.test(t));

    test('the commit applies the effect and completes the key with its result, through the path the schema offers', async () => {
      const first = await claimer.claim('order-1', opts);
      expect(first.state).toBe('acquired');
      if (first.state !== 'acquired') return;
      await (first.receipt as unknown as { transaction: PoolClient }).transaction.query(`INSERT INTO ${f.schema}.ledger VALUES ('order-1')`);
      await first.receipt.commit({ booked: 1 });
      const again = await claimer.claim('order-1', opts);
      expect(again).toMatchObject({ state: 'done', result: { booked: 1 } });
      expect((await f.pool.query(`SELECT count(*)::int AS n FROM ${f.schema}.ledger`)).rows[0].n).toBe(1);
      expect((await f.pool.query(`SELECT count(*)::int AS n FROM ${f.schema}.twophase_attempts`)).rows[0].n).toBe(0);
      const row = (await f.pool.query(`SELECT status, attempt FROM ${f.schema}.twophase_inbox`)).rows;
      expect(row).toEqual([{ status: 'completed', attempt: 1 }]);
      expect(completions()).toHaveLength(1);
      expect(completions()[0]!.includes('twophase_complete(')).toBe(withFunction);
    });

    test('after a released attempt, the commit stores attempt 2 and forgets the count', async () => {
      const first = await claimer.claim('retry-1', opts);
      if (first.state !== 'acquired') throw new Error(`expected acquired, got ${first.state}`);
      await first.receipt.release();
      expect((await f.pool.query(`SELECT attempts FROM ${f.schema}.twophase_attempts`)).rows).toEqual([{ attempts: 1 }]);
      const second = await claimer.claim('retry-1', opts);
      expect(second).toMatchObject({ state: 'acquired', attempt: 2 });
      if (second.state !== 'acquired') return;
      await second.receipt.commit();
      expect((await f.pool.query(`SELECT status, attempt, outcome FROM ${f.schema}.twophase_inbox`)).rows).toEqual([{ status: 'completed', attempt: 2, outcome: {} }]);
      expect((await f.pool.query(`SELECT count(*)::int AS n FROM ${f.schema}.twophase_attempts`)).rows[0].n).toBe(0);
      expect(warnings).toEqual([]);
    });

    test('a row a standalone claimer holds live is not overwritten: the commit fails and nothing is applied', async () => {
      const claim = await claimer.claim('held-1', opts);
      if (claim.state !== 'acquired') throw new Error(`expected acquired, got ${claim.state}`);
      await (claim.receipt as unknown as { transaction: PoolClient }).transaction.query(`INSERT INTO ${f.schema}.ledger VALUES ('held-1')`);
      // A standalone claimer of the same table takes the key meanwhile (it does not take the advisory lock).
      const standalone = new PostgresClaimer({ pool: f.pool }, { schema: f.schema });
      expect((await standalone.claim('held-1', opts)).state).toBe('acquired');
      const failure = await claim.receipt.commit('late').catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(TransactionAbortedError);
      expect((failure as Error).message).toMatch(/held live by another claimer of the same table/);
      expect((await f.pool.query(`SELECT count(*)::int AS n FROM ${f.schema}.ledger`)).rows[0].n).toBe(0);
      expect((await f.pool.query(`SELECT status FROM ${f.schema}.twophase_inbox`)).rows).toEqual([{ status: 'processing' }]);
    });

    test('a row past its retention is taken over by the completion', async () => {
      const standalone = new PostgresClaimer({ pool: f.pool }, { schema: f.schema });
      expect((await standalone.claim('old-1', opts)).state).toBe('acquired');
      await f.pool.query(`UPDATE ${f.schema}.twophase_inbox SET expires_at = clock_timestamp() - interval '1 second', created_at = clock_timestamp() - interval '2 seconds'`);
      const claim = await claimer.claim('old-1', opts);
      if (claim.state !== 'acquired') throw new Error(`expected acquired, got ${claim.state}`);
      await claim.receipt.commit('fresh');
      expect(await claimer.claim('old-1', opts)).toMatchObject({ state: 'done', result: 'fresh' });
    });
  });
});
