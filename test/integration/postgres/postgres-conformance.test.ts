/**
 * The claimer and runOnce conformance suites against PostgresClaimer on the real PostgreSQL, in
 * standalone and transactional mode (platform inbox and tenant inbox each), plus its own rules: claimMany is one round
 * trip, tenants never deduplicate each other, an unknown tenant is refused.
 */
import { InvalidKeyError } from '../../../src';
import { PostgresClaimer, TransactionAbortedError } from '../../../adapters/postgres';
import { type ClaimerFactory, describeClaimerConformance } from '../../conformance/claimer-conformance';
import { describeRunOnceConformance } from '../../conformance/run-once-conformance';
import { describeWithServices } from '../../support/services';
import { ReplyFaults } from '../../conformance/reply-faults';
import { freshSchema, type SchemaFixture } from './support/pg-helpers';
import { replyDroppingPool } from './support/reply-dropping-pool';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describeWithServices(['postgres'], 'PostgresClaimer conformance', () => {
  const platform: ClaimerFactory = async () => {
    const f = await freshSchema('conf');
    const faults = new ReplyFaults();
    const claimer = new PostgresClaimer({ pool: replyDroppingPool(f.pool, faults) }, { schema: f.schema });
    await claimer.ready();
    return { claimer, leaseTtlMs: 1000, advance: sleep, dropNextReply: (operation) => faults.dropNext(operation), cleanup: () => f.cleanup() };
  };
  const standalone = { claimMany: true, commitMany: false, transactional: false } as const;
  describeClaimerConformance('PostgresClaimer, platform inbox', platform, standalone);
  describeRunOnceConformance('PostgresClaimer, platform inbox', platform);

  const tenant: ClaimerFactory = async () => {
    const f = await freshSchema('conft');
    const faults = new ReplyFaults();
    const claimer = new PostgresClaimer({ pool: replyDroppingPool(f.pool, faults) }, { schema: f.schema, tenantOf: () => 't1' });
    await claimer.ready();
    return { claimer, leaseTtlMs: 1000, advance: sleep, dropNextReply: (operation) => faults.dropNext(operation), cleanup: () => f.cleanup() };
  };
  describeClaimerConformance('PostgresClaimer, tenant inbox', tenant, standalone);
  describeRunOnceConformance('PostgresClaimer, tenant inbox', tenant);

  // In transactional mode the lease is the claim's open transaction (see the suite's `transactional` capability).
  const transactional = (label: string, tenantOf?: (key: string) => string): ClaimerFactory => async () => {
    const f = await freshSchema(label);
    const faults = new ReplyFaults();
    const claimer = new PostgresClaimer({ pool: replyDroppingPool(f.pool, faults) }, { schema: f.schema, mode: 'transactional', ...(tenantOf ? { tenantOf } : {}) });
    await claimer.ready();
    return { claimer, leaseTtlMs: 1000, advance: sleep, dropNextReply: (operation) => faults.dropNext(operation), cleanup: () => f.cleanup() };
  };
  const inTransaction = { claimMany: false, commitMany: false, transactional: { abortError: TransactionAbortedError } } as const;
  describeClaimerConformance('PostgresClaimer, transactional platform inbox', transactional('conftx'), inTransaction);
  describeRunOnceConformance('PostgresClaimer, transactional platform inbox', transactional('conftx'));
  describeClaimerConformance('PostgresClaimer, transactional tenant inbox', transactional('conftxt', () => 't1'), inTransaction);
  describeRunOnceConformance('PostgresClaimer, transactional tenant inbox', transactional('conftxt', () => 't1'));

  describe('tenants and batches', () => {
    let f: SchemaFixture;
    const opts = { leaseTtlMs: 5000, doneTtlMs: 60_000 };
    beforeEach(async () => {
      f = await freshSchema('tenant');
    });
    afterEach(() => f.cleanup());

    test("one tenant's key never deduplicates another's; an unknown tenant is refused by the database (InvalidKeyError)", async () => {
      const claimer = new PostgresClaimer({ pool: f.pool }, { schema: f.schema, tenantOf: (key) => key.split('/')[0]! });
      const a = await claimer.claim('t1/order-1', opts);
      expect(a.state).toBe('acquired');
      if (a.state === 'acquired') await a.receipt.commit('t1 result');
      const b = await claimer.claim('t2/order-1', opts);
      expect(b.state).toBe('acquired');
      expect((await claimer.claim('t1/order-1', opts)).state).toBe('done');
      await expect(claimer.claim('t9/order-1', opts)).rejects.toBeInstanceOf(InvalidKeyError);
      await expect(claimer.claim('t9/order-1', opts)).rejects.toThrow(/tenant does not exist/);
    });

    test('claimMany borrows one client and sends one statement (one round trip) for the whole batch', async () => {
      const claimer = new PostgresClaimer({ pool: f.pool }, { schema: f.schema });
      let acquires = 0;
      f.pool.on('acquire', () => void acquires++);
      const entries = await claimer.claimMany!(Array.from({ length: 50 }, (_, i) => ({ key: `k${i}`, options: opts })));
      expect(entries.every((e) => e.ok && e.result.state === 'acquired')).toBe(true);
      expect(acquires).toBe(1); // standalone mode sends one statement per borrowed client
      const rows = await f.pool.query(`SELECT count(*)::int AS n FROM ${f.schema}.twophase_inbox`);
      expect(rows.rows[0].n).toBe(50);
    });

    test('keepKeyText stores the readable key; by default only digests are stored', async () => {
      const plain = new PostgresClaimer({ pool: f.pool }, { schema: f.schema });
      const kept = new PostgresClaimer({ pool: f.pool }, { schema: f.schema, keepKeyText: true });
      await plain.claim('secret-key', { ...opts, fingerprint: 'fp' });
      await kept.claim('visible-key', opts);
      const rows = await f.pool.query(`SELECT key_text, octet_length(key_digest) AS n, octet_length(fingerprint) AS fp FROM ${f.schema}.twophase_inbox ORDER BY key_text NULLS FIRST`);
      expect(rows.rows).toEqual([
        { key_text: null, n: 32, fp: 32 },
        { key_text: 'visible-key', n: 32, fp: null },
      ]);
    });

    test('a misspelled option is a ConfigurationError', () => {
      expect(() => new PostgresClaimer({ pool: f.pool }, { schemaa: 'x' } as never)).toThrow(/PostgresClaimer options: unknown option "schemaa" \(did you mean "schema"\?\)/);
      expect(() => new PostgresClaimer({ pool: f.pool }, { mode: 'inbox' } as never)).toThrow(/mode must be/);
    });

    test('transactionBatch: validated; per-chunk needs transactional mode and offers claimMany, per-record does not', () => {
      expect(() => new PostgresClaimer({ pool: f.pool }, { mode: 'transactional', transactionBatch: 'chunk' } as never)).toThrow(/transactionBatch must be "per-record" or "per-chunk"/);
      expect(() => new PostgresClaimer({ pool: f.pool }, { transactionBatch: 'per-chunk' })).toThrow(/needs mode "transactional"/);
      expect(new PostgresClaimer({ pool: f.pool }, { mode: 'transactional', transactionBatch: 'per-chunk' }).claimMany).toBeInstanceOf(Function);
      expect(new PostgresClaimer({ pool: f.pool }, { mode: 'transactional' }).claimMany).toBeUndefined();
    });
  });
});
