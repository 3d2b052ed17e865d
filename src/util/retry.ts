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

/** How {@link sleep} holds the process. */
export interface SleepOptions {
  /**
   * True: the timer keeps the process alive until it fires (Node's `timer.ref()`), for a caller
   * whose own caller awaits the answer and may have nothing else running (`runOnce` polling a busy
   * key, a script's main loop). Default false: the timer is unref'd, so a pause alone never keeps
   * a process alive after everything else (connections, servers) has closed.
   */
  readonly keepProcessAlive?: boolean;
}

/**
 * Resolves after `ms` milliseconds; rejects with the signal's reason (or a ShutdownError) as soon
 * as `signal` aborts. The timer is unref'd unless `options.keepProcessAlive` is true: a pending
 * pause never keeps the process alive on its own (the promise then simply never settles when the
 * process exits first).
 */
export function sleep(ms: number, signal?: AbortSignal, options?: SleepOptions): Promise<void> {
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
    if (options?.keepProcessAlive !== true) timer.unref();
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

/** When and how often {@link retry} calls again. All durations in milliseconds. */
export interface RetryOptions<T> {
  /** The pause before retry `n` (1-based): a backoff policy, or a function of `n`, ms. */
  readonly backoff: BackoffPolicy | ((retry: number) => number);
  /** Most retries after the first call (≥ 0). Default: no bound. */
  readonly retries?: number;
  /**
   * No retry starts whose pause would end more than `deadlineMs` ms after the first call
   * (after `startedAt` when given). Default: no deadline.
   */
  readonly deadlineMs?: number;
  /** When the first call started, on the `now` clock. Default: when `retry` was called. */
  readonly startedAt?: number;
  /** The clock of `deadlineMs` and `startedAt`, ms. Default `Date.now`. */
  readonly now?: () => number;
  /** Aborts a pause: the retry then rejects with the signal's reason (or a ShutdownError). */
  readonly signal?: AbortSignal;
  /**
   * True: the pauses keep the process alive (see {@link SleepOptions.keepProcessAlive}). Default
   * false: a pending pause alone never keeps a process alive after shutdown.
   */
  readonly keepProcessAlive?: boolean;
  /** Which errors are retried. Default {@link isRetriable}: programmer errors never are. */
  readonly retryIf?: (error: unknown) => boolean;
  /**
   * For polls: true when a resolved value is not final yet (a key still busy). Such a value is
   * retried like an error and, once retries or the deadline are spent, returned. Default: none.
   */
  readonly pending?: (value: T) => boolean;
  /** Called before each pause with the retry number, the pause and the failure (error or value). */
  readonly onRetry?: (retry: number, delayMs: number, failure: { readonly error: unknown } | { readonly value: T }) => void;
}

type Outcome<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown };

async function attempt<T>(fn: (attempt: number) => Promise<T>, n: number): Promise<Outcome<T>> {
  try {
    return { ok: true, value: await fn(n) };
  } catch (error) {
    return { ok: false, error };
  }
}

/**
 * The one retry loop: calls `fn(1)`, and while the outcome is a retried error (or a pending
 * value) and neither `retries` nor `deadlineMs` is spent, pauses (backoff) and calls `fn(n)`
 * again. Resolves with the first final value; rejects with the first error that is not retried,
 * or the last one once retries are spent.
 * @throws the signal's reason (or ShutdownError) when `signal` aborts a pause
 */
export async function retry<T>(fn: (attempt: number) => Promise<T>, options: RetryOptions<T>): Promise<T> {
  const startedAt = options.startedAt ?? (options.now ?? Date.now)();
  return retryFrom(await attempt(fn, 1), fn, { ...options, startedAt });
}

/**
 * {@link retry} when the first call already failed with `error` (a caller that keeps its first
 * call on a fast path of its own): `fn` is called with 2, 3, ….
 */
export function retryAfter<T>(error: unknown, fn: (attempt: number) => Promise<T>, options: RetryOptions<T>): Promise<T> {
  return retryFrom({ ok: false, error }, fn, options);
}

async function retryFrom<T>(outcome: Outcome<T>, fn: (attempt: number) => Promise<T>, options: RetryOptions<T>): Promise<T> {
  const now = options.now ?? Date.now;
  const startedAt = options.startedAt ?? now();
  const retryIf = options.retryIf ?? isRetriable;
  for (let n = 1; ; n++) {
    const again = outcome.ok ? options.pending?.(outcome.value) === true : retryIf(outcome.error);
    if (!again || (options.retries !== undefined && n > options.retries)) return settle(outcome);
    const delayMs = typeof options.backoff === 'function' ? options.backoff(n) : backoffDelay(options.backoff, n);
    if (options.deadlineMs !== undefined && now() - startedAt + delayMs > options.deadlineMs) return settle(outcome);
    options.onRetry?.(n, delayMs, outcome.ok ? { value: outcome.value } : { error: outcome.error });
    await sleep(delayMs, options.signal, { keepProcessAlive: options.keepProcessAlive });
    outcome = await attempt(fn, n + 1);
  }
}

function settle<T>(outcome: Outcome<T>): T {
  if (outcome.ok) return outcome.value;
  throw outcome.error;
}

/**
 * Calls `fn` until it resolves, retrying retriable errors with backoff, until `deadlineMs` has
 * passed since the first call. The last error is rethrown. Non-retriable errors are thrown at once.
 * (A {@link retry} with a deadline.)
 */
export function retryWithin<T>(
  fn: () => Promise<T>,
  options: { deadlineMs: number; backoff: BackoffPolicy; signal?: AbortSignal; now?: () => number; keepProcessAlive?: boolean },
): Promise<T> {
  return retry(fn, options);
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new ShutdownError();
}
