/**
 * Batched commits (`batchCommits`, src/claim/commit-batcher.ts): the commits issued in one event-loop
 * turn travel as one `claimer.commitMany` call, while each delivery keeps its own outcome,
 * retries and deadline, and transactional receipts commit alone.
 */
import { ack, type Claimer, ClaimerUnavailableError, ConfigurationError, InMemoryClaimer, LeaseLostError, type Receipt } from '../../src';
import { commitEach, type CommitManyEntry, type CommitRequest } from '../../src/adapter-kit';
import { CommitBatcher, MAX_BATCHED_COMMITS } from '../../src/claim/commit-batcher';
import { FnConsumer, fastOptions, recordingDelivery, WrappingClaimer } from './helpers';

/** A stand-in receipt: only its key matters to a fake commitMany. */
function fakeReceipt(key: string): Receipt {
  const never = () => Promise.reject(new Error('not used'));
  return { key, acquired: true, ownerToken: 'o', fencingToken: 1, commit: never, release: never, extend: never };
}

/** A commitMany that records each call's keys and answers from `answer`. */
class FakeCommitMany {
  readonly calls: string[][] = [];
  answer: (request: CommitRequest) => CommitManyEntry = () => ({ ok: true });
  failWhole: Error | undefined;
  readonly commitMany = (requests: readonly CommitRequest[]): Promise<CommitManyEntry[]> => {
    this.calls.push(requests.map((r) => r.receipt.key));
    if (this.failWhole) return Promise.reject(this.failWhole);
    return Promise.resolve(requests.map((r) => this.answer(r)));
  };
}

const settledState = (p: Promise<void>) => p.then(() => 'ok', (error: Error) => error);

describe('CommitBatcher', () => {
  test('the commits of one turn go out as one commitMany call; the next turn makes another', async () => {
    const fake = new FakeCommitMany();
    const batcher = new CommitBatcher(fake);
    const first = ['a', 'b', 'c'].map((k) => batcher.commit(fakeReceipt(k), { n: k }));
    expect(fake.calls).toEqual([]); // nothing leaves before the turn ends
    await Promise.all(first);
    expect(fake.calls).toEqual([['a', 'b', 'c']]);
    await batcher.commit(fakeReceipt('d'), undefined);
    expect(fake.calls).toEqual([['a', 'b', 'c'], ['d']]);
  });

  test('each entry settles with its own answer: one failing entry fails alone', async () => {
    const fake = new FakeCommitMany();
    const lost = new LeaseLostError('b', 1, 'commit');
    fake.answer = (r) => (r.receipt.key === 'b' ? { ok: false, error: lost } : { ok: true });
    const batcher = new CommitBatcher(fake);
    const results = await Promise.all(['a', 'b', 'c'].map((k) => settledState(batcher.commit(fakeReceipt(k), undefined))));
    expect(results).toEqual(['ok', lost, 'ok']);
    expect(fake.calls).toHaveLength(1);
  });

  test('a commitMany that fails as a whole fails every entry of its batch; an entry missing from the answer fails as unavailable', async () => {
    const fake = new FakeCommitMany();
    fake.failWhole = new ClaimerUnavailableError('down');
    const batcher = new CommitBatcher(fake);
    const results = await Promise.all(['a', 'b'].map((k) => settledState(batcher.commit(fakeReceipt(k), undefined))));
    expect(results).toEqual([fake.failWhole, fake.failWhole]);

    const short: Pick<Claimer, 'commitMany'> = { commitMany: async () => [{ ok: true }] };
    const batcher2 = new CommitBatcher(short as Required<typeof short>);
    const [one, two] = await Promise.all(['a', 'b'].map((k) => settledState(batcher2.commit(fakeReceipt(k), undefined))));
    expect(one).toBe('ok');
    expect(two).toBeInstanceOf(ClaimerUnavailableError);
  });

  test(`a batch of ${MAX_BATCHED_COMMITS} leaves at once, without waiting for the turn to end`, async () => {
    const fake = new FakeCommitMany();
    const batcher = new CommitBatcher(fake);
    const pending = Array.from({ length: MAX_BATCHED_COMMITS + 1 }, (_, i) => batcher.commit(fakeReceipt(`k${i}`), undefined));
    expect(fake.calls.map((c) => c.length)).toEqual([MAX_BATCHED_COMMITS]);
    await Promise.all(pending);
    expect(fake.calls.map((c) => c.length)).toEqual([MAX_BATCHED_COMMITS, 1]);
  });
});

/** Counts commitMany calls and their sizes; `failOnce` makes the first batch fail those keys with an outage. */
class CountingClaimer extends WrappingClaimer {
  readonly batches: string[][] = [];
  readonly failOnce = new Set<string>();
  /** Keys whose entry fails with an outage in every batch. */
  readonly failAlways = new Set<string>();
  transaction: unknown = undefined;
  protected wrap(receipt: Receipt): Receipt {
    return this.transaction === undefined ? receipt : { ...receipt, transaction: this.transaction };
  }
  async commitMany(requests: readonly CommitRequest[]): Promise<CommitManyEntry[]> {
    this.batches.push(requests.map((r) => r.receipt.key));
    const failing = (key: string) => this.failOnce.has(key) || this.failAlways.has(key);
    const entries = await commitEach(requests.filter((r) => !failing(r.receipt.key)));
    let next = 0;
    return requests.map((r) => {
      if (failing(r.receipt.key)) {
        this.failOnce.delete(r.receipt.key);
        return { ok: false, error: new ClaimerUnavailableError('injected outage of one entry') };
      }
      return entries[next++]!;
    });
  }
}

describe('batchCommits on a consumer', () => {
  test('is off by default: each acked delivery commits alone', async () => {
    const claimer = new CountingClaimer(new InMemoryClaimer());
    const consumer = new FnConsumer(fastOptions(claimer), async () => ack());
    await Promise.all(['a', 'b'].map((key) => consumer.dispatch(recordingDelivery({ key }))));
    expect(claimer.batches).toEqual([]);
  });

  test('the acks of one turn commit in one commitMany call, each delivery with its own outcome', async () => {
    const claimer = new CountingClaimer(new InMemoryClaimer());
    const consumer = new FnConsumer({ ...fastOptions(claimer), batchCommits: true }, async () => ack({ ok: true }));
    const deliveries = ['a', 'b', 'c', 'd'].map((key) => recordingDelivery({ key }));
    const results = await Promise.all(deliveries.map((d) => consumer.dispatch(d)));
    expect(claimer.batches).toEqual([['test:a', 'test:b', 'test:c', 'test:d']]);
    expect(results.map((r) => r.outcome)).toEqual(['committed', 'committed', 'committed', 'committed']);
    expect(deliveries.map((d) => d.calls)).toEqual(deliveries.map(() => [{ op: 'ack', duplicate: false }]));
    const again = await claimer.inner.claim('test:c', { leaseTtlMs: 1000, doneTtlMs: 60_000 });
    expect(again).toMatchObject({ state: 'done', result: { ok: true } });
  });

  test('an entry that fails alone is retried alone within commitDeadlineMs; the others are not held', async () => {
    const claimer = new CountingClaimer(new InMemoryClaimer());
    claimer.failOnce.add('test:b');
    const consumer = new FnConsumer({ ...fastOptions(claimer), batchCommits: true }, async () => ack());
    const ended: string[] = [];
    const results = await Promise.all(
      ['a', 'b', 'c'].map((key) =>
        consumer.dispatch(recordingDelivery({ key })).then((r) => {
          ended.push(key);
          return r;
        }),
      ),
    );
    expect(claimer.batches).toEqual([['test:a', 'test:b', 'test:c'], ['test:b']]);
    expect(results.map((r) => r.outcome)).toEqual(['committed', 'committed', 'committed']);
    expect(ended).toEqual(['a', 'c', 'b']);
  });

  test('an entry that keeps failing ends commit_failed at its own commitDeadlineMs; the others of its batch committed at once', async () => {
    const claimer = new CountingClaimer(new InMemoryClaimer());
    claimer.failAlways.add('test:b');
    const consumer = new FnConsumer({ ...fastOptions(claimer), commitDeadlineMs: 300, batchCommits: true }, async () => ack());
    // How many commit batches had been sent when each delivery ended (wall-clock bounds would
    // fail on a loaded machine; the batch count tells the same story).
    const batchesAtEnd: Record<string, number> = {};
    const results = await Promise.all(
      ['a', 'b', 'c'].map((key) =>
        consumer.dispatch(recordingDelivery({ key })).then((r) => {
          batchesAtEnd[key] = claimer.batches.length;
          return r;
        }),
      ),
    );
    expect(results.map((r) => r.outcome)).toEqual(['committed', 'commit_failed', 'committed']);
    expect(results.map((r) => r.action)).toEqual(['ack', 'ack', 'ack']);
    // a and c ended with the first batch, before any retry of b (b's retries wait on a timer).
    expect(batchesAtEnd).toMatchObject({ a: 1, c: 1 });
    // b retried with backoff (50 ms, then 100 ms, …, each with jitter) until its deadline.
    expect(batchesAtEnd.b).toBe(claimer.batches.length);
    // The first batch carried all three; every retry carried b alone.
    expect(claimer.batches[0]).toEqual(['test:a', 'test:b', 'test:c']);
    expect(claimer.batches.slice(1).every((batch) => batch.length === 1 && batch[0] === 'test:b')).toBe(true);
    expect(claimer.batches.length).toBeGreaterThan(2);
  });

  test('a lease lost on one entry of a batch: that delivery alone ends lease_lost, the others commit', async () => {
    const inner = new InMemoryClaimer();
    const claimer = new CountingClaimer(inner);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const consumer = new FnConsumer({ ...fastOptions(claimer), leaseTtlMs: 100, keepAlive: false, handlerTimeoutMs: 5000, batchCommits: true }, async () => {
      await gate;
      return ack();
    });
    const running = ['a', 'b', 'c'].map((key) => consumer.dispatch(recordingDelivery({ key })));
    // Let b's lease run out and a newer owner take the key while the handlers still run.
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(await inner.claim('test:b', { leaseTtlMs: 60_000, doneTtlMs: 60_000 })).toMatchObject({ state: 'acquired' });
    release();
    const results = await Promise.all(running);
    expect(claimer.batches).toEqual([['test:a', 'test:b', 'test:c']]);
    expect(results.map((r) => r.outcome)).toEqual(['committed', 'lease_lost', 'committed']);
    // The effect is applied: the table acks it and reports the commit that did not land.
    expect(results.map((r) => r.action)).toEqual(['ack', 'ack', 'ack']);
  });

  test('a slow handler does not hold a fast handler’s commit (no head-of-line blocking)', async () => {
    const claimer = new CountingClaimer(new InMemoryClaimer());
    let releaseSlow!: () => void;
    const slow = new Promise<void>((resolve) => {
      releaseSlow = resolve;
    });
    const consumer = new FnConsumer({ ...fastOptions(claimer), batchCommits: true }, async (message) => {
      if (message.key === 'test:slow') await slow;
      return ack();
    });
    const slowRun = consumer.dispatch(recordingDelivery({ key: 'slow' }));
    const fast = await consumer.dispatch(recordingDelivery({ key: 'fast' }));
    expect(fast.outcome).toBe('committed');
    expect(claimer.batches).toEqual([['test:fast']]);
    releaseSlow();
    expect((await slowRun).outcome).toBe('committed');
    expect(claimer.batches).toEqual([['test:fast'], ['test:slow']]);
  });

  test('receipts with a transaction commit alone, never through commitMany', async () => {
    const claimer = new CountingClaimer(new InMemoryClaimer());
    claimer.transaction = { client: 'tx' };
    const consumer = new FnConsumer({ ...fastOptions(claimer), batchCommits: true }, async () => ack());
    const results = await Promise.all(['a', 'b'].map((key) => consumer.dispatch(recordingDelivery({ key }))));
    expect(results.map((r) => r.outcome)).toEqual(['committed', 'committed']);
    expect(claimer.batches).toEqual([]);
  });

  test('a claimer without commitMany commits each receipt on its own', async () => {
    const inner = new InMemoryClaimer();
    const commits: string[] = [];
    const claimer: Claimer = {
      kind: inner.kind,
      claim: async (key, options) => {
        const result = await inner.claim(key, options);
        if (result.state !== 'acquired') return result;
        const receipt = result.receipt;
        return { ...result, receipt: { ...receipt, key: receipt.key, acquired: true, ownerToken: receipt.ownerToken, fencingToken: receipt.fencingToken, commit: (v) => (commits.push(receipt.key), receipt.commit(v)), release: (o) => receipt.release(o), extend: (t) => receipt.extend(t) } };
      },
    };
    const consumer = new FnConsumer({ ...fastOptions(claimer), batchCommits: true }, async () => ack());
    const results = await Promise.all(['a', 'b'].map((key) => consumer.dispatch(recordingDelivery({ key }))));
    expect(results.map((r) => r.outcome)).toEqual(['committed', 'committed']);
    expect(commits.sort()).toEqual(['test:a', 'test:b']);
  });

  test('a misspelled or mistyped batchCommits is a ConfigurationError naming the option', () => {
    const claimer = new InMemoryClaimer();
    expect(() => new FnConsumer({ ...fastOptions(claimer), batchCommit: true } as never, async () => ack())).toThrow(/unknown option "batchCommit" \(did you mean "batchCommits"\?\)/);
    expect(() => new FnConsumer({ ...fastOptions(claimer), batchCommits: 'yes' } as never, async () => ack())).toThrow(ConfigurationError);
    expect(() => new FnConsumer({ ...fastOptions(claimer), batchCommits: 'yes' } as never, async () => ack())).toThrow(/batchCommits must be a boolean/);
  });
});
