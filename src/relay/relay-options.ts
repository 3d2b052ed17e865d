/**
 * Options of the `OutboxRelay`, their defaults and their validation (at construction).
 */
import { ConfigurationError } from '../util/errors';
import { checkKnownOptions, describeType, optionNames } from '../util/known-options';
import type { BackoffPolicy } from '../util/retry';
import type { DeadKeyPolicy } from '../outbox/ports';
import { resolveBackoffOption } from '../config/backoff-options';

/** Options of an `OutboxRelay`. */
export interface OutboxRelayOptions {
  /** Name in logs and health, and the start of the lease owner id. Default `outbox-relay`. 1 … 64 characters. */
  readonly name?: string;
  /** Most messages leased per claim. Default 100. [1, 10 000]. */
  readonly batchSize?: number;
  /**
   * Lease of a claim, ms: a relay that stops extending (crashed, cut off) loses its messages to
   * another relay after this long, which publishes them again (same ids). Default 30 000.
   * [1000, 3 600 000].
   */
  readonly leaseMs?: number;
  /**
   * How often a running claim's lease is extended while its publishes are slow, ms. Default
   * `leaseMs / 3`. Must be below `leaseMs`.
   */
  readonly extendIntervalMs?: number;
  /**
   * Polling period when no notification comes, ms: the fallback of LISTEN/NOTIFY, and the whole
   * wake-up when the relay has no notifier. It also bounds how late a message whose retry delay
   * ran out is picked up. Default 1000. [10, 600 000].
   */
  readonly pollIntervalMs?: number;
  /** Publishes of one message before it is dead. Default 10. [1, 1000]. */
  readonly maxAttempts?: number;
  /**
   * Delay before retry number n of a message. Default 1 s, doubling, at most 60 s, ±20 % jitter
   * (`{ initialDelayMs: 1000, maxDelayMs: 60_000, multiplier: 2, jitter: 0.2 }`). Fields left out
   * keep their default: `{ initialDelayMs: 200, maxDelayMs: 400 }` doubles with ±20 % jitter.
   */
  readonly retryBackoff?: Partial<BackoffPolicy>;
  /** What later messages of a key do once a message of that key is dead. Default `'hold'` (see {@link DeadKeyPolicy}). */
  readonly deadKeyPolicy?: DeadKeyPolicy;
  /**
   * Ordering keys published at the same time, per claim (each key one message at a time). Default
   * 100 (the default `batchSize`: every key of a claim in flight at once). [1, 1024].
   */
  readonly keyConcurrency?: number;
  /**
   * Claims in progress at the same time: while one claim's messages are published, the next is
   * claimed and published, so the claim and delete statements overlap the broker's confirms. Each
   * key is still held by one claim at a time (its later rows are not claimable while an older one
   * is in the table), so per-key order does not depend on it. 1 = claim, publish, delete, then the
   * next claim. Default 2. [1, 16].
   */
  readonly claimConcurrency?: number;
  /**
   * How long `stop()` waits for publishes in flight before giving their leases back, ms.
   * Default 10 000. [0, 600 000].
   */
  readonly shutdownTimeoutMs?: number;
  /**
   * How often `health()`'s store counts (pending, lag, leased, dead) are read in any case, ms. They
   * are also read before `start()` resolves, and after a poll while messages are pending or the
   * relay saw a change (it claimed rows, a notification came), at most once per `pollIntervalMs`
   * and no sooner than ten times the last read's duration (the read scans the table), so the
   * pending count and the lag follow the table within a poll while the read is short. 0 = never
   * read (no `health().stats`). Default 10 000.
   */
  readonly statsIntervalMs?: number;
  /** Delay after a failed claim (store unreachable) before the next, ms. Default 1000. [10, 600 000]. */
  readonly storeRetryDelayMs?: number;
}

/** The options with every default filled in (`retryBackoff` with all its fields). */
export type ResolvedOutboxRelayOptions = Readonly<Required<Omit<OutboxRelayOptions, 'retryBackoff'>>> & { readonly retryBackoff: Readonly<BackoffPolicy> };

/** Defaults of {@link OutboxRelayOptions} (`extendIntervalMs` is derived from `leaseMs`). */
export const OUTBOX_RELAY_DEFAULTS: Readonly<Omit<ResolvedOutboxRelayOptions, 'extendIntervalMs'>> = Object.freeze({
  name: 'outbox-relay',
  batchSize: 100,
  leaseMs: 30_000,
  pollIntervalMs: 1000,
  maxAttempts: 10,
  retryBackoff: Object.freeze({ initialDelayMs: 1000, maxDelayMs: 60_000, multiplier: 2, jitter: 0.2 }),
  deadKeyPolicy: 'hold',
  keyConcurrency: 100,
  claimConcurrency: 2,
  shutdownTimeoutMs: 10_000,
  statsIntervalMs: 10_000,
  storeRetryDelayMs: 1000,
});

/** The names of {@link OutboxRelayOptions}. */
export const OUTBOX_RELAY_OPTION_NAMES: readonly string[] = optionNames<OutboxRelayOptions>()([
  'name',
  'batchSize',
  'leaseMs',
  'extendIntervalMs',
  'pollIntervalMs',
  'maxAttempts',
  'retryBackoff',
  'deadKeyPolicy',
  'keyConcurrency',
  'claimConcurrency',
  'shutdownTimeoutMs',
  'statsIntervalMs',
  'storeRetryDelayMs',
]);
const NAMES = OUTBOX_RELAY_OPTION_NAMES;

/**
 * Merges `options` over the defaults into a new object.
 * @throws ConfigurationError naming the field and the value (an unknown name, a value out of range, extendIntervalMs ≥ leaseMs)
 */
export function resolveRelayOptions(options: OutboxRelayOptions = {}): ResolvedOutboxRelayOptions {
  checkKnownOptions('OutboxRelay options', options, NAMES);
  const retryBackoff = resolveBackoffOption('retryBackoff', options.retryBackoff, OUTBOX_RELAY_DEFAULTS.retryBackoff);
  const o = { ...OUTBOX_RELAY_DEFAULTS, ...stripUndefined(options), retryBackoff };
  if (typeof o.name !== 'string' || o.name.length === 0 || o.name.length > 64) throw new ConfigurationError(`name must be a string of 1 … 64 characters, got ${describeType(o.name)}`);
  int('batchSize', o.batchSize, 1, 10_000);
  int('leaseMs', o.leaseMs, 1000, 3_600_000);
  const extendIntervalMs = options.extendIntervalMs ?? Math.floor(o.leaseMs / 3);
  int('extendIntervalMs', extendIntervalMs, 10, o.leaseMs - 1);
  int('pollIntervalMs', o.pollIntervalMs, 10, 600_000);
  int('maxAttempts', o.maxAttempts, 1, 1000);
  int('keyConcurrency', o.keyConcurrency, 1, 1024);
  int('claimConcurrency', o.claimConcurrency, 1, 16);
  int('shutdownTimeoutMs', o.shutdownTimeoutMs, 0, 600_000);
  int('statsIntervalMs', o.statsIntervalMs, 0, 3_600_000);
  int('storeRetryDelayMs', o.storeRetryDelayMs, 10, 600_000);
  if (o.deadKeyPolicy !== 'hold' && o.deadKeyPolicy !== 'continue') throw new ConfigurationError(`deadKeyPolicy must be 'hold' or 'continue', got ${describeType(o.deadKeyPolicy)}`);
  const b = retryBackoff;
  int('retryBackoff.initialDelayMs', b.initialDelayMs, 0, 86_400_000);
  int('retryBackoff.maxDelayMs', b.maxDelayMs, b.initialDelayMs, 86_400_000);
  if (typeof b.multiplier !== 'number' || !(b.multiplier >= 1) || b.multiplier > 100) throw new ConfigurationError(`retryBackoff.multiplier must be a number in [1, 100], got ${describeType(b.multiplier)}`);
  if (typeof b.jitter !== 'number' || !(b.jitter >= 0) || b.jitter > 1) throw new ConfigurationError(`retryBackoff.jitter must be a number in [0, 1], got ${describeType(b.jitter)}`);
  return Object.freeze({ ...o, extendIntervalMs, retryBackoff: Object.freeze({ ...b }) });
}

function int(field: string, value: unknown, min: number, max: number): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ConfigurationError(`${field} must be an integer in [${min}, ${max}], got ${describeType(value)}`);
  }
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
