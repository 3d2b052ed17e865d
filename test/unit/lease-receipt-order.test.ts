/**
 * LeaseReceipt's ordering rule, written once for every claimer: operations on one receipt run one
 * at a time, in call order; one that is called when nothing is in flight starts at once; a store
 * failure becomes ClaimerUnavailableError and does not hold back the operations queued after it.
 * Store primitives here answer only when the test says so, or synchronously (as in memory).
 */
import { ClaimerUnavailableError, LeaseLostError, ReceiptStateError } from '../../src';
import { type LeaseIdentity, type LeaseOperations, type LeaseOutcome, LeaseReceipt } from '../../src/claim/receipt';

interface Call {
  readonly op: 'commit' | 'release' | 'extend';
  answer(outcome: LeaseOutcome): void;
  fail(error: unknown): void;
}

function store(): { operations: LeaseOperations; calls: Call[] } {
  const calls: Call[] = [];
  const pending = (op: Call['op']) =>
    new Promise<LeaseOutcome>((resolve, reject) => {
      calls.push({ op, answer: resolve, fail: reject });
    });
  return {
    calls,
    operations: {
      commit: () => pending('commit'),
      release: () => pending('release'),
      extend: () => pending('extend'),
    },
  };
}

const lease: LeaseIdentity = { key: 'k', ownerToken: 'owner:1', fencingToken: 1 };
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

test('operations called together reach the store one at a time, in call order', async () => {
  const { operations, calls } = store();
  const receipt = new LeaseReceipt(lease, operations, 60_000, 4096);
  const extended = receipt.extend(1000);
  const committed = receipt.commit({ n: 1 });
  const released = receipt.release();
  await flush();
  expect(calls.map((c) => c.op)).toEqual(['extend']);
  calls[0]!.answer('ok');
  await expect(extended).resolves.toBeUndefined();
  await flush();
  expect(calls.map((c) => c.op)).toEqual(['extend', 'commit']);
  calls[1]!.answer('ok');
  await expect(committed).resolves.toBeUndefined();
  // The release comes after the commit landed: refused without a store call.
  await expect(released).rejects.toBeInstanceOf(ReceiptStateError);
  expect(calls).toHaveLength(2);
});

test('an operation called once the previous one finished starts at once (same turn)', async () => {
  const { operations, calls } = store();
  const receipt = new LeaseReceipt(lease, operations, 60_000, 4096);
  const first = receipt.extend(1000);
  expect(calls).toHaveLength(1);
  calls[0]!.answer('ok');
  await first;
  void receipt.commit();
  expect(calls.map((c) => c.op)).toEqual(['extend', 'commit']);
});

test('a store failure is ClaimerUnavailableError and the operation queued behind it still runs', async () => {
  const { operations, calls } = store();
  const receipt = new LeaseReceipt(lease, operations, 60_000, 4096);
  const extended = receipt.extend(1000);
  const committed = receipt.commit();
  calls[0]!.fail(new Error('connection reset'));
  await expect(extended).rejects.toBeInstanceOf(ClaimerUnavailableError);
  await flush();
  expect(calls.map((c) => c.op)).toEqual(['extend', 'commit']);
  calls[1]!.answer('lost');
  await expect(committed).rejects.toBeInstanceOf(LeaseLostError);
  // Settled as lost: a release is a no-op and reaches no store, at once.
  await expect(receipt.release()).resolves.toBeUndefined();
  expect(calls).toHaveLength(2);
});

test('a primitive that throws synchronously is a rejection, and the next operation is not blocked', async () => {
  const calls: string[] = [];
  const operations: LeaseOperations = {
    commit: () => {
      calls.push('commit');
      throw new Error('boom');
    },
    release: async () => {
      calls.push('release');
      return 'ok' as const;
    },
    extend: async () => 'ok' as const,
  };
  const receipt = new LeaseReceipt(lease, operations, 60_000, 4096);
  await expect(receipt.commit()).rejects.toBeInstanceOf(ClaimerUnavailableError);
  await expect(receipt.release()).resolves.toBeUndefined();
  expect(calls).toEqual(['commit', 'release']);
});

test('a store that answers synchronously: each operation settles with its outcome, in call order', async () => {
  const calls: string[] = [];
  let next: LeaseOutcome = 'ok';
  const answer = (op: string): LeaseOutcome => {
    calls.push(op);
    return next;
  };
  const operations: LeaseOperations = { commit: () => answer('commit'), release: () => answer('release'), extend: () => answer('extend') };
  const receipt = new LeaseReceipt(lease, operations, 60_000, 4096);
  await expect(receipt.extend(1000)).resolves.toBeUndefined();
  next = 'committed'; // this lease's own commit landed earlier: a release is refused
  await expect(receipt.release()).rejects.toBeInstanceOf(ReceiptStateError);
  await expect(receipt.commit()).resolves.toBeUndefined(); // already committed: no store call
  expect(calls).toEqual(['extend', 'release']);

  const lostReceipt = new LeaseReceipt(lease, operations, 60_000, 4096);
  next = 'lost';
  const committing = lostReceipt.commit();
  const releasing = lostReceipt.release(); // the commit settled at once as lost: a no-op
  await expect(committing).rejects.toBeInstanceOf(LeaseLostError);
  await expect(releasing).resolves.toBeUndefined();
  expect(calls).toEqual(['extend', 'release', 'commit']);
});
