/**
 * The stacks the harness knows, one line each: which broker, which claim store, and whether its
 * verdict is strict in every scenario. `--stack all` runs them in this order. A new stack (a
 * variant of a broker and a store) is one more line here, plus its fault rates in profiles.ts
 * when they differ.
 */

/** Where messages come from. */
export type BrokerKind = 'memory' | 'rabbitmq' | 'kafka';

/**
 * Where claims live, and how the effect relates to them:
 * - `memory`: InMemoryClaimer in the memory host;
 * - `redis`: RedisClaimer on a private redis-server; the effect is a separate INSERT;
 * - `postgres`: PostgresClaimer in transactional mode (the inbox) on the ledger's PostgreSQL; the
 *   effect INSERT goes through `ctx.transaction`, so it commits with the claim or not at all;
 * - `gated`: GatedClaimer, a RedisClaimer gate on a private redis-server WITHOUT persistence in
 *   front of that same PostgreSQL inbox (the truth); the effect still goes through
 *   `ctx.transaction`. The gate may lose everything (kill, flush) and must not cost a repeat.
 */
export type StoreKind = 'memory' | 'redis' | 'postgres' | 'gated';

/** Whether the effect commits in the claim's PostgreSQL transaction (the inbox, gated or not). */
export function isInbox(store: StoreKind): store is 'postgres' | 'gated' {
  return store === 'postgres' || store === 'gated';
}

/** Whether the stack runs a private redis-server (the claim store, or the gate in front of it). */
export function hasPrivateRedis(store: StoreKind): store is 'redis' | 'gated' {
  return store === 'redis' || store === 'gated';
}

export interface StackSpec {
  readonly name: string;
  readonly broker: BrokerKind;
  readonly store: StoreKind;
  /**
   * Any duplicated effect fails every scenario of this stack, the `full` one included: no window
   * may explain a repeat (the PostgreSQL inbox closes all three, with or without a gate).
   */
  readonly strictVerdict: boolean;
  /**
   * The transactional outbox stacks (stacks/outbox.ts): a producer stages messages with an effect
   * row in one PostgreSQL transaction (some roll back on purpose), relay processes publish them
   * to the broker and are killed at their claim, publish and confirm steps, and one downstream
   * consumer with the inbox applies each message. The verdict adds phantoms (an effect of a
   * rolled-back message) and per-key order at the consumer to the inbox's strict one.
   */
  readonly outbox?: boolean;
}

export const STACK_SPECS = [
  { name: 'memory', broker: 'memory', store: 'memory', strictVerdict: false },
  { name: 'rabbitmq-redis', broker: 'rabbitmq', store: 'redis', strictVerdict: false },
  { name: 'kafka-redis', broker: 'kafka', store: 'redis', strictVerdict: false },
  { name: 'rabbitmq-postgres', broker: 'rabbitmq', store: 'postgres', strictVerdict: true },
  { name: 'kafka-postgres', broker: 'kafka', store: 'postgres', strictVerdict: true },
  { name: 'rabbitmq-postgres-gated', broker: 'rabbitmq', store: 'gated', strictVerdict: true },
  { name: 'kafka-postgres-gated', broker: 'kafka', store: 'gated', strictVerdict: true },
  { name: 'rabbitmq-outbox', broker: 'rabbitmq', store: 'postgres', strictVerdict: true, outbox: true },
  { name: 'kafka-outbox', broker: 'kafka', store: 'postgres', strictVerdict: true, outbox: true },
] as const satisfies readonly StackSpec[];

export type StackName = (typeof STACK_SPECS)[number]['name'];
export const STACKS: readonly StackName[] = STACK_SPECS.map((s) => s.name);

/** The spec of a stack by name. */
export function stackSpec(name: StackName): StackSpec {
  return STACK_SPECS.find((s) => s.name === name)!;
}
