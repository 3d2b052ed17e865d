/**
 * Group joins in flight per @platformatic/kafka consumer, read from the client's own tracing
 * channel (`plt:kafka:consumer:group`, operation `joinGroup`), so a consumer is closed only
 * between joins.
 *
 * Why: @platformatic/kafka 2.12 (classic protocol) schedules the member's next heartbeat when a
 * join completes, without checking whether the consumer was closed meanwhile. A `close()` that
 * lands while a rejoin is in flight (a heartbeat answered REBALANCE_IN_PROGRESS, as when another
 * member joins during a rolling deploy) therefore resolves, and the closed consumer then sends a
 * heartbeat every `heartbeatInterval`, forever, each failing with "Cannot connect to any broker":
 * its timer keeps the process from exiting. Seen here in 2 of 8 closes made at a rejoin's start.
 */
import type * as Platformatic from '@platformatic/kafka';

/** The fields of the client's diagnostic context this file reads. */
interface GroupContext {
  readonly client?: unknown;
  readonly operation?: string;
  /** Set by the channel when the operation failed (before `end` only when it threw synchronously). */
  readonly error?: unknown;
}

const inFlight = new WeakMap<object, number>();
const waiters = new WeakMap<object, Array<() => void>>();
/** The part of a `node:diagnostics_channel` TracingChannel this file uses. */
interface GroupChannel {
  subscribe(handlers: Record<'start' | 'end' | 'asyncStart' | 'asyncEnd' | 'error', (context: GroupContext) => void>): void;
}

let subscribedTo: GroupChannel | undefined;

function ended(context: GroupContext): void {
  const client = context.client;
  if (context.operation !== 'joinGroup' || typeof client !== 'object' || client === null) return;
  const left = (inFlight.get(client) ?? 1) - 1;
  if (left > 0) {
    inFlight.set(client, left);
    return;
  }
  inFlight.delete(client);
  for (const wake of waiters.get(client)?.splice(0) ?? []) wake();
}

/** Starts counting joins on the client's group channel (once per process). */
export function trackJoins(kafka: typeof Platformatic): void {
  const channel = kafka.consumerGroupChannel as unknown as GroupChannel;
  if (subscribedTo === channel) return;
  subscribedTo = channel;
  channel.subscribe({
    start: (context) => {
      const client = context.client;
      if (context.operation !== 'joinGroup' || typeof client !== 'object' || client === null) return;
      inFlight.set(client, (inFlight.get(client) ?? 0) + 1);
    },
    // A join that threw synchronously never calls back: its `end` already carries the error.
    end: (context) => {
      if (context.error !== undefined) ended(context);
    },
    asyncStart: ended,
    asyncEnd: () => undefined,
    error: () => undefined,
  });
}

/**
 * Resolves true once `consumer` has no join in flight (at once when it has none), or false when
 * `timeoutMs` passed first.
 */
export function joinsSettled(consumer: object, timeoutMs: number): Promise<boolean> {
  if (!inFlight.has(consumer)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    const list = waiters.get(consumer) ?? [];
    waiters.set(consumer, list);
    list.push(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}
