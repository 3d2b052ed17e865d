/** Polling helpers: tests wait on outcomes with a bounded deadline, never on fixed sleeps. */

/**
 * Polls `check` every `intervalMs` until it returns a truthy value, and resolves with it.
 * @throws Error naming `what` when `timeoutMs` passes first
 */
export async function waitFor<T>(check: () => T | Promise<T>, what: string, timeoutMs = 20_000, intervalMs = 25): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
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

/** A plain timer-based sleep, used only inside handlers to simulate work. */
export function work(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}
