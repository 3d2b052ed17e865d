/**
 * The one polling kit every suite uses: tests wait on an outcome with a bounded deadline, never on
 * a fixed sleep. `gate` lets a handler wait for the test; `work` simulates a handler's work.
 */

/** How {@link waitFor} polls. */
export interface WaitOptions {
  /** What is awaited, named in the timeout error (default `'condition'`). */
  what?: string;
  /** How long to poll before failing, in ms (default 20 000; jest's own timeout is 60 s). */
  timeoutMs?: number;
  /** The pause between two checks, in ms (default 25). */
  intervalMs?: number;
}

/**
 * Calls `check` until it returns a truthy value, and resolves with that value. A check that
 * throws counts as "not yet"; its last error is quoted if the deadline passes.
 * @throws Error naming `what` and the timeout when `timeoutMs` passes first
 */
export async function waitFor<T>(check: () => T | Promise<T>, options: WaitOptions = {}): Promise<NonNullable<T>> {
  const { what = 'condition', timeoutMs = 20_000, intervalMs = 25 } = options;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** A promise with its resolve function exposed (a gate a handler can wait on). */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/** A plain timer-based pause, used only inside handlers to simulate work; `signal` ends it early. */
export function work(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}
