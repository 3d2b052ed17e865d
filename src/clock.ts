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
