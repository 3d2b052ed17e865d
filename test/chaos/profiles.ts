/**
 * Run profiles. Each stack runs two scenarios:
 *
 * - `strict`: faults limited to published duplicates, lost acks (kills right after the commit),
 *   closed connections, group rebalances and kills before the effect. No effect may repeat at all.
 * - `full`: every fault the stack supports, including kills between the effect and the commit,
 *   claim-store outages and pauses, and handlers overrunning their lease. Effects may repeat only
 *   through the documented windows.
 *
 * Stacks whose spec has `strictVerdict` (the PostgreSQL inbox) fail on any duplicate in both.
 *
 * `ci` fits every stack in about 12 minutes on a 2-core machine (the two gated stacks add under
 * 3 more); `long` publishes at least 100,000 messages per stack (see docs/chaos.md).
 */
import type { HandlerProfile } from './chaos-consumer';
import { type FaultKind, STRICT_FAULTS } from './schedule';
import { hasPrivateRedis, isInbox, type StackName, stackSpec } from './stacks/registry';

export { type StackName, STACKS } from './stacks/registry';
export type ProfileName = 'ci' | 'long';

export interface ScenarioProfile {
  readonly name: 'strict' | 'full';
  /** Unique keys published. */
  readonly messages: number;
  /** Share of keys published a second time. */
  readonly duplicateShare: number;
  /** Share of keys that are poison (dead-lettered on purpose, never applied). */
  readonly poisonShare: number;
  /** Publishing is spread over this long, ms. */
  readonly publishMs: number;
  /** Consumer processes (or in-process consumers for the memory stack) at the start. */
  readonly workers: number;
  readonly concurrency: number;
  readonly leaseTtlMs: number;
  readonly handler: HandlerProfile;
  readonly faultsPerMinute: Partial<Record<FaultKind, number>>;
  /** Range of redis_stop / redis_pause durations, ms. */
  readonly outageMs: readonly [number, number];
  /** A killed worker is replaced after this long, ms. */
  readonly restartDelayMs: number;
  /** The run fails if it has not drained this long after publishing ended, ms. */
  readonly drainTimeoutMs: number;
}

const HANDLER: HandlerProfile = { slowShare: 0.1, longShare: 0.005, retryableShare: 0.03 };

function scenarios(stack: StackName, messages: number, publishMs: number, drainTimeoutMs: number): ScenarioProfile[] {
  const spec = stackSpec(stack);
  const base = {
    messages,
    duplicateShare: 0.1,
    poisonShare: 0.003,
    publishMs,
    workers: 3,
    // The inbox holds a connection of the shared server (max_connections 100) per in-flight
    // delivery: fewer in flight per worker than with Redis.
    concurrency: isInbox(spec.store) ? 8 : 16,
    leaseTtlMs: 2000,
    handler: HANDLER,
    // The gate's pauses stay near 2 s: ten times its 200 ms deadline, so claims fall back.
    outageMs: spec.store === 'gated' ? ([1500, 2500] as const) : ([1500, 4500] as const),
    restartDelayMs: 1000,
    drainTimeoutMs,
  };
  const strict: Partial<Record<FaultKind, number>> = { kill_before_effect: 3, kill_after_commit: 3 };
  const full: Partial<Record<FaultKind, number>> = { kill: 2, kill_before_effect: 2, kill_after_effect: 3, kill_after_commit: 2, overrun: 3 };
  if (spec.broker === 'rabbitmq') {
    strict.close_connections = 3;
    full.close_connections = 2;
  }
  if (spec.broker === 'kafka') {
    Object.assign(strict, { group_leave: 1.5, group_join: 1.5 });
    Object.assign(full, { group_leave: 1, group_join: 1 });
  }
  if (hasPrivateRedis(spec.store)) Object.assign(full, { redis_stop: 1.5, redis_pause: 1.5 });
  // The gate forgets everything at once: it must cost reads of the truth, never a repeat.
  if (spec.store === 'gated') full.redis_flush = 1.5;
  // The server ends a consumer's session in the middle of a transaction.
  if (isInbox(spec.store)) full.pg_terminate = 3;
  return [
    { ...base, name: 'strict', faultsPerMinute: strict },
    { ...base, name: 'full', faultsPerMinute: full },
  ];
}

/**
 * The outbox stacks run one scenario: three relay processes killed at each step of a claim
 * (after the claim, between the publish and its confirm, between the confirm and the DELETE) and
 * at random, their PostgreSQL sessions ended mid-transaction, their RabbitMQ connections closed.
 * `workers` counts relays; the downstream consumer is one process of its own.
 */
function outboxScenario(stack: StackName, messages: number, publishMs: number, drainTimeoutMs: number): ScenarioProfile[] {
  const faults: Partial<Record<FaultKind, number>> = { kill_after_claim: 5, kill_before_confirm: 5, kill_after_confirm: 5, kill: 2, pg_terminate: 5 };
  if (stackSpec(stack).broker === 'rabbitmq') faults.close_connections = 3;
  return [
    {
      name: 'full',
      messages,
      duplicateShare: 0,
      poisonShare: 0,
      publishMs,
      workers: 3,
      concurrency: 1,
      leaseTtlMs: 2000,
      handler: HANDLER,
      faultsPerMinute: faults,
      outageMs: [1500, 4500],
      restartDelayMs: 1000,
      drainTimeoutMs,
    },
  ];
}

/** Messages and publishing time per stack and profile. */
export function profile(name: ProfileName, stack: StackName): ScenarioProfile[] {
  // CI: about 35 s of staging (every relay kill point fires about three times); long: 100,000
  // staged messages per stack.
  if (stackSpec(stack).outbox) return name === 'ci' ? outboxScenario(stack, 2000, 35_000, 60_000) : outboxScenario(stack, 100_000, 600_000, 300_000);
  if (name === 'ci') {
    // About 50 s of publishing per stack and scenario.
    if (stack === 'memory') return scenarios(stack, 4000, 25_000, 60_000);
    // The gated stacks repeat the inbox's setup with a gate: a third of the keys, 15 s of
    // publishing (every fault kind still fires once), so the two add under 3 minutes to the CI
    // profile (docs/chaos.md).
    // Drain deadlines cost nothing on a run that drains (it ends as soon as it has); they are
    // wide for a loaded machine (a Kafka stack's run took 59 s quiet, 247 s at load average 20).
    if (stackSpec(stack).store === 'gated') return scenarios(stack, 1000, 15_000, 180_000);
    return scenarios(stack, 3000, 40_000, 180_000);
  }
  // long: at least 100,000 messages per stack (two scenarios of 50,000 each).
  return scenarios(stack, 50_000, stack === 'memory' ? 150_000 : 300_000, 300_000);
}

/**
 * Whether a run is judged strictly (any duplicated effect fails): always for a stack with a
 * strict verdict (the PostgreSQL inbox); otherwise in the strict scenario, when every fault that
 * fired is one of the strict faults.
 */
export function judgedStrictly(stack: StackName, scenario: ScenarioProfile['name'], fired: readonly string[]): boolean {
  return stackSpec(stack).strictVerdict || (scenario === 'strict' && fired.every((k) => STRICT_FAULTS.has(k as FaultKind)));
}
