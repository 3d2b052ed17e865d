/**
 * PostgresClaimer's warnings when a claim's session cannot be ended cleanly (its backend was
 * terminated): one JSON line each by default, through the consumer-style logger, and
 * rate-limited so a storm of terminated sessions gives a few lines and a count, not a line per key.
 * Real PostgreSQL; only this test's own sessions are terminated.
 */
import type { PoolClient } from 'pg';
import { LOG_BURST } from '../../../src/adapter-kit';
import { PostgresClaimer } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { freshSchema, type SchemaFixture } from './support/pg-helpers';

const opts = { leaseTtlMs: 30_000, doneTtlMs: 60_000 };

describeWithServices(['postgres'], 'PostgresClaimer session warnings (real PostgreSQL)', () => {
  let f: SchemaFixture;
  beforeEach(async () => {
    f = await freshSchema('pgwarn');
  });
  afterEach(async () => {
    await f.cleanup();
  });

  /** Claims `n` keys in transactional mode and terminates each claim's backend. */
  async function terminatedClaims(claimer: PostgresClaimer, n: number) {
    const receipts = [];
    for (let i = 0; i < n; i++) {
      const claim = await claimer.claim(`pay-${i}`, opts);
      if (claim.state !== 'acquired') throw new Error(`pay-${i} not acquired`);
      const tx = claim.receipt.transaction as PoolClient;
      const pid = (await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await f.pool.query('SELECT pg_terminate_backend($1)', [pid]);
      receipts.push(claim.receipt);
    }
    return receipts;
  }

  test('a storm of terminated sessions logs the first few warnings, not one per key', async () => {
    const lines: { obj: object; msg?: string }[] = [];
    const logger = { warn: (obj: object, msg?: string) => lines.push({ obj, msg }), error: (obj: object, msg?: string) => lines.push({ obj, msg }) };
    const claimer = new PostgresClaimer({ pool: f.pool, logger }, { mode: 'transactional', schema: f.schema });
    const receipts = await terminatedClaims(claimer, LOG_BURST + 7);
    for (const receipt of receipts) await receipt.release().catch(() => undefined);
    const sessionLines = lines.filter((l) => /could not end the claim's session cleanly/.test(l.msg ?? ''));
    expect(sessionLines).toHaveLength(LOG_BURST);
  });

  test('the default logger writes each warning as one JSON line on stderr', async () => {
    const written: string[] = [];
    const spy = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    try {
      const claimer = new PostgresClaimer({ pool: f.pool }, { mode: 'transactional', schema: f.schema });
      const [receipt] = await terminatedClaims(claimer, 1);
      await receipt!.release().catch(() => undefined);
    } finally {
      spy.mockRestore();
    }
    const warning = written.find((w) => w.includes('could not end the claim'));
    expect(warning).toBeDefined();
    expect(warning!.trimEnd().split('\n')).toHaveLength(1);
    expect(JSON.parse(warning!)).toMatchObject({ level: 'warn', time: expect.any(Number), key: 'pay-0' });
  });
});
