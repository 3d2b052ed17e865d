/**
 * ConsumerBase: every row of the settlement table (README "Settlement"), one describe each.
 */
import {
  ack,
  type ConsumerEvent,
  InMemoryClaimer,
  OutboxNotAvailableError,
  PermanentError,
  reject,
  requeue,
  RetryableError,
  TransactionUnavailableError,
} from '../../src';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ManualClock } from '../support/manual-clock';
import { FlakyClaimer, FnConsumer, fastOptions, recordingDelivery } from './helpers';
import { waitFor } from '../support/wait';

function setup(handler = async () => ack()) {
  const claimer = new FlakyClaimer(new InMemoryClaimer());
  const events: ConsumerEvent[] = [];
  const consumer = new FnConsumer({ ...fastOptions(claimer), observers: [{ onEvent: (e) => events.push(e) }] }, handler);
  const types = () => events.map((e) => e.type);
  return { claimer, consumer, events, types };
}

describe('settlement table', () => {
  test('handler succeeded: commit, then ack; a redelivery is a done duplicate acked without running the handler', async () => {
    const { consumer, types, claimer } = setup();
    let runs = 0;
    consumer.handler = async () => {
      runs++;
      return ack({ receipt: 'r-1' });
    };
    const first = recordingDelivery({ key: 'order-1' });
    const r1 = await consumer.dispatch(first);
    expect(r1).toMatchObject({ action: 'ack', outcome: 'committed', handled: true, attempt: 1 });
    expect(first.calls).toEqual([{ op: 'ack', duplicate: false }]);
    expect(types()).toEqual(['acquired', 'committed']);
    // commit happened before the ack: the key is done now
    expect((await claimer.inner.claim('test:order-1', { leaseTtlMs: 1000, doneTtlMs: 60_000 })).state).toBe('done');

    const again = recordingDelivery({ key: 'order-1' });
    const r2 = await consumer.dispatch(again);
    expect(r2).toMatchObject({ action: 'ack', outcome: 'done_duplicate', handled: false });
    expect(again.calls).toEqual([{ op: 'ack', duplicate: true }]);
    expect(runs).toBe(1);
    expect(consumer.duplicates).toEqual([{ key: 'test:order-1', result: { receipt: 'r-1' } }]);
  });

  test('commit comes before the ack: the broker ack is called only after the key is done', async () => {
    const { consumer, claimer } = setup();
    let stateAtAck: string | undefined;
    const d = recordingDelivery({ key: 'order-order' }, {
      onSettle: () => {
        void claimer.inner.claim('test:order-order', { leaseTtlMs: 1000, doneTtlMs: 60_000 }).then((r) => (stateAtAck = r.state));
      },
    });
    await consumer.dispatch(d);
    await new Promise((r) => setImmediate(r));
    expect(stateAtAck).toBe('done');
  });

  test('busy: requeue after the busy delay, not an attempt, never ack nor dead-letter', async () => {
    const { consumer, claimer, types } = setup();
    let runs = 0;
    consumer.handler = async () => {
      runs++;
      return ack();
    };
    await claimer.inner.claim('test:held', { leaseTtlMs: 1000, doneTtlMs: 60_000 });
    const d = recordingDelivery({ key: 'held' });
    const r = await consumer.dispatch(d);
    expect(r).toMatchObject({ action: 'requeue', outcome: 'busy', reason: 'busy', delayMs: 10 });
    expect(d.calls).toEqual([{ op: 'requeue', delayMs: 10, info: { cause: 'busy' } }]);
    expect(types()).toEqual(['busy']);
    expect(runs).toBe(0);
  });

  test('claimer unavailable: local retries with backoff, then requeue after a delay; the handler never runs', async () => {
    const { consumer, claimer, types } = setup();
    let runs = 0;
    consumer.handler = async () => {
      runs++;
      return ack();
    };
    claimer.failClaims = 100;
    const d = recordingDelivery({ key: 'outage' });
    const r = await consumer.dispatch(d);
    expect(claimer.claimCalls).toBe(4); // 1 + claimRetries (3)
    expect(r).toMatchObject({ action: 'requeue', outcome: 'claim_failed' });
    expect(d.calls).toEqual([{ op: 'requeue', delayMs: 11, info: { cause: 'claimer_unavailable' } }]);
    expect(types()).toEqual(['claim_failed']);
    expect(runs).toBe(0);
  });

  test('claimer unavailable for a moment: a local retry succeeds and the message is processed', async () => {
    const { consumer, claimer } = setup();
    claimer.failClaims = 2;
    const d = recordingDelivery({ key: 'blip' });
    const r = await consumer.dispatch(d);
    expect(r).toMatchObject({ action: 'ack', outcome: 'committed' });
    expect(claimer.claimCalls).toBe(3);
  });

  test('failOpen (explicit option): the handler runs without a claim while the store is down, with a fail_open event', async () => {
    const claimer = new FlakyClaimer(new InMemoryClaimer());
    const events: string[] = [];
    const warnings: string[] = [];
    const logger = { debug: () => undefined, info: () => undefined, error: () => undefined, warn: (_o: object, m?: string) => warnings.push(m ?? '') };
    let runs = 0;
    const consumer = new FnConsumer({ ...fastOptions(claimer), failOpen: true, logger, observers: [{ onEvent: (e) => events.push(e.type) }] }, async () => {
      runs++;
      return ack();
    });
    expect(warnings.some((w) => w.includes('failOpen'))).toBe(true);
    claimer.failClaims = 100;
    const d = recordingDelivery({ key: 'open' });
    await consumer.dispatch(d);
    expect(runs).toBe(1);
    expect(events).toEqual(['claim_failed', 'fail_open']);
    expect(d.calls).toEqual([{ op: 'ack', duplicate: false }]);
  });

  test('key conflict: reject with reason key_conflict', async () => {
    const claimer = new InMemoryClaimer();
    const consumer = new FnConsumer(fastOptions(claimer), async () => ack());
    // The consumer stores a fingerprint of the body.
    (consumer as unknown as { fingerprint: (m: { raw: Buffer }) => string }).fingerprint = (m) => m.raw.toString('hex').slice(0, 64);
    await consumer.dispatch(recordingDelivery({ key: 'k', body: { amount: 1 } }));
    const other = recordingDelivery({ key: 'k', body: { amount: 2 } });
    const r = await consumer.dispatch(other);
    expect(r).toMatchObject({ action: 'reject', outcome: 'key_conflict', reason: 'key_conflict' });
    expect(other.calls).toEqual([{ op: 'reject', info: expect.objectContaining({ reason: 'key_conflict', attempts: 0, errorType: 'KeyConflictError' }) }]);
  });

  test('commit fails transiently: retried within the deadline, then committed and acked', async () => {
    const { consumer, claimer, types } = setup();
    claimer.failCommits = 2;
    const d = recordingDelivery({ key: 'commit-blip' });
    const r = await consumer.dispatch(d);
    expect(claimer.commitCalls).toBe(3);
    expect(r.outcome).toBe('committed');
    expect(types()).toEqual(['acquired', 'committed']);
    expect(d.calls).toEqual([{ op: 'ack', duplicate: false }]);
  });

  test('commit finally fails: the message is still acked (the effect happened) and commit_failed is reported', async () => {
    const { consumer, claimer, types } = setup();
    claimer.failCommits = 1_000;
    const d = recordingDelivery({ key: 'commit-down' });
    const r = await consumer.dispatch(d);
    expect(r).toMatchObject({ action: 'ack', outcome: 'commit_failed', handled: true });
    expect(types()).toEqual(['acquired', 'commit_failed']);
    expect(d.calls).toEqual([{ op: 'ack', duplicate: false }]);
  });

  test('handler failed retryably: release, requeue with backoff; the next attempt is counted', async () => {
    const { consumer, types, claimer } = setup();
    consumer.handler = async () => {
      throw new Error('db timeout');
    };
    const d1 = recordingDelivery({ key: 'flaky' });
    const r1 = await consumer.dispatch(d1);
    expect(r1).toMatchObject({ action: 'requeue', outcome: 'released', attempt: 1, delayMs: 100 });
    expect(d1.calls).toEqual([{ op: 'requeue', delayMs: 100, info: { cause: 'retry', attempt: 1 } }]);
    expect(types()).toEqual(['acquired', 'released']);
    expect(claimer.releaseCalls).toBe(1);
    const d2 = recordingDelivery({ key: 'flaky' });
    const r2 = await consumer.dispatch(d2);
    expect(r2).toMatchObject({ attempt: 2, delayMs: 200 });
  });

  test('handler returned requeue(): release and requeue with the asked delay', async () => {
    const { consumer } = setup(async () => requeue({ delayMs: 42 }));
    const d = recordingDelivery({ key: 'later' });
    await consumer.dispatch(d);
    expect(d.calls).toEqual([{ op: 'requeue', delayMs: 42, info: { cause: 'retry', attempt: 1 } }]);
  });

  test('after maxAttempts retryable failures the message is dead-lettered with reason retry_exhausted', async () => {
    const claimer = new InMemoryClaimer();
    const events: string[] = [];
    const consumer = new FnConsumer({ ...fastOptions(claimer), maxAttempts: 3, observers: [{ onEvent: (e) => events.push(e.type) }] }, async () => {
      throw new RetryableError('still failing');
    });
    const results = [];
    for (let i = 0; i < 3; i++) results.push(await consumer.dispatch(recordingDelivery({ key: 'poison' })));
    expect(results.map((r) => r.action)).toEqual(['requeue', 'requeue', 'reject']);
    expect(results[2]).toMatchObject({ outcome: 'retry_exhausted', reason: 'retry_exhausted', attempt: 3 });
    expect(events.filter((e) => e === 'retry_exhausted')).toHaveLength(1);
    // released with its attempt count reset, so a DLQ replay after the fix runs the handler again from attempt 1
    const replay = await claimer.claim('test:poison', { leaseTtlMs: 1000, doneTtlMs: 60_000 });
    expect(replay).toMatchObject({ state: 'acquired', attempt: 1 });
  });

  test('broker-counted prior attempts count toward maxAttempts', async () => {
    const { consumer } = setup(async () => {
      throw new Error('x');
    });
    const d = recordingDelivery({ key: 'counted', priorAttempts: 4 });
    const r = await consumer.dispatch(d);
    expect(r).toMatchObject({ action: 'reject', reason: 'retry_exhausted', attempt: 5 });
  });

  test('handler failed permanently: release and dead-letter at once; a replay after the fix is processed again', async () => {
    const claimer = new InMemoryClaimer();
    let fixed = false;
    const consumer = new FnConsumer(fastOptions(claimer), async () => {
      if (!fixed) throw new PermanentError('amount is negative');
      return ack();
    });
    const d = recordingDelivery({ key: 'bad-amount' });
    const r = await consumer.dispatch(d);
    expect(r).toMatchObject({ action: 'reject', reason: 'permanent_error', outcome: 'rejected' });
    expect(d.calls).toEqual([
      { op: 'reject', info: { reason: 'permanent_error', attempts: 1, errorMessage: 'amount is negative', errorType: 'PermanentError' } },
    ]);
    fixed = true;
    const replay = recordingDelivery({ key: 'bad-amount' });
    expect(await consumer.dispatch(replay)).toMatchObject({ action: 'ack', outcome: 'committed' });
  });

  test.each([
    ['TransactionUnavailableError (ctx.transaction with a claimer that gives none)', () => new TransactionUnavailableError()],
    ['OutboxNotAvailableError (ctx.outbox with a claimer that cannot stage)', () => new OutboxNotAvailableError('ctx.outbox needs a transactional claimer')],
  ])('a wiring error, %s, is dead-lettered at the first attempt: retrying cannot fix it', async (_name, make) => {
    const claimer = new InMemoryClaimer();
    const consumer = new FnConsumer({ ...fastOptions(claimer), maxAttempts: 5 }, async () => {
      throw make();
    });
    const d = recordingDelivery({ key: 'wiring' });
    expect(await consumer.dispatch(d)).toMatchObject({ action: 'reject', reason: 'permanent_error', attempt: 1 });
    expect(d.calls).toEqual([{ op: 'reject', info: expect.objectContaining({ reason: 'permanent_error', attempts: 1, errorType: make().name }) }]);
  });

  test("an error whose cause is a PermanentError (a database library's wrapper) is dead-lettered at the first attempt; a plain wrapper is retried", async () => {
    const claimer = new InMemoryClaimer();
    const wrapped = (cause: Error) => Object.assign(new Error('Failed query: COMMIT', { cause }), { name: 'DrizzleQueryError' });
    const consumer = new FnConsumer({ ...fastOptions(claimer), maxAttempts: 5 }, async (m) => {
      throw m.key.endsWith('permanent-cause') ? wrapped(new Error('wrapper of a wrapper', { cause: new PermanentError('refused') })) : wrapped(new Error('connection reset'));
    });
    const permanent = recordingDelivery({ key: 'permanent-cause' });
    expect(await consumer.dispatch(permanent)).toMatchObject({ action: 'reject', reason: 'permanent_error', attempt: 1 });
    expect(permanent.calls).toEqual([{ op: 'reject', info: expect.objectContaining({ reason: 'permanent_error', attempts: 1, errorType: 'DrizzleQueryError' }) }]);
    const transient = recordingDelivery({ key: 'transient-cause' });
    expect(await consumer.dispatch(transient)).toMatchObject({ action: 'requeue', reason: 'retry', attempt: 1 });
  });

  test("an error rebuilt with only the refused statement's code (TRANSACTION_MISUSE, as Prisma rebuilds it) is dead-lettered at the first attempt; another code is retried", async () => {
    const claimer = new InMemoryClaimer();
    const rebuilt = (code: string) => Object.assign(new Error('Invalid `prisma.$executeRawUnsafe()` invocation: COMMIT refused on ctx.transaction'), { name: 'PrismaClientKnownRequestError', code });
    const consumer = new FnConsumer({ ...fastOptions(claimer), maxAttempts: 5 }, async (m) => {
      throw rebuilt(m.key.endsWith('misuse') ? 'TRANSACTION_MISUSE' : 'P2002');
    });
    const misuse = recordingDelivery({ key: 'misuse' });
    expect(await consumer.dispatch(misuse)).toMatchObject({ action: 'reject', reason: 'permanent_error', attempt: 1 });
    expect(misuse.calls).toEqual([{ op: 'reject', info: expect.objectContaining({ reason: 'permanent_error', attempts: 1, errorType: 'PrismaClientKnownRequestError' }) }]);
    const other = recordingDelivery({ key: 'unique-violation' });
    expect(await consumer.dispatch(other)).toMatchObject({ action: 'requeue', reason: 'retry', attempt: 1 });
  });

  test('handler returned reject(reason): dead-letter with that reason, then release', async () => {
    const { consumer, types } = setup(async () => reject('unknown_account'));
    const d = recordingDelivery({ key: 'acct' });
    await consumer.dispatch(d);
    expect(d.calls).toEqual([{ op: 'reject', info: { reason: 'unknown_account', attempts: 1 } }]);
    expect(types()).toEqual(['acquired', 'rejected', 'released']);
  });

  test('a handler result that is not a disposition is an error, never an implicit ack', async () => {
    const { consumer } = setup(async () => undefined as never);
    const d = recordingDelivery({ key: 'void' });
    const r = await consumer.dispatch(d);
    expect(r).toMatchObject({ action: 'reject', reason: 'invalid_disposition' });
    expect(d.calls[0]).toMatchObject({ op: 'reject', info: { reason: 'invalid_disposition', errorType: 'InvalidDispositionError' } });
    const { consumer: c2 } = setup(async () => ({ type: 'acknowledge' }) as never);
    expect((await c2.dispatch(recordingDelivery({ key: 'typo' }))).action).toBe('reject');
  });

  test('a return value that is not a disposition is dead-lettered once as invalid_disposition even when isPermanent says retryable', async () => {
    class LenientConsumer extends FnConsumer {
      protected override isPermanent(): boolean {
        return false;
      }
    }
    const consumer = new LenientConsumer(fastOptions(new InMemoryClaimer()), async () => undefined as never);
    const d = recordingDelivery({ key: 'void-lenient' });
    expect(await consumer.dispatch(d)).toMatchObject({ action: 'reject', reason: 'invalid_disposition', attempt: 1 });
    expect(d.calls).toEqual([expect.objectContaining({ op: 'reject', info: expect.objectContaining({ reason: 'invalid_disposition', attempts: 1 }) })]);
    // A factory refusing its argument is the same programming error: the table decides it too.
    consumer.handler = async () => requeue({ delayMs: -1 });
    const bad = recordingDelivery({ key: 'bad-arg-lenient' });
    expect(await consumer.dispatch(bad)).toMatchObject({ action: 'reject', reason: 'invalid_disposition' });
  });

  test.each([
    ['requeue({ delayMs: -5 })', () => requeue({ delayMs: -5 }), /requeue\(\{ delayMs \}\): delayMs must be a finite number of ms ≥ 0, got -5 \(a number\)/],
    ["requeue({ delayMs: 'soon' })", () => requeue({ delayMs: 'soon' as never }), /delayMs must be a finite number.*got 'soon' \(a string\)/],
    ['requeue(5000)', () => requeue(5000 as never), /requeue\(options\) takes \{ delayMs\?, reason\? \}, got 5000 \(a number\)/],
    ['requeue({ delay: 5 })', () => requeue({ delay: 5 } as never), /unknown option "delay"/],
    ['reject(123)', () => reject(123 as never), /reject\(reason\): reason must be a string.*got 123 \(a number\)/],
    ['ack(1n)', () => ack(1n as never), /ack\(result\): result must be JSON.*got a bigint/],
    ['ack(() => 1)', () => ack((() => 1) as never), /ack\(result\): result must be JSON.*got a function/],
  ])('a disposition factory refuses a bad argument at once: %s is dead-lettered as invalid_disposition with what was wrong', async (_name, make, message) => {
    expect(make).toThrow(message);
    const { consumer } = setup(async () => make());
    const d = recordingDelivery({ key: 'bad-arg' });
    const r = await consumer.dispatch(d);
    expect(r).toMatchObject({ action: 'reject', reason: 'invalid_disposition' });
    expect(d.calls[0]).toMatchObject({ op: 'reject', info: { reason: 'invalid_disposition', errorType: 'InvalidDispositionError' } });
    expect((d.calls[0] as { info: { errorMessage: string } }).info.errorMessage).toMatch(message);
  });

  test('a handler that throws undefined is retried as a handler failure (an error object is made for it), not read as a requeue request', async () => {
    const { consumer } = setup(async () => {
      throw undefined;
    });
    const r = await consumer.dispatch(recordingDelivery({ key: 'throw-undefined' }));
    expect(r).toMatchObject({ action: 'requeue', outcome: 'released' });
    expect(r.error).toBeInstanceOf(Error);
    expect((r.error as Error).message).toMatch(/handler threw undefined/);
  });

  test('a store outage with more than 10 deliveries in claim backoff raises no MaxListenersExceededWarning (one shutdown signal, many waits)', () => {
    // A child process: Node reports the warning on the real process, which jest's sandbox hides.
    const run = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, 'fixtures', 'claim-outage-listeners.ts')], { encoding: 'utf8', timeout: 60_000 });
    expect(run.stderr).not.toMatch(/MaxListenersExceededWarning/);
    expect(run.stdout.trim()).toBe('warnings:');
  });

  test('invalid message: an undecodable body is dead-lettered as invalid_body without a claim', async () => {
    const { consumer, claimer } = setup();
    const d = recordingDelivery({ key: 'garbled', raw: Buffer.from('{not json') });
    const r = await consumer.dispatch(d);
    expect(r).toMatchObject({ action: 'reject', reason: 'invalid_body', handled: false });
    expect(d.calls[0]).toMatchObject({ op: 'reject', info: { reason: 'invalid_body', attempts: 0 } });
    expect(claimer.claimCalls).toBe(0);
  });

  test('invalid message: no key is dead-lettered as missing_key, never processed unguarded', async () => {
    const { consumer, claimer } = setup();
    let runs = 0;
    consumer.handler = async () => {
      runs++;
      return ack();
    };
    const d = recordingDelivery({ key: null });
    expect(await consumer.dispatch(d)).toMatchObject({ action: 'reject', reason: 'missing_key' });
    expect(runs).toBe(0);
    expect(claimer.claimCalls).toBe(0);
    // the broker message id is the fallback key
    const withId = recordingDelivery({ key: null, messageId: 'm-1' });
    expect(await consumer.dispatch(withId)).toMatchObject({ action: 'ack', key: 'test:m-1' });
  });

  test('invalid message: a too long or wrongly typed key is dead-lettered as invalid_key', async () => {
    const { consumer } = setup();
    const long = recordingDelivery({ key: 'k'.repeat(600) });
    expect(await consumer.dispatch(long)).toMatchObject({ action: 'reject', reason: 'invalid_key' });
    const typed = recordingDelivery({ headers: { 'idempotency-key': 12345 } });
    expect(await consumer.dispatch(typed)).toMatchObject({ action: 'reject', reason: 'invalid_key' });
    const bufferKey = recordingDelivery({ headers: { 'idempotency-key': Buffer.from('from-kafka') } });
    expect(await consumer.dispatch(bufferKey)).toMatchObject({ action: 'ack', key: 'test:from-kafka' });
  });

  test('a broker settle that fails is reported as ack_failed and does not throw', async () => {
    const { consumer, types } = setup();
    const d = recordingDelivery({ key: 'ack-lost' }, { failWith: new Error('channel closed') });
    const r = await consumer.dispatch(d);
    expect(r.outcome).toBe('committed');
    expect(types()).toEqual(['acquired', 'committed', 'ack_failed']);
    // the redelivery of a committed key is a duplicate
    expect((await consumer.dispatch(recordingDelivery({ key: 'ack-lost' }))).outcome).toBe('done_duplicate');
  });

  test('an observer that throws does not break settlement', async () => {
    const claimer = new InMemoryClaimer();
    const consumer = new FnConsumer(
      {
        ...fastOptions(claimer),
        observers: [
          {
            onEvent: () => {
              throw new Error('observer bug');
            },
            onDelivery: () => ({
              step: async () => {
                throw new Error('wrapper bug');
              },
              end: () => {
                throw new Error('end bug');
              },
            }),
          },
        ],
      },
      async () => ack(),
    );
    const d = recordingDelivery({ key: 'observed' });
    expect(await consumer.dispatch(d)).toMatchObject({ action: 'ack', outcome: 'committed' });
    expect(d.calls).toEqual([{ op: 'ack', duplicate: false }]);
  });

  test('observer step wrappers see every step of an acquired delivery, in order', async () => {
    const steps: string[] = [];
    const ends: string[] = [];
    const consumer = new FnConsumer(
      {
        ...fastOptions(new InMemoryClaimer()),
        observers: [{ onDelivery: () => ({ step: (s, fn) => (steps.push(s), fn()), end: (r) => ends.push(r.outcome) }) }],
      },
      async () => ack(),
    );
    await consumer.dispatch(recordingDelivery({ key: 'steps' }));
    expect(steps).toEqual(['claim', 'handle', 'commit', 'settle']);
    expect(ends).toEqual(['committed']);
  });
});

describe('batch claims (claimBatch + dispatch)', () => {
  test('claims a batch in one claimMany call and dispatches each with its prepared claim', async () => {
    const inner = new InMemoryClaimer();
    let manyCalls = 0;
    let singleCalls = 0;
    const claimer = {
      kind: inner.kind,
      claim: (k: string, o: Parameters<InMemoryClaimer['claim']>[1]) => (singleCalls++, inner.claim(k, o)),
      claimMany: (r: Parameters<InMemoryClaimer['claimMany']>[0]) => (manyCalls++, inner.claimMany(r)),
    };
    const consumer = new FnConsumer(fastOptions(claimer), async () => ack());
    await consumer.dispatch(recordingDelivery({ key: 'b-done' }));
    const batch = [recordingDelivery({ key: 'b-1' }), recordingDelivery({ key: 'b-done' }), recordingDelivery({ key: null }), recordingDelivery({ key: 'b-1' })];
    const prepared = await consumer.claimBatch(batch);
    expect(manyCalls).toBe(1);
    expect(prepared.map((p) => (p.kind === 'claimed' ? p.result.state : p.kind))).toEqual(['acquired', 'done', 'skipped', 'busy']);
    const results = [];
    for (let i = 0; i < batch.length; i++) results.push(await consumer.dispatch(batch[i]!, prepared[i]));
    expect(results.map((r) => r.outcome)).toEqual(['committed', 'done_duplicate', 'rejected', 'busy']);
    expect(results[2]).toMatchObject({ reason: 'missing_key' });
    expect(singleCalls).toBe(1); // only the first, unbatched dispatch
  });

  test('a prepared lease of a delivery that cannot be handled is released, not leaked', async () => {
    const claimer = new InMemoryClaimer();
    const consumer = new FnConsumer(fastOptions(claimer), async () => ack());
    const garbled = recordingDelivery({ key: 'b-garbled', raw: Buffer.from('{oops') });
    const [prepared] = await consumer.claimBatch([garbled]);
    expect(prepared).toMatchObject({ kind: 'claimed', result: { state: 'acquired' } });
    expect(await consumer.dispatch(garbled, prepared)).toMatchObject({ action: 'reject', reason: 'invalid_body' });
    expect((await claimer.claim('test:b-garbled', { leaseTtlMs: 1000, doneTtlMs: 60_000 })).state).toBe('acquired');
  });

  test('a prepared lease given back because the consumer is stopping did not run: its attempt does not count', async () => {
    const claimer = new InMemoryClaimer();
    const consumer = new FnConsumer(fastOptions(claimer), async () => ack());
    const delivery = recordingDelivery({ key: 'b-stopping' });
    const [prepared] = await consumer.claimBatch([delivery]);
    expect(prepared).toMatchObject({ kind: 'claimed', result: { state: 'acquired', attempt: 1 } });
    await consumer.stop();
    expect(await consumer.dispatch(delivery, prepared)).toMatchObject({ action: 'requeue', reason: 'shutdown', handled: false });
    expect(await claimer.claim('test:b-stopping', { leaseTtlMs: 1000, doneTtlMs: 60_000 })).toMatchObject({ state: 'acquired', attempt: 1 });
  });
});

describe('failure paths found by a new user', () => {
  test('a dead-letter that the broker refuses keeps the attempt count: the redelivery is dead-lettered again without running the handler', async () => {
    const claimer = new InMemoryClaimer();
    let runs = 0;
    const consumer = new FnConsumer({ ...fastOptions(claimer), maxAttempts: 2 }, async () => {
      runs++;
      throw new Error('still broken');
    });
    await consumer.dispatch(recordingDelivery({ key: 'dlq-down' })); // attempt 1: requeue
    const refused = recordingDelivery({ key: 'dlq-down' }, { failWith: new Error('DLQ unroutable') });
    expect(await consumer.dispatch(refused)).toMatchObject({ action: 'reject', reason: 'retry_exhausted' }); // attempt 2: the DLQ publish fails
    const again = recordingDelivery({ key: 'dlq-down' });
    expect(await consumer.dispatch(again)).toMatchObject({ action: 'reject', reason: 'retry_exhausted', handled: false });
    expect(runs).toBe(2);
    // this time the dead-letter landed: the count is reset for a replay
    expect(await claimer.claim('test:dlq-down', { leaseTtlMs: 1000, doneTtlMs: 60_000 })).toMatchObject({ state: 'acquired', attempt: 1 });
  });

  test('a result that is not JSON (a BigInt) is logged and the key is still committed, so no duplicate effect follows', async () => {
    const claimer = new InMemoryClaimer();
    let runs = 0;
    const consumer = new FnConsumer(fastOptions(claimer), async () => {
      runs++;
      return ack({ big: 1n } as never);
    });
    expect(await consumer.dispatch(recordingDelivery({ key: 'bigint' }))).toMatchObject({ outcome: 'committed' });
    expect(await consumer.dispatch(recordingDelivery({ key: 'bigint' }))).toMatchObject({ outcome: 'done_duplicate' });
    expect(runs).toBe(1);
  });

  test('handlerTimeoutMs frees a handler that ignores its signal: release and requeue, the lease is no longer kept', async () => {
    const clock = new ManualClock();
    const claimer = new InMemoryClaimer({ clock });
    let started = false;
    const consumer = new FnConsumer({ ...fastOptions(claimer), clock, leaseTtlMs: 300, handlerTimeoutMs: 50 }, () => {
      started = true;
      return new Promise(() => undefined);
    });
    const running = consumer.dispatch(recordingDelivery({ key: 'stuck' }));
    await waitFor(() => started);
    await clock.advance(50);
    const r = await running;
    expect(r).toMatchObject({ action: 'requeue', reason: 'retry' });
    expect((r.error as Error).name).toBe('TimeoutError');
    expect((await claimer.claim('test:stuck', { leaseTtlMs: 300, doneTtlMs: 60_000 })).state).toBe('acquired');
    expect(consumer.health().inFlight).toBe(0);
  });

  test('stop() finishes after the shutdown deadline even when a handler never resolves', async () => {
    const { ManualSource } = await import('./helpers');
    const source = new ManualSource();
    const clock = new ManualClock();
    let started = false;
    const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer({ clock })), clock, source, shutdownTimeoutMs: 50 }, () => {
      started = true;
      return new Promise(() => undefined);
    });
    await consumer.start();
    const d = recordingDelivery({ key: 'never' });
    const run = consumer.dispatch(d);
    await waitFor(() => started);
    let stopped = false;
    const stopping = consumer.stop().then(() => (stopped = true));
    while (!stopped) await clock.advance(10); // the deadline is 50 ms of the consumer's clock
    await stopping;
    expect(await run).toMatchObject({ action: 'requeue', reason: 'shutdown' });
    expect(source.closed).toBe(true);
  });

  test('shutdowns never use up maxAttempts: stopped in its handler three times with maxAttempts 2, the message runs a fourth time as attempt 1 and is acked', async () => {
    const { ManualSource } = await import('./helpers');
    const claimer = new InMemoryClaimer();
    const results: unknown[] = [];
    for (let round = 0; round < 3; round++) {
      let started = false;
      const consumer = new FnConsumer({ ...fastOptions(claimer), source: new ManualSource(), maxAttempts: 2, shutdownTimeoutMs: 20 }, () => {
        started = true;
        return new Promise(() => undefined); // a slow handler a deploy interrupts
      });
      await consumer.start();
      const run = consumer.dispatch(recordingDelivery({ key: 'deploy' }));
      await waitFor(() => started);
      await consumer.stop();
      results.push(await run);
    }
    for (const result of results) expect(result).toMatchObject({ action: 'requeue', reason: 'shutdown', attempt: 1 });
    const last = new FnConsumer({ ...fastOptions(claimer), source: new ManualSource(), maxAttempts: 2 }, async () => ack());
    await last.start();
    expect(await last.dispatch(recordingDelivery({ key: 'deploy' }))).toMatchObject({ action: 'ack', outcome: 'committed', attempt: 1 });
    await last.stop();
  });

  test('options that are not what they claim fail at construction: a null logger, observers that are not an array, a zero busy delay', () => {
    const claimer = new InMemoryClaimer();
    expect(() => new FnConsumer({ ...fastOptions(claimer), logger: null as never }, async () => ack())).toThrow(/logger must be a pino-compatible logger/);
    expect(() => new FnConsumer({ ...fastOptions(claimer), observers: 'x' as never }, async () => ack())).toThrow(/observers must be an array/);
    expect(() => new FnConsumer({ ...fastOptions(claimer), busyRequeueDelayMs: 0 }, async () => ack())).toThrow(/busyRequeueDelayMs must be an integer in \[10,/);
    expect(() => new FnConsumer({ ...fastOptions(claimer), leaseTtlMs: '5000' as never }, async () => ack())).toThrow(/got '5000' \(a string\)/);
    expect(() => new FnConsumer({ ...fastOptions(claimer), maxBodyBytes: 0 }, async () => ack())).toThrow(/maxBodyBytes must be an integer in \[1, 2147483647\]/);
    expect(() => new FnConsumer({ ...fastOptions(claimer), maxBodyBytes: 1.5 }, async () => ack())).toThrow(/maxBodyBytes must be an integer/);
  });
});
