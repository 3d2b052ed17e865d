/**
 * runOnce on the in-memory claimer (a settable clock where a lease must expire): first run,
 * replay, in-progress, waiting, fingerprint conflict, scopes, the failure policies, a crashed run,
 * the result bound, keep-alive and option checks.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import fc from 'fast-check';
import {
  ConfigurationError,
  InMemoryClaimer,
  InProgressError,
  InvalidKeyError,
  isRetriable,
  KeyConflictError,
  PreviousAttemptFailedError,
  ResultTooLargeError,
  runOnce,
  UnstorableResultError,
  runOnceKey,
  type RunOnceOptions,
  silentLogger,
} from '../../src';

class SettableClock {
  t = 0;
  now = (): number => this.t;
}

function base(claimer: InMemoryClaimer, key = 'k-1'): RunOnceOptions {
  return { claimer, scope: { operation: 'POST /payments', tenant: 't1', actor: 'alice' }, key, leaseTtlMs: 1000, doneTtlMs: 60_000 };
}

/** A function gated by a promise the test resolves, counting its runs. */
function gated<T>(value: T) {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let entered!: () => void;
  const started = new Promise<void>((resolve) => (entered = resolve));
  const calls = { count: 0 };
  const fn = async () => {
    calls.count++;
    entered();
    await gate;
    return value;
  };
  return { fn, open, started, calls };
}

describe('runOnce', () => {
  test('the first call runs fn and returns its result; a repeat replays the stored result without running fn', async () => {
    const claimer = new InMemoryClaimer();
    let runs = 0;
    const fn = () => {
      runs++;
      return { paymentId: 'p-1', amount: 42 };
    };
    const first = await runOnce(base(claimer), fn);
    const second = await runOnce(base(claimer), fn);
    expect(first).toMatchObject({ status: 'ran', result: { paymentId: 'p-1', amount: 42 }, attempt: 1, committed: true });
    expect(second).toEqual({ status: 'replayed', result: { paymentId: 'p-1', amount: 42 }, key: first.key });
    expect(runs).toBe(1);
  });

  test('the first result is the JSON round trip of what fn returned, so it equals every replay', async () => {
    const claimer = new InMemoryClaimer();
    const value = { at: new Date(0), dropped: undefined, list: [1, undefined] } as never;
    const first = await runOnce(base(claimer), () => value);
    const replay = await runOnce(base(claimer), () => value);
    expect(first.result).toEqual({ at: '1970-01-01T00:00:00.000Z', list: [1, null] });
    expect(replay.result).toEqual(first.result);
  });

  test('a concurrent repeat gets InProgressError (retriable, code IN_PROGRESS) at once; fn runs once', async () => {
    const claimer = new InMemoryClaimer();
    const g = gated({ ok: true });
    const first = runOnce(base(claimer), g.fn);
    await g.started;
    const repeat = runOnce(base(claimer), g.fn);
    const error = (await repeat.catch((e: unknown) => e)) as InProgressError;
    expect(error).toBeInstanceOf(InProgressError);
    expect(error.code).toBe('IN_PROGRESS');
    expect(isRetriable(error)).toBe(true);
    expect(error.waitedMs).toBe(0);
    g.open();
    await expect(first).resolves.toMatchObject({ status: 'ran' });
    expect(g.calls.count).toBe(1);
  });

  test('with waitMs, a concurrent repeat waits for the first run and replays its result', async () => {
    const claimer = new InMemoryClaimer();
    const g = gated({ receipt: 'r-9' });
    const first = runOnce(base(claimer), g.fn);
    await g.started;
    const repeat = runOnce({ ...base(claimer), waitMs: 5000 }, g.fn);
    setTimeout(g.open, 120);
    await expect(repeat).resolves.toMatchObject({ status: 'replayed', result: { receipt: 'r-9' } });
    await first;
    expect(g.calls.count).toBe(1);
  });

  test('with waitMs 0 the InProgressError says it did not wait, however long the claim itself took', async () => {
    const inner = new InMemoryClaimer();
    const slow = Object.assign(Object.create(inner) as InMemoryClaimer, {
      claim: async (key: string, options: Parameters<InMemoryClaimer['claim']>[1]) => {
        await new Promise((r) => setTimeout(r, 60));
        return inner.claim(key, options);
      },
    });
    const g = gated({ ok: true });
    const first = runOnce(base(slow), g.fn);
    await g.started;
    const error = (await runOnce({ ...base(slow), waitMs: 0 }, g.fn).catch((e: unknown) => e)) as InProgressError;
    expect(error).toBeInstanceOf(InProgressError);
    expect(error.waitedMs).toBe(0);
    expect(error.message).not.toMatch(/waited/);
    g.open();
    await first;
  });

  test('a wait shorter than the other run ends in InProgressError naming how long it waited', async () => {
    const claimer = new InMemoryClaimer();
    const g = gated(null);
    const first = runOnce(base(claimer), g.fn);
    await g.started;
    const error = await runOnce({ ...base(claimer), waitMs: 200 }, g.fn).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InProgressError);
    expect((error as InProgressError).waitedMs).toBeGreaterThan(0);
    g.open();
    await first;
  });

  test('the same key with another fingerprint rejects with KeyConflictError, fn not run', async () => {
    const claimer = new InMemoryClaimer();
    await runOnce({ ...base(claimer), fingerprint: 'sha-a' }, () => 1);
    let ran = false;
    await expect(
      runOnce({ ...base(claimer), fingerprint: 'sha-b' }, () => {
        ran = true;
        return 2;
      }),
    ).rejects.toBeInstanceOf(KeyConflictError);
    expect(ran).toBe(false);
    await expect(runOnce({ ...base(claimer), fingerprint: 'sha-a' }, () => 3)).resolves.toMatchObject({ status: 'replayed', result: 1 });
  });

  test('scopes never collide: the same caller key under another operation, tenant or actor runs again', async () => {
    const claimer = new InMemoryClaimer();
    const scopes = [
      { operation: 'POST /payments' },
      { operation: 'POST /refunds' },
      { operation: 'POST /payments', tenant: 't1' },
      { operation: 'POST /payments', actor: 't1' },
      { operation: 'POST /payments', tenant: 't1', actor: 'alice' },
      { operation: 'POST /payments', tenant: 't2', actor: 'alice' },
      { operation: 'POST /payments:t1' },
    ];
    const runs: number[] = [];
    for (const [i, scope] of scopes.entries()) {
      // silentLogger: the unscoped HTTP-style operation logs its one warning (tested in the runOnce conformance suite).
      const out = await runOnce({ ...base(claimer), scope, logger: silentLogger }, () => {
        runs.push(i);
        return i;
      });
      expect(out).toMatchObject({ status: 'ran', result: i });
    }
    expect(runs).toEqual(scopes.map((_, i) => i));
  });

  test('runOnceKey is one-to-one over (operation, tenant, actor, key), whatever the parts contain', () => {
    const text = fc.string({ unit: fc.constantFrom('a', ':', '\\', 'b'), minLength: 1, maxLength: 6 });
    const entry = fc.record({ operation: text, tenant: fc.option(text, { nil: undefined }), actor: fc.option(text, { nil: undefined }), key: text });
    fc.assert(
      fc.property(entry, entry, (a, b) => {
        const same = a.operation === b.operation && a.tenant === b.tenant && a.actor === b.actor && a.key === b.key;
        const scope = (e: typeof a) => ({ operation: e.operation, ...(e.tenant === undefined ? {} : { tenant: e.tenant }), ...(e.actor === undefined ? {} : { actor: e.actor }) });
        return (runOnceKey(scope(a), a.key) === runOnceKey(scope(b), b.key)) === same;
      }),
      { numRuns: 2000 },
    );
  });

  test("a failure under onFailure 'record' (default) blocks the key until a call passes retry: true", async () => {
    const claimer = new InMemoryClaimer();
    const boom = new Error('provider timed out');
    await expect(
      runOnce(base(claimer), () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    let runs = 0;
    const fn = () => {
      runs++;
      return 'paid';
    };
    const blocked = await runOnce(base(claimer), fn).catch((e: unknown) => e);
    expect(blocked).toBeInstanceOf(PreviousAttemptFailedError);
    expect((blocked as PreviousAttemptFailedError).code).toBe('PREVIOUS_ATTEMPT_FAILED');
    expect(isRetriable(blocked)).toBe(false);
    await expect(runOnce(base(claimer), fn)).rejects.toBeInstanceOf(PreviousAttemptFailedError);
    expect(runs).toBe(0);
    const retried = await runOnce({ ...base(claimer), retry: true }, fn);
    expect(retried).toMatchObject({ status: 'ran', result: 'paid' });
    expect(retried.status === 'ran' && retried.attempt).toBeGreaterThan(1);
    await expect(runOnce(base(claimer), fn)).resolves.toMatchObject({ status: 'replayed', result: 'paid' });
    expect(runs).toBe(1);
  });

  test("a failure under onFailure 'release' frees the key: the next call runs fn as attempt 1", async () => {
    const claimer = new InMemoryClaimer();
    await expect(
      runOnce({ ...base(claimer), onFailure: 'release' }, () => {
        throw new Error('validation failed before any write');
      }),
    ).rejects.toThrow('validation failed');
    await expect(runOnce(base(claimer), () => 'ok')).resolves.toMatchObject({ status: 'ran', result: 'ok', attempt: 1 });
  });

  test('onFailure as a function picks the policy per error; an answer that is not a policy means record', async () => {
    const claimer = new InMemoryClaimer();
    class Invalid extends Error {}
    const policy = (error: unknown) => (error instanceof Invalid ? 'release' : 'record');
    await expect(runOnce({ ...base(claimer, 'a'), onFailure: policy }, () => Promise.reject(new Invalid('bad amount')))).rejects.toBeInstanceOf(Invalid);
    await expect(runOnce(base(claimer, 'a'), () => 1)).resolves.toMatchObject({ status: 'ran' });
    await expect(runOnce({ ...base(claimer, 'b'), onFailure: policy }, () => Promise.reject(new Error('lost')))).rejects.toThrow('lost');
    await expect(runOnce(base(claimer, 'b'), () => 1)).rejects.toBeInstanceOf(PreviousAttemptFailedError);
    await expect(runOnce({ ...base(claimer, 'c'), onFailure: () => 'nonsense' as never }, () => Promise.reject(new Error('x')))).rejects.toThrow('x');
    await expect(runOnce(base(claimer, 'c'), () => 1)).rejects.toBeInstanceOf(PreviousAttemptFailedError);
  });

  test('a run that never settled (its process crashed) blocks the key once its lease expired, until retry: true', async () => {
    const clock = new SettableClock();
    const claimer = new InMemoryClaimer({ clock });
    const options = base(claimer);
    // The crashed process: it claimed the key and never committed or released.
    const crashed = await claimer.claim(runOnceKey(options.scope, options.key), { leaseTtlMs: options.leaseTtlMs, doneTtlMs: options.doneTtlMs });
    expect(crashed.state).toBe('acquired');
    await expect(runOnce(options, () => 1)).rejects.toBeInstanceOf(InProgressError);
    clock.t += options.leaseTtlMs + 1;
    await expect(runOnce(options, () => 1)).rejects.toBeInstanceOf(PreviousAttemptFailedError);
    await expect(runOnce({ ...options, retry: true }, () => 1)).resolves.toMatchObject({ status: 'ran', result: 1 });
  });

  test('a result larger than maxResultBytes is a failure: ResultTooLargeError, the key recorded as failed', async () => {
    const claimer = new InMemoryClaimer();
    await expect(runOnce({ ...base(claimer), maxResultBytes: 10 }, () => 'x'.repeat(20))).rejects.toBeInstanceOf(ResultTooLargeError);
    await expect(runOnce(base(claimer), () => 'small')).rejects.toBeInstanceOf(PreviousAttemptFailedError);
  });

  test('a result JSON cannot store (a BigInt, a cycle) fails with UnstorableResultError naming where and why, not ConfigurationError', async () => {
    const claimer = new InMemoryClaimer();
    const big = runOnce(base(claimer, 'big-1'), () => ({ amount: 10n }) as never);
    await expect(big).rejects.toBeInstanceOf(UnstorableResultError);
    await expect(big).rejects.not.toBeInstanceOf(ConfigurationError);
    await expect(big).rejects.toThrow(/result\.amount is a bigint/);
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    await expect(runOnce(base(claimer, 'cyc-1'), () => cyclic as never)).rejects.toThrow(/result\.self refers back to result/);
    // A function value, silently dropped by JSON, would replay as a different result: refused too.
    await expect(runOnce(base(claimer, 'fn-1'), () => ({ cb: () => 1 }) as never)).rejects.toThrow(/result\.cb is a function/);
    // The key is handled per onFailure (record): the function ran.
    await expect(runOnce(base(claimer, 'big-1'), () => 1)).rejects.toBeInstanceOf(PreviousAttemptFailedError);
  });

  test("the claimer's own smaller result bound applies too", async () => {
    const claimer = new InMemoryClaimer({ maxResultBytes: 8 });
    await expect(runOnce({ ...base(claimer), onFailure: 'release' }, () => 'x'.repeat(20))).rejects.toBeInstanceOf(ResultTooLargeError);
    await expect(runOnce(base(claimer), () => 'ok')).resolves.toMatchObject({ status: 'ran', attempt: 1 });
  });

  test('keep-alive extends the lease while fn runs past leaseTtlMs: a repeat meanwhile is still in progress', async () => {
    const claimer = new InMemoryClaimer();
    const options = { ...base(claimer), leaseTtlMs: 300, doneTtlMs: 10_000 };
    const g = gated('slow');
    const first = runOnce(options, g.fn);
    await g.started;
    const until = Date.now() + 1000; // more than three leases
    let repeats = 0;
    while (Date.now() < until) {
      await expect(runOnce(options, () => 'duplicate')).rejects.toBeInstanceOf(InProgressError);
      repeats++;
      await new Promise((r) => setTimeout(r, 40));
    }
    g.open();
    await expect(first).resolves.toMatchObject({ status: 'ran', result: 'slow', committed: true });
    expect(repeats).toBeGreaterThan(3);
    expect(g.calls.count).toBe(1);
  });

  test('fn gets the key, attempt, fencing token and a signal; no transaction with the in-memory claimer', async () => {
    const claimer = new InMemoryClaimer();
    const seen = await runOnce(base(claimer), (ctx) => ({ key: ctx.key, attempt: ctx.attempt, fencing: ctx.fencingToken > 0, aborted: ctx.signal.aborted, tx: ctx.transaction === undefined }));
    expect(seen.result).toEqual({ key: 'run-once:POST /payments:t1:alice:k-1', attempt: 1, fencing: true, aborted: false, tx: true });
  });

  test('options are checked: unknown names, TTLs, scope, key, policy', async () => {
    const claimer = new InMemoryClaimer();
    const fn = () => 1;
    await expect(runOnce({ ...base(claimer), waitMS: 10 } as never, fn)).rejects.toThrow(/unknown option "waitMS" \(did you mean "waitMs"\?\)/);
    await expect(runOnce({ ...base(claimer), doneTtlMs: 500 }, fn)).rejects.toThrow(ConfigurationError);
    await expect(runOnce({ ...base(claimer), leaseTtlMs: 10 }, fn)).rejects.toThrow(/leaseTtlMs/);
    await expect(runOnce({ ...base(claimer), scope: { operation: '' } }, fn)).rejects.toThrow(/scope.operation/);
    await expect(runOnce({ ...base(claimer), scope: { operation: 'x', tenat: 't' } as never }, fn)).rejects.toThrow(/did you mean "tenant"/);
    await expect(runOnce({ ...base(claimer), key: '' }, fn)).rejects.toBeInstanceOf(InvalidKeyError);
    await expect(runOnce({ ...base(claimer), key: 'k'.repeat(600) }, fn)).rejects.toBeInstanceOf(InvalidKeyError);
    await expect(runOnce({ ...base(claimer), onFailure: 'ignore' as never }, fn)).rejects.toThrow(/onFailure/);
    await expect(runOnce({ ...base(claimer), retry: 'yes' as never }, fn)).rejects.toThrow(/retry must be a boolean/);
    await expect(runOnce(base(claimer), undefined as never)).rejects.toThrow(/second argument/);
  });
});

describe('runOnce in a script with nothing else running', () => {
  test('a release that waits out a store outage keeps the process alive: the call rejects with the function\'s error after the retried release (it used to exit 0 mid-retry, the error unseen)', () => {
    // A child process: whether Node exits with a pending timer is only seen on a real process.
    const run = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, 'fixtures', 'run-once-release-outage.ts')], { encoding: 'utf8', timeout: 60_000 });
    expect(run.stdout.trim()).toBe('rejected: the job failed; releases tried: 3');
    expect(run.status).toBe(1);
  });
});
