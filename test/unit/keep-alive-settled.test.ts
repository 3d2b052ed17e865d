/**
 * LeaseKeeper with a receipt that got settled while kept (for example by a commit whose reply was
 * lost, which the store then reports as committed by this lease): the keeper stops keeping it
 * quietly. That is no lost lease (no onLost) and nothing to retry (no repeated onError).
 */
import { InMemoryClaimer } from '../../src';
import { LeaseKeeper } from '../../src/adapter-kit';
import { waitFor } from '../support/wait';

test('a receipt committed while kept stops being kept, without onLost and without repeated errors', async () => {
  const claimer = new InMemoryClaimer();
  const claim = await claimer.claim('kept', { leaseTtlMs: 300, doneTtlMs: 60_000 });
  if (claim.state !== 'acquired') throw new Error('expected acquired');
  const keeper = new LeaseKeeper(300, 20);
  const seen: string[] = [];
  keeper.keep(claim.receipt, { onLost: () => void seen.push('lost'), onError: () => void seen.push('error'), onExtended: () => void seen.push('extended') });
  await waitFor(() => seen.includes('extended'));
  await claim.receipt.commit();
  await waitFor(() => keeper.size === 0, { timeoutMs: 1000 });
  expect(seen.filter((s) => s !== 'extended')).toEqual([]);
  keeper.close();
});
