/**
 * A clock whose time moves only when a test says so: give it to a consumer (`clock` option), to
 * an InMemoryClaimer (`clock`) and to a LeaseKeeper, then `advance(ms)` instead of sleeping.
 */
import type { TimerClock, TimerHandle } from '../../src';

interface Timer {
  at: number;
  readonly fn: () => void;
  /** Period of an interval timer, ms; undefined for a one-shot timer. */
  readonly every: number | undefined;
}

/** Lets every pending promise callback run (one macrotask turn; no time passes on any clock). */
export function flushPromises(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export class ManualClock implements TimerClock {
  private t = 0;
  private nextId = 1;
  private readonly timers = new Map<number, Timer>();

  now(): number {
    return this.t;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    return this.add(fn, ms, undefined);
  }

  clearTimeout(handle: TimerHandle | undefined): void {
    if (typeof handle === 'number') this.timers.delete(handle);
  }

  setInterval(fn: () => void, ms: number): TimerHandle {
    return this.add(fn, ms, Math.max(1, ms));
  }

  clearInterval(handle: TimerHandle | undefined): void {
    this.clearTimeout(handle);
  }

  /** Timers not fired or cleared yet. */
  get pending(): number {
    return this.timers.size;
  }

  /** Resolves once `ms` ms of this clock have passed (driven by {@link ManualClock.advance}). */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.setTimeout(resolve, ms));
  }

  /**
   * Moves time forward by `ms`, firing due timers in time order; after each, pending promise
   * callbacks run before time moves on (so an extend or a commit issued by a timer lands first).
   */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      let nextId: number | undefined;
      let next: Timer | undefined;
      for (const [id, timer] of this.timers) {
        if (timer.at <= end && (next === undefined || timer.at < next.at)) {
          next = timer;
          nextId = id;
        }
      }
      if (next === undefined || nextId === undefined) break;
      this.t = Math.max(this.t, next.at);
      if (next.every === undefined) this.timers.delete(nextId);
      else next.at += next.every;
      next.fn();
      await flushPromises();
    }
    this.t = end;
    await flushPromises();
  }

  private add(fn: () => void, ms: number, every: number | undefined): number {
    const id = this.nextId++;
    this.timers.set(id, { at: this.t + Math.max(0, ms), fn, every });
    return id;
  }
}
