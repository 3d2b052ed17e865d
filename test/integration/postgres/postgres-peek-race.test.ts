/**
 * `peek` in transactional mode while a run of the same key commits: it must answer busy or done,
 * never `failed` (runOnce answers `failed` with PreviousAttemptFailedError, HTTP 409 in the
 * http-idempotency example). The run's COMMIT comes before its advisory lock is released, in two
 * round trips; a peek whose snapshot predates the COMMIT and whose look at pg_locks follows the
 * release saw an attempt counted, no lock and no completed row.
 */
import { PostgresClaimer } from '../../../adapters/postgres';
import type { KeyPeek } from '../../../src';
import { describeWithServices } from '../../support/services';
import { silentLogger } from '../redis/support/redis-helpers';
import { freshSchema, type SchemaFixture } from './support/pg-helpers';

describeWithServices(['postgres'], 'PostgresClaimer peek (transactional) while a run of the key commits', () => {
  let f: SchemaFixture;
  beforeEach(async () => {
    f = await freshSchema('peekrace');
  });
  afterEach(async () => {
    await f.cleanup();
  });

  test('answers busy or done, never failed, across 150 commits each watched by 6 peeks', async () => {
    const claimer = new PostgresClaimer({ pool: f.pool, logger: silentLogger }, { schema: f.schema, mode: 'transactional' });
    const seen: Record<string, number> = {};
    for (let i = 0; i < 150; i++) {
      const key = `order-${i}`;
      const claim = await claimer.claim(key, { leaseTtlMs: 5000, doneTtlMs: 60_000 });
      expect(claim.state).toBe('acquired');
      if (claim.state !== 'acquired') return;
      const peeks: Promise<KeyPeek>[] = [];
      const committing = claim.receipt.commit({ ok: true });
      for (let p = 0; p < 6; p++) peeks.push(claimer.peek(key));
      await committing;
      for (const answer of await Promise.all(peeks)) seen[answer.state] = (seen[answer.state] ?? 0) + 1;
    }
    expect(seen.failed).toBeUndefined();
    expect((seen.busy ?? 0) + (seen.done ?? 0)).toBe(900);
  }, 60_000);
});
