/**
 * TTL policy: how long leases live and how long completed keys are remembered, per consumer and
 * per message type inside a consumer, checked at construction against bounds a service sets once.
 *
 * Retention is a business decision: payment keys must outlive every redelivery and replay of a
 * payment (days, a year), notification keys can go after a day. A {@link TtlPolicy} holds the
 * service's defaults and its minimum and maximum; each consumer (`leaseTtlMs`, `doneTtlMs`) and
 * each message type it routes ({@link TypeTtls}) declares its own TTLs within them.
 */
import type { ClaimOptions } from '../claim/claimer';
import type { Delivery } from '../ports/delivery';
import { ConfigurationError } from '../util/errors';
import { checkTtl } from '../claim/keys';
import { checkKnownOptions, describeType, optionNames } from '../util/known-options';
import { MAX_DONE_TTL_MS, MAX_LEASE_TTL_MS, MIN_LEASE_TTL_MS } from '../util/limits';

/** Options of {@link TtlPolicy}. Every field in milliseconds. */
export interface TtlPolicyOptions {
  /** Lease of a consumer that sets no `leaseTtlMs`. Default 30 000 (the consumer default). */
  readonly defaultLeaseTtlMs?: number;
  /** Retention of a consumer that sets no `doneTtlMs`. Default 7 days (the consumer default). */
  readonly defaultDoneTtlMs?: number;
  /** Shortest lease any consumer or type may declare. Default 100 ({@link MIN_LEASE_TTL_MS}). */
  readonly minLeaseTtlMs?: number;
  /** Longest lease. Default 1 day ({@link MAX_LEASE_TTL_MS}). */
  readonly maxLeaseTtlMs?: number;
  /** Shortest retention of a completed key (a payment: 1 day or more). Default 100. */
  readonly minDoneTtlMs?: number;
  /** Longest retention (a notification: 30 days at most). Default 365 days ({@link MAX_DONE_TTL_MS}). */
  readonly maxDoneTtlMs?: number;
}

/** The TTLs one message type declares; a field left out is the consumer's. */
export interface TypeTtl {
  readonly leaseTtlMs?: number;
  readonly doneTtlMs?: number;
}

/** What {@link TypeTtls.typeOf} reads: the delivery before its body is decoded. */
export type DeliveryView = Pick<Delivery, 'headers' | 'metadata' | 'messageId'>;

/** Per message type TTLs inside one consumer (consumer option `typeTtls`). */
export interface TypeTtls {
  /**
   * The type of a delivery: from a header (`type`, CloudEvents `ce-type`) or the destination
   * (`metadata.destination`, the queue or topic). Called before the body is decoded and before
   * the claim (batch claims included), once or twice per delivery: keep it cheap and pure.
   * A type missing from `types`, or undefined, gets the consumer's own TTLs.
   */
  readonly typeOf: (delivery: DeliveryView) => string | undefined;
  /** TTLs per type name. */
  readonly types: Readonly<Record<string, TypeTtl>>;
}

/** One line of `consumer.describe().ttls`. */
export interface EffectiveTtl {
  /** The message type, or undefined for the consumer's own TTLs (every delivery of no listed type). */
  readonly type: string | undefined;
  readonly leaseTtlMs: number;
  readonly doneTtlMs: number;
}

const POLICY_OPTION_NAMES = optionNames<TtlPolicyOptions>()(['defaultLeaseTtlMs', 'defaultDoneTtlMs', 'minLeaseTtlMs', 'maxLeaseTtlMs', 'minDoneTtlMs', 'maxDoneTtlMs']);
const TYPE_TTLS_OPTION_NAMES = optionNames<TypeTtls>()(['typeOf', 'types']);
const TYPE_TTL_OPTION_NAMES = optionNames<TypeTtl>()(['leaseTtlMs', 'doneTtlMs']);

/** The consumer defaults, repeated here so the policy does not depend on the consumer's options module. */
const FALLBACK_LEASE_TTL_MS = 30_000;
const FALLBACK_DONE_TTL_MS = 7 * 24 * 60 * 60 * 1000;

/** A service's TTL defaults and bounds. Immutable; share one between consumers. */
export class TtlPolicy {
  readonly defaultLeaseTtlMs: number;
  readonly defaultDoneTtlMs: number;
  readonly minLeaseTtlMs: number;
  readonly maxLeaseTtlMs: number;
  readonly minDoneTtlMs: number;
  readonly maxDoneTtlMs: number;

  /**
   * @throws ConfigurationError for an unknown option, a value outside the contract's limits,
   *   a minimum above its maximum, or a default outside its bounds
   */
  constructor(options: TtlPolicyOptions = {}) {
    checkKnownOptions('TtlPolicy options', options, POLICY_OPTION_NAMES);
    this.minLeaseTtlMs = limit('minLeaseTtlMs', options.minLeaseTtlMs, MIN_LEASE_TTL_MS, MIN_LEASE_TTL_MS, MAX_LEASE_TTL_MS);
    this.maxLeaseTtlMs = limit('maxLeaseTtlMs', options.maxLeaseTtlMs, MAX_LEASE_TTL_MS, this.minLeaseTtlMs, MAX_LEASE_TTL_MS);
    this.minDoneTtlMs = limit('minDoneTtlMs', options.minDoneTtlMs, MIN_LEASE_TTL_MS, MIN_LEASE_TTL_MS, MAX_DONE_TTL_MS);
    this.maxDoneTtlMs = limit('maxDoneTtlMs', options.maxDoneTtlMs, MAX_DONE_TTL_MS, this.minDoneTtlMs, MAX_DONE_TTL_MS);
    this.defaultLeaseTtlMs = limit('defaultLeaseTtlMs', options.defaultLeaseTtlMs, clamp(FALLBACK_LEASE_TTL_MS, this.minLeaseTtlMs, this.maxLeaseTtlMs), this.minLeaseTtlMs, this.maxLeaseTtlMs);
    this.defaultDoneTtlMs = limit('defaultDoneTtlMs', options.defaultDoneTtlMs, clamp(FALLBACK_DONE_TTL_MS, this.minDoneTtlMs, this.maxDoneTtlMs), this.minDoneTtlMs, this.maxDoneTtlMs);
    Object.freeze(this);
  }

  /** The policy of a consumer that names none: the contract's limits and the consumer defaults. */
  static readonly DEFAULT = new TtlPolicy();

  /**
   * Checks one declaration against the bounds.
   * @param who - the declarer, printed first (`consumer "billing"`, `consumer "billing", type "payment"`)
   * @throws ConfigurationError naming the declarer, the field, the value and the bound it breaks
   */
  check(who: string, field: 'leaseTtlMs' | 'doneTtlMs', value: number): void {
    const [min, max] = field === 'leaseTtlMs' ? [this.minLeaseTtlMs, this.maxLeaseTtlMs] : [this.minDoneTtlMs, this.maxDoneTtlMs];
    const bound = field === 'leaseTtlMs' ? 'LeaseTtlMs' : 'DoneTtlMs';
    if (value < min) throw new ConfigurationError(`${who}: ${field} ${value} (${human(value)}) is below the TTL policy's min${bound} ${min} (${human(min)})`);
    if (value > max) throw new ConfigurationError(`${who}: ${field} ${value} (${human(value)}) is above the TTL policy's max${bound} ${max} (${human(max)})`);
  }
}

/**
 * The effective TTLs of one consumer: its own and each listed type's, checked at construction,
 * and the claim options of each delivery (one frozen object per type, made once).
 */
export class ConsumerTtls {
  /** Claim options of a delivery of no listed type. */
  readonly base: ClaimOptions;
  /** The shortest lease any delivery gets, ms (keep-alive ticks and preclaim ages are sized by it). */
  readonly shortestLeaseTtlMs: number;
  /** The shortest retention any delivery gets, ms (compared with the retry horizon). */
  readonly shortestDoneTtlMs: number;
  private readonly byType: ReadonlyMap<string, ClaimOptions>;
  private readonly typeOf: TypeTtls['typeOf'] | undefined;

  /**
   * @param consumer - the consumer's name, for error messages
   * @param own - the consumer's `leaseTtlMs` and `doneTtlMs` as given (undefined: the policy's default)
   * @throws ConfigurationError naming the consumer (and type), the field, the value and the bound
   */
  constructor(consumer: string, own: TypeTtl, policy: TtlPolicy = TtlPolicy.DEFAULT, typeTtls?: TypeTtls) {
    if (!(policy instanceof TtlPolicy)) throw new ConfigurationError(`ttlPolicy must be a TtlPolicy (new TtlPolicy({...})), got ${describeType(policy)}`);
    const who = `consumer "${consumer}"`;
    this.base = declared(who, own.leaseTtlMs ?? policy.defaultLeaseTtlMs, own.doneTtlMs ?? policy.defaultDoneTtlMs, policy);
    const byType = new Map<string, ClaimOptions>();
    if (typeTtls !== undefined) {
      checkKnownOptions('typeTtls', typeTtls, TYPE_TTLS_OPTION_NAMES);
      if (typeof typeTtls.typeOf !== 'function') throw new ConfigurationError('typeTtls.typeOf must be a function (delivery) => type name or undefined');
      if (!typeTtls.types || typeof typeTtls.types !== 'object') throw new ConfigurationError(`typeTtls.types must be an object of type name → { leaseTtlMs?, doneTtlMs? }, got ${describeType(typeTtls.types)}`);
      for (const [type, ttl] of Object.entries(typeTtls.types)) {
        checkKnownOptions(`typeTtls.types["${type}"]`, ttl, TYPE_TTL_OPTION_NAMES);
        byType.set(type, declared(`${who}, message type "${type}"`, ttl?.leaseTtlMs ?? this.base.leaseTtlMs, ttl?.doneTtlMs ?? this.base.doneTtlMs, policy));
      }
    }
    this.byType = byType;
    this.typeOf = byType.size > 0 ? typeTtls!.typeOf : undefined;
    const all = [this.base, ...byType.values()];
    this.shortestLeaseTtlMs = Math.min(...all.map((o) => o.leaseTtlMs));
    this.shortestDoneTtlMs = Math.min(...all.map((o) => o.doneTtlMs));
  }

  /** The claim options of `delivery` (shared frozen objects: never modify). */
  claimOptions(delivery: DeliveryView): ClaimOptions {
    if (this.typeOf === undefined) return this.base;
    const type = this.typeOf(delivery);
    return (type !== undefined && this.byType.get(type)) || this.base;
  }

  /** Every effective TTL: the consumer's own first, then each listed type. */
  describe(): EffectiveTtl[] {
    return [
      { type: undefined, leaseTtlMs: this.base.leaseTtlMs, doneTtlMs: this.base.doneTtlMs },
      ...[...this.byType].map(([type, o]) => ({ type, leaseTtlMs: o.leaseTtlMs, doneTtlMs: o.doneTtlMs })),
    ];
  }
}

/** One declaration: the contract's limits, the policy's bounds, and doneTtlMs ≥ leaseTtlMs. */
function declared(who: string, leaseTtlMs: number, doneTtlMs: number, policy: TtlPolicy): ClaimOptions {
  try {
    checkTtl('leaseTtlMs', leaseTtlMs, MIN_LEASE_TTL_MS, MAX_LEASE_TTL_MS);
    checkTtl('doneTtlMs', doneTtlMs, MIN_LEASE_TTL_MS, MAX_DONE_TTL_MS);
  } catch (error) {
    throw new ConfigurationError(`${who}: ${(error as Error).message}`);
  }
  policy.check(who, 'leaseTtlMs', leaseTtlMs);
  policy.check(who, 'doneTtlMs', doneTtlMs);
  if (doneTtlMs < leaseTtlMs) throw new ConfigurationError(`${who}: doneTtlMs (${doneTtlMs}) must be ≥ leaseTtlMs (${leaseTtlMs})`);
  return Object.freeze({ leaseTtlMs, doneTtlMs });
}

function limit(field: string, value: number | undefined, fallback: number, min: number, max: number): number {
  const v = value ?? fallback;
  checkTtl(`TtlPolicy ${field}`, v, min, max);
  return v;
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}

/** 86400000 → `1 d`, 90000 → `1.5 min`: the scale of a TTL in an error message. */
export function human(ms: number): string {
  const units: [number, string][] = [
    [24 * 60 * 60 * 1000, 'd'],
    [60 * 60 * 1000, 'h'],
    [60 * 1000, 'min'],
    [1000, 's'],
  ];
  for (const [size, unit] of units) if (ms >= size) return `${Number((ms / size).toFixed(2))} ${unit}`;
  return `${ms} ms`;
}
