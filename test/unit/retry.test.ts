/**
 * The one retry loop (src/util/retry.ts): bounds by count and deadline, which errors it retries,
 * polls on a pending value, the abort of a pause, and retryAfter's first failure.
 */
import { ClaimerUnavailableError, ConfigurationError, ShutdownError } from '../../src';
import { retry, retryAfter, retryWithin, sleep } from '../../src/adapter-kit';

const noPause = () => 0;

function failing(times: number, error: () => Error = () => new ClaimerUnavailableError('down')) {
  const calls: number[] = [];
  const fn = async (attempt: number) => {
    calls.push(attempt);
    if (calls.length <= times) throw error();
    return `ok after ${calls.length}`;
  };
  return { fn, calls };
}

describe('retry', () => {
  test('retries retriable errors, numbering the calls, and resolves with the first value', async () => {
    const { fn, calls } = failing(2);
    await expect(retry(fn, { backoff: noPause })).resolves.toBe('ok after 3');
    expect(calls).toEqual([1, 2, 3]);
  });

  test('never retries a programmer error by default', async () => {
    const { fn, calls } = failing(5, () => new ConfigurationError('bad'));
    await expect(retry(fn, { backoff: noPause })).rejects.toBeInstanceOf(ConfigurationError);
    expect(calls).toEqual([1]);
  });

  test('retries: at most that many calls after the first, then the last error', async () => {
    const { fn, calls } = failing(10);
    await expect(retry(fn, { backoff: noPause, retries: 2 })).rejects.toBeInstanceOf(ClaimerUnavailableError);
    expect(calls).toEqual([1, 2, 3]);
    const none = failing(10);
    await expect(retry(none.fn, { backoff: noPause, retries: 0 })).rejects.toBeInstanceOf(ClaimerUnavailableError);
    expect(none.calls).toEqual([1]);
  });

  test('deadlineMs: no retry starts whose pause would end past the deadline', async () => {
    let t = 0;
    const { fn, calls } = failing(10);
    const pauses: number[] = [];
    const result = retry(
      async (n) => {
        t += 40; // each call takes 40 ms on the injected clock
        return fn(n);
      },
      { backoff: (n) => n * 10, deadlineMs: 150, now: () => t, onRetry: (_n, delayMs) => void pauses.push(delayMs) },
    );
    await expect(result).rejects.toBeInstanceOf(ClaimerUnavailableError);
    // The injected clock counts the calls only: 40+10, 80+20, 120+30 = 150 (not past it), 160+40 past it.
    expect(calls).toEqual([1, 2, 3, 4]);
    expect(pauses).toEqual([10, 20, 30]);
  });

  test('pending: a value that is not final is polled again, and returned as it is once the bound is spent', async () => {
    const values = ['busy', 'busy', 'done'];
    const seen: unknown[] = [];
    const poll = () => Promise.resolve(values.shift() ?? 'busy');
    await expect(retry(poll, { backoff: noPause, pending: (v) => v === 'busy', onRetry: (_n, _d, failure) => void seen.push(failure) })).resolves.toBe('done');
    expect(seen).toEqual([{ value: 'busy' }, { value: 'busy' }]);
    await expect(retry(() => Promise.resolve('busy'), { backoff: noPause, retries: 3, pending: (v) => v === 'busy' })).resolves.toBe('busy');
  });

  test('retryIf chooses the retried errors', async () => {
    const { fn, calls } = failing(2, () => new ConfigurationError('retried here'));
    await expect(retry(fn, { backoff: noPause, retryIf: (e) => e instanceof ConfigurationError })).resolves.toBe('ok after 3');
    expect(calls).toHaveLength(3);
  });

  test('an aborted pause rejects with the signal reason (ShutdownError without one) and calls no more', async () => {
    const { fn, calls } = failing(10);
    const controller = new AbortController();
    const pending = retry(fn, { backoff: () => 60_000, signal: controller.signal });
    await new Promise((resolve) => setImmediate(resolve));
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(ShutdownError);
    expect(calls).toEqual([1]);
  });

  test('retryAfter starts from a failure the caller already had: the next call is number 2', async () => {
    const { fn, calls } = failing(0);
    await expect(retryAfter(new ClaimerUnavailableError('first'), fn, { backoff: noPause, retries: 1 })).resolves.toBe('ok after 1');
    expect(calls).toEqual([2]);
    await expect(retryAfter(new ConfigurationError('final'), fn, { backoff: noPause })).rejects.toBeInstanceOf(ConfigurationError);
    expect(calls).toEqual([2]);
  });

  test('retryWithin is the retry with a deadline', async () => {
    const { fn, calls } = failing(1);
    await expect(retryWithin(() => fn(0), { deadlineMs: 1000, backoff: { initialDelayMs: 1, maxDelayMs: 1, multiplier: 1, jitter: 0 } })).resolves.toBe('ok after 2');
    expect(calls).toHaveLength(2);
  });
});

/**
 * The timers of `ms` that `run` creates, each checked as the test asks: `hasRef()` says whether it
 * keeps the process alive. Other timers of the process (which may start or end meanwhile) are not
 * counted.
 */
function timersOf(ms: number): { readonly made: NodeJS.Timeout[]; restore(): void } {
  const made: NodeJS.Timeout[] = [];
  const original = global.setTimeout;
  const spy = jest.spyOn(global, 'setTimeout').mockImplementation(((fn: () => void, delay?: number, ...args: unknown[]) => {
    const timer = (original as (...a: unknown[]) => NodeJS.Timeout)(fn, delay, ...args);
    if (delay === ms) made.push(timer);
    return timer;
  }) as typeof setTimeout);
  return { made, restore: () => spy.mockRestore() };
}

describe('pauses and the process lifetime', () => {
  test('a pending sleep does not keep the process alive; keepProcessAlive does', async () => {
    const controller = new AbortController();
    const timers = timersOf(60_000);
    try {
      const quiet = sleep(60_000, controller.signal).catch(() => undefined);
      const held = sleep(60_000, controller.signal, { keepProcessAlive: true }).catch(() => undefined);
      expect(timers.made.map((t) => t.hasRef())).toEqual([false, true]);
      controller.abort();
      await Promise.all([quiet, held]);
    } finally {
      timers.restore();
    }
  });

  test("a retry's pending pause does not keep the process alive (a store still down after shutdown)", async () => {
    const controller = new AbortController();
    const timers = timersOf(60_000);
    try {
      const { fn } = failing(10);
      const pending = retry(fn, { backoff: () => 60_000, signal: controller.signal });
      await new Promise((resolve) => setImmediate(resolve));
      expect(timers.made.map((t) => t.hasRef())).toEqual([false]);
      controller.abort();
      await expect(pending).rejects.toBeInstanceOf(ShutdownError);
    } finally {
      timers.restore();
    }
  });
});
