/**
 * CrashableClaimer forwards everything of the claimer it wraps (batch commits, readiness, the
 * transaction flags and a receipt's transaction), and fails every store call once crashed.
 */
import { type Claimer, ClaimerUnavailableError, InMemoryClaimer, type Receipt } from '../../src';
import { type CommitRequest } from '../../src/adapter-kit';
import { CrashableClaimer } from '../../adapters/memory';

const TTLS = { leaseTtlMs: 5000, doneTtlMs: 60_000 };

async function acquire(claimer: Claimer, key: string): Promise<Receipt> {
  const result = await claimer.claim(key, TTLS);
  if (result.state !== 'acquired') throw new Error(`expected acquired, got ${result.state}`);
  return result.receipt;
}

describe('CrashableClaimer', () => {
  test('commitMany goes to the wrapped claimer\'s commitMany, with its own receipts, in one call', async () => {
    const inner = new InMemoryClaimer();
    const seen: CommitRequest[][] = [];
    const commitMany = inner.commitMany.bind(inner);
    inner.commitMany = (requests) => {
      seen.push([...requests]);
      return commitMany(requests);
    };
    const claimer = new CrashableClaimer(inner);
    const entries = await claimer.claimMany!([
      { key: 'a', options: TTLS },
      { key: 'b', options: TTLS },
    ]);
    const receipts = entries.map((e) => (e.ok && e.result.state === 'acquired' ? e.result.receipt : undefined));
    expect(claimer.commitMany).toBeDefined();
    const results = await claimer.commitMany!(receipts.map((receipt, i) => ({ receipt: receipt!, result: { i } })));
    expect(results).toEqual([{ ok: true }, { ok: true }]);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.map((r) => r.receipt.key)).toEqual(['a', 'b']);
    expect(seen[0]!.map((r) => r.result)).toEqual([{ i: 0 }, { i: 1 }]);
    // The wrapped claimer got its own receipts, not the wrappers.
    expect(seen[0]!.every((r, i) => r.receipt !== receipts[i])).toBe(true);
    expect(await inner.claim('a', TTLS)).toMatchObject({ state: 'done', result: { i: 0 } });
    expect(await inner.claim('b', TTLS)).toMatchObject({ state: 'done', result: { i: 1 } });
  });

  test('commitMany after a crash fails every entry with ClaimerUnavailableError and commits nothing', async () => {
    const inner = new InMemoryClaimer();
    const claimer = new CrashableClaimer(inner);
    const receipt = await acquire(claimer, 'k');
    claimer.crashed = true;
    const results = await claimer.commitMany!([{ receipt }]);
    expect(results).toHaveLength(1);
    expect(results[0]!.ok).toBe(false);
    expect(!results[0]!.ok && results[0]!.error).toBeInstanceOf(ClaimerUnavailableError);
    expect((await inner.claim('k', TTLS)).state).toBe('busy');
  });

  test('without commitMany on the wrapped claimer, each receipt commits on its own', async () => {
    const inner = new InMemoryClaimer();
    const plain: Claimer = { kind: inner.kind, claim: (key, options) => inner.claim(key, options) };
    const claimer = new CrashableClaimer(plain);
    const receipt = await acquire(claimer, 'p');
    expect(await claimer.commitMany!([{ receipt, result: 1 }])).toEqual([{ ok: true }]);
    expect(await inner.claim('p', TTLS)).toMatchObject({ state: 'done', result: 1 });
  });

  test('forwards ready(), transactional, sharesTransactions and a receipt\'s transaction', async () => {
    const inner = new InMemoryClaimer();
    let readyCalls = 0;
    const transaction = { client: 'tx' };
    const wrapped: Claimer = {
      kind: inner.kind,
      transactional: true,
      sharesTransactions: true,
      ready: async () => {
        readyCalls++;
      },
      claim: async (key, options) => {
        const result = await inner.claim(key, options);
        return result.state === 'acquired' ? { ...result, receipt: Object.assign(Object.create(result.receipt) as Receipt, { transaction }) } : result;
      },
    };
    const claimer = new CrashableClaimer(wrapped);
    expect(claimer.transactional).toBe(true);
    expect(claimer.sharesTransactions).toBe(true);
    await claimer.ready!();
    expect(readyCalls).toBe(1);
    const receipt = await acquire(claimer, 't');
    expect(receipt.transaction).toBe(transaction);
    claimer.crashed = true;
    await expect(claimer.ready!()).rejects.toBeInstanceOf(ClaimerUnavailableError);
  });
});
