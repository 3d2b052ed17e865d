/**
 * Backoff, abortable sleeps and bounded retries. Programmer errors are never retried: only
 * errors flagged retriable (see {@link isRetriable}).
 */
import { isRetriable, ShutdownError, TimeoutError } from './errors';

/** Capped exponential backoff with jitter. All durations in milliseconds. */
export interface BackoffPolicy {
  /** Delay before the first retry, ms. */
  readonly initialDelayMs: number;
  /** Upper bound of any delay, ms. */
  readonly maxDelayMs: number;
  /** Growth factor per attempt (≥ 1). */
  readonly multiplier: number;
  /** Share of the delay randomised, 0..1 (0.2 → ±20 %). */
  readonly jitter: number;
}

/** Delay before retry number `retry` (1-based), in ms. */
export function backoffDelay(policy: BackoffPolicy, retry: number, random: () => number = Math.random): number {
  const base = Math.min(policy.maxDelayMs, policy.initialDelayMs * policy.multiplier ** Math.max(0, retry - 1));
  const spread = base * policy.jitter;
  return Math.max(0, Math.round(base - spread + random() * 2 * spread));
}

/**
 * Resolves after `ms` milliseconds; rejects with the signal's reason (or a ShutdownError) as soon
 * as `signal` aborts. The timer never keeps the process alive on its own.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortReason(signal!));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Rejects with {@link TimeoutError} when `promise` has not settled within `ms` milliseconds. The
 * timer is unref'd: a deadline alone never keeps the process alive.
 */
export function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`${what} did not finish within ${ms} ms`)), ms);
    // A deadline alone never keeps the process alive: what it waits on does, if anything.
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Calls `fn` until it resolves, retrying retriable errors with backoff, until `deadlineMs` has
 * passed since the first call. The last error is rethrown. Non-retriable errors are thrown at once.
 */
export async function retryWithin<T>(
  fn: () => Promise<T>,
  options: { deadlineMs: number; backoff: BackoffPolicy; signal?: AbortSignal; now?: () => number },
): Promise<T> {
  const now = options.now ?? Date.now;
  const start = now();
  for (let retry = 1; ; retry++) {
    try {
      return await fn();
    } catch (error) {
      if (!isRetriable(error)) throw error;
      const delay = backoffDelay(options.backoff, retry);
      if (now() - start + delay > options.deadlineMs) throw error;
      await sleep(delay, options.signal);
    }
  }
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new ShutdownError();
}
