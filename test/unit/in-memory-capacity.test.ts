/**
 * Issue #12 item 6: InMemoryClaimer's optional `maxKeys`. Over it, the oldest committed records
 * are evicted first, then released ones; live leases never; each eviction is counted.
 */
import { type AcquiredClaim, ConfigurationError, InMemoryClaimer } from '../../src';

const opts = { leaseTtlMs: 10_000, doneTtlMs: 60_000 };

async function acquire(claimer: InMemoryClaimer, key: string): Promise<AcquiredClaim['receipt']> {
  const result = await claimer.claim(key, opts);
  if (result.state !== 'acquired') throw new Error(`${key} was ${result.state}`);
  return result.receipt;
}

describe('InMemoryClaimer maxKeys', () => {
  test('a maxKeys of the wrong type is refused naming the type (a string "10" is not 10)', () => {
    expect(() => new InMemoryClaimer({ maxKeys: '10' as never })).toThrow(/maxKeys must be an integer ≥ 1, got '10' \(a string\)/);
    expect(() => new InMemoryClaimer({ sweepPerClaim: '2' as never })).toThrow(/got '2' \(a string\)/);
  });

  test('a new key over maxKeys evicts the oldest committed record, counted in evictions', async () => {
    const claimer = new InMemoryClaimer({ maxKeys: 3 });
    for (const key of ['a', 'b', 'c']) await (await acquire(claimer, key)).commit();
    expect(claimer.evictions).toBe(0);
    await acquire(claimer, 'd');
    expect(claimer.size).toBe(3);
    expect(claimer.evictions).toBe(1);
    expect((await claimer.claim('b', opts)).state).toBe('done');
    expect((await claimer.claim('a', opts)).state).toBe('acquired'); // forgotten: its effect would run again
  });

  test('oldest by commit time, not by first claim', async () => {
    const claimer = new InMemoryClaimer({ maxKeys: 2 });
    const a = await acquire(claimer, 'a');
    const b = await acquire(claimer, 'b');
    await b.commit();
    await a.commit();
    await acquire(claimer, 'c');
    expect((await claimer.claim('a', opts)).state).toBe('done');
    expect(claimer.evictions).toBe(1);
  });

  test('committed records go before released ones; live leases are never evicted', async () => {
    const claimer = new InMemoryClaimer({ maxKeys: 3 });
    await (await acquire(claimer, 'released')).release();
    await acquire(claimer, 'leased');
    await (await acquire(claimer, 'done')).commit();
    await acquire(claimer, 'x'); // evicts "done", the committed one, although "released" is older
    expect(claimer.evictions).toBe(1);
    await acquire(claimer, 'y'); // then "released"
    expect(claimer.evictions).toBe(2);
    await acquire(claimer, 'z'); // only live leases left (leased, x, y): goes over maxKeys rather than evict one
    expect(claimer.evictions).toBe(2);
    expect(claimer.size).toBe(4);
    expect((await claimer.claim('leased', opts)).state).toBe('busy');
    expect((await claimer.claim('done', opts)).state).toBe('acquired'); // forgotten
    expect((await claimer.claim('released', opts)).state).toBe('acquired'); // forgotten, its attempt count too
  });

  test('without maxKeys nothing is evicted', async () => {
    const claimer = new InMemoryClaimer();
    for (let i = 0; i < 100; i++) await (await acquire(claimer, `k${i}`)).commit();
    expect(claimer.size).toBe(100);
    expect(claimer.evictions).toBe(0);
  });

  test.each([0, 1.5, '10'])('maxKeys %p is refused', (maxKeys) => {
    expect(() => new InMemoryClaimer({ maxKeys } as never)).toThrow(ConfigurationError);
  });
});
