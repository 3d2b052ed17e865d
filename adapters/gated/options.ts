/**
 * Options and dependencies of the gated claimer: TSDoc gives meaning, unit, default and range;
 * defaults live in one `Readonly<Required<…>>` constant; `resolveGatedOptions` merges into a copy
 * and validates at construction, naming the field and the value.
 */
import { type Claimer, type Clock, ConfigurationError, consoleWarnLogger, type Logger } from '../../src';
import { checkClaimer, checkInteger, checkKnownOptions, describeType, optionNames, monotonicClock } from '../../src/adapter-kit';

/** What the gated claimer is given: two claimers the application built, and optionally a logger and a clock. */
export interface GatedClaimerDependencies {
  /**
   * The fast claimer in front: a `RedisClaimer` (`twophase/redis`). Give it a short
   * `operationTimeoutMs` (for example 200): that deadline is how long a paused or slow Redis can
   * hold a claim before the gated claimer falls back to `truth` alone. Its `maxResultBytes` should
   * be at least the truth's, or the results it cannot hold are served from the truth instead.
   */
  readonly gate: Claimer;
  /**
   * The claimer of record: a `PostgresClaimer` (`twophase/postgres`), normally in
   * `mode: 'transactional'` so the claim commits or vanishes with the handler's effect. Every
   * claim the gate cannot answer (no entry, an outage) is decided here.
   */
  readonly truth: Claimer;
  /** Where the fallback and recovery lines go. Default: the core's `consoleWarnLogger`. */
  readonly logger?: Logger;
  /** Monotonic clock, ms, for the fallback window only. Default `performance.now()`. */
  readonly clock?: Clock;
}

/** Options of `GatedClaimer`. */
export interface GatedClaimerOptions {
  /**
   * After the gate fails (it rejected with `ClaimerUnavailableError`: Redis down, or slower than
   * its own `operationTimeoutMs`), claims skip the gate and go to the truth alone for this many
   * ms; the first claim after that tries the gate again, so the gated claimer returns to the gate
   * by itself when Redis is back. Default 1000; range [0, 600000] (0: try the gate on every claim).
   */
  readonly gateRetryMs?: number;
}

/** The options after defaults and validation. */
export type ResolvedGatedClaimerOptions = Readonly<Required<GatedClaimerOptions>>;

/** Defaults of {@link GatedClaimerOptions}. */
export const GATED_CLAIMER_DEFAULTS: ResolvedGatedClaimerOptions = {
  gateRetryMs: 1000,
};

const OPTION_NAMES = optionNames<GatedClaimerOptions>()(['gateRetryMs']);
const DEPENDENCY_NAMES = optionNames<GatedClaimerDependencies>()(['gate', 'truth', 'logger', 'clock']);

/**
 * Merges `options` over the defaults into a new object and validates every field.
 * @throws ConfigurationError naming the field and the value (unknown fields included)
 */
export function resolveGatedOptions(options: GatedClaimerOptions = {}): ResolvedGatedClaimerOptions {
  checkKnownOptions('GatedClaimer options', options, OPTION_NAMES);
  const gateRetryMs = options.gateRetryMs ?? GATED_CLAIMER_DEFAULTS.gateRetryMs;
  checkInteger('GatedClaimer option gateRetryMs', gateRetryMs, 0, 600_000, 'ms');
  return { gateRetryMs };
}

/** The dependencies after checks and defaults. */
export interface ResolvedGatedDependencies {
  readonly gate: Claimer;
  readonly truth: Claimer;
  readonly logger: Logger;
  readonly clock: Clock;
}

/**
 * Checks the two claimers and fills the defaults.
 * @throws ConfigurationError for a missing or non-claimer `gate` or `truth`, a transactional
 *   `gate` (swapped with the truth), the same object as both, or an unknown dependency name
 */
export function resolveGatedDependencies(dependencies: GatedClaimerDependencies): ResolvedGatedDependencies {
  if (dependencies === undefined || dependencies === null || typeof dependencies !== 'object') {
    throw new ConfigurationError(`GatedClaimer needs { gate, truth }: two claimers, got ${describeType(dependencies)}`);
  }
  checkKnownOptions('GatedClaimer dependencies', dependencies, DEPENDENCY_NAMES);
  for (const role of ['gate', 'truth'] as const) checkClaimer(`GatedClaimer dependency ${role}`, dependencies[role]);
  if (dependencies.gate.transactional === true || dependencies.gate.sharesTransactions === true) {
    // The handler runs in the truth's transaction only; a transaction opened by the gate would
    // commit empty while the effect ran outside any claim's transaction.
    throw new ConfigurationError(
      "GatedClaimer: the gate is a transactional claimer, but the handler's effect runs only in the truth's transaction. " +
        "A PostgresClaimer { mode: 'transactional' } goes in truth; gate and truth swapped? The gate is the fast store in front (a RedisClaimer).",
    );
  }
  if (dependencies.gate === dependencies.truth) {
    throw new ConfigurationError('GatedClaimer: gate and truth are the same claimer; the gate must be a separate, faster store (a RedisClaimer) in front of the truth');
  }
  return {
    gate: dependencies.gate,
    truth: dependencies.truth,
    logger: dependencies.logger ?? consoleWarnLogger,
    clock: dependencies.clock ?? monotonicClock,
  };
}
