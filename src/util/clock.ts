/**
 * Time sources. Leases are judged on a monotonic clock, never on the wall clock, so a jump of
 * the system time neither steals a live lease nor keeps a dead one.
 */
import { performance } from 'node:perf_hooks';

/** A clock reading milliseconds. Only differences between readings are meaningful. */
export interface Clock {
  now(): number;
}

/** `performance.now()`: monotonic milliseconds since the process started. */
export const monotonicClock: Clock = { now: () => performance.now() };

/** An opaque timer handle of a {@link TimerClock}. */
export type TimerHandle = unknown;

/**
 * A clock with timers: what the consumer (handler timeout, shutdown deadline) and the lease
 * keeper use. Replace it in tests with a manual clock to advance time without sleeping.
 * Timers made by the system clock do not keep the process alive when `unref` is true.
 */
export interface TimerClock extends Clock {
  /** Calls `fn` once after `ms` milliseconds. */
  setTimeout(fn: () => void, ms: number, options?: { readonly unref?: boolean }): TimerHandle;
  /** Cancels a timer of `setTimeout`; undefined is ignored. */
  clearTimeout(handle: TimerHandle | undefined): void;
  /** Calls `fn` every `ms` milliseconds until cleared. */
  setInterval(fn: () => void, ms: number, options?: { readonly unref?: boolean }): TimerHandle;
  /** Cancels a timer of `setInterval`; undefined is ignored. */
  clearInterval(handle: TimerHandle | undefined): void;
}

/**
 * The process's clock: `performance.now()` and Node's timers (looked up at each call, so jest's
 * fake timers still apply).
 */
export const systemClock: TimerClock = {
  now: () => performance.now(),
  setTimeout: (fn, ms, options) => {
    const timer = setTimeout(fn, ms);
    if (options?.unref) timer.unref();
    return timer;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout | undefined),
  setInterval: (fn, ms, options) => {
    const timer = setInterval(fn, ms);
    if (options?.unref) timer.unref();
    return timer;
  },
  clearInterval: (handle) => clearInterval(handle as NodeJS.Timeout | undefined),
};
