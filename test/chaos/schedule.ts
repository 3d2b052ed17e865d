/**
 * The seeded parts of a run: the message plan (unique keys, re-published duplicates, poison) and
 * the fault schedule (what to inject, when, and a random number that picks the target when the
 * fault fires). The same seed gives the same plan and schedule; the outcome still depends on
 * real timing.
 */
import type { Rng } from './rng';

/** Faults the harness can inject. Which ones a stack supports is up to its driver. */
export const FAULT_KINDS = [
  'kill', // SIGKILL (or simulated crash) of a random worker at a random moment
  'kill_before_effect', // a worker dies in its next handler before the effect
  'kill_after_effect', // ... after the effect, before the commit
  'kill_after_commit', // ... after the commit, before the ack (a lost ack)
  'overrun', // a worker's next handler overruns its lease
  'close_connections', // the broker closes a worker's connections
  'redis_stop', // the private redis-server is killed, restarted after a while
  'redis_pause', // CLIENT PAUSE on the private redis-server
  'redis_flush', // FLUSHALL on the private redis-server (the gated stacks' gate: every entry gone)
  'pg_terminate', // pg_terminate_backend of a worker's session that is inside a transaction (PostgreSQL inbox)
  'group_leave', // a worker leaves the consumer group (graceful stop), a new one joins later
  'group_join', // an extra worker joins the group
  'kill_after_claim', // an outbox relay dies right after its claim committed, before publishing
  'kill_before_confirm', // ... after a publish was sent, before the relay saw the broker's confirm
  'kill_after_confirm', // ... after the broker confirmed a publish, before the relay deleted the row
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** Faults that may not produce a duplicated effect (see docs/chaos.md, "strict runs"). */
export const STRICT_FAULTS: ReadonlySet<FaultKind> = new Set(['kill_before_effect', 'kill_after_commit', 'close_connections', 'group_leave', 'group_join']);

export interface PlannedMessage {
  readonly key: string;
  readonly poison: boolean;
  /** A re-publication of a key published earlier (an injected duplicate). */
  readonly duplicate: boolean;
  /** When to publish, ms after the run started. */
  readonly atMs: number;
}

export interface PlanOptions {
  readonly runId: string;
  readonly messages: number;
  readonly duplicateShare: number;
  readonly poisonShare: number;
  /** Publishing is spread over this long, ms. */
  readonly publishMs: number;
}

/** The publish plan, in publish order. */
export function buildPlan(rng: Rng, o: PlanOptions): PlannedMessage[] {
  const plan: PlannedMessage[] = [];
  for (let i = 0; i < o.messages; i++) {
    const atMs = Math.floor((i / o.messages) * o.publishMs);
    const key = `${o.runId}-${i}`;
    const poison = rng.next() < o.poisonShare;
    plan.push({ key, poison, duplicate: false, atMs });
    if (rng.next() < o.duplicateShare) {
      // Half of the copies arrive while the original may still be in flight, half much later.
      const later = rng.next() < 0.5 ? rng.int(0, 300) : rng.int(1000, 8000);
      plan.push({ key, poison, duplicate: true, atMs: Math.min(o.publishMs + 2000, atMs + later) });
    }
  }
  return plan.sort((a, b) => a.atMs - b.atMs);
}

export interface ScheduledFault {
  readonly atMs: number;
  readonly kind: FaultKind;
  /** Uniform in [0, 1): chooses the target among those available when the fault fires. */
  readonly pick: number;
  /** How long the fault lasts (redis_stop, redis_pause), ms. */
  readonly durationMs: number;
}

export interface ScheduleOptions {
  /** Faults per minute, by kind. */
  readonly ratesPerMinute: Partial<Record<FaultKind, number>>;
  /** Faults are injected between these times, ms after the run started. */
  readonly fromMs: number;
  readonly untilMs: number;
  /** Range of fault durations, ms. */
  readonly durationMs: readonly [number, number];
}

/**
 * Fault times per kind: evenly spread slots with jitter, so a short CI run still gets every
 * kind it asks for.
 */
export function buildSchedule(rng: Rng, o: ScheduleOptions): ScheduledFault[] {
  const out: ScheduledFault[] = [];
  const span = o.untilMs - o.fromMs;
  for (const [kind, perMinute] of Object.entries(o.ratesPerMinute) as [FaultKind, number][]) {
    const count = Math.max(1, Math.round((perMinute * span) / 60_000));
    const r = rng.fork(kind);
    for (let i = 0; i < count; i++) {
      const slot = span / count;
      out.push({ atMs: Math.round(o.fromMs + slot * i + r.next() * slot), kind, pick: r.next(), durationMs: r.int(o.durationMs[0], o.durationMs[1]) });
    }
  }
  return out.sort((a, b) => a.atMs - b.atMs);
}
