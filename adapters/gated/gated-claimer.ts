/**
 * GatedClaimer: a fast gate (Redis) in front of a claimer of record (PostgreSQL, in the effect's
 * transaction).
 */
import { type Claimer, type ClaimerKind, type ClaimOptions, type ClaimResult, isRetriable, type JsonValue, KeyConflictError, type Logger, type Receipt } from '../../src';
import { validateClaimOptions, type KeyPeek, validateKey } from '../../src/adapter-kit';
import { GateWindow } from './gate-window';
import { type GateSide, GatedReceipt } from './gated-receipt';
import {
  type GatedClaimerDependencies,
  type GatedClaimerOptions,
  resolveGatedDependencies,
  resolveGatedOptions,
  type ResolvedGatedClaimerOptions,
} from './options';

/** Counters of one GatedClaimer since construction. Read them through {@link GatedClaimer.stats}. */
export interface GatedClaimerStats {
  /** Claims the gate answered alone (`done` with its stored result, or `busy`): no truth call. */
  gateAnswers: number;
  /** Claims the truth decided after the gate let them through (the gate held no entry). */
  truthClaims: number;
  /** `done` answers of the truth copied into the gate (the gate had lost or never had the entry). */
  repopulated: number;
  /** Claims sent to the truth alone because the gate was down (failed now, or within `gateRetryMs`). */
  fallbackClaims: number;
  /** Claims sent to the truth because the gate held another fingerprint for the key. */
  conflictChecks: number;
  /** Gate operations that failed (absorbed: the truth decided, or the gate lease was left to expire). */
  gateFailures: number;
}

/**
 * A {@link Claimer} made of two: a fast **gate** (a `RedisClaimer`) in front of the claimer of
 * record, the **truth** (a `PostgresClaimer`, normally in `transactional` mode). Its kind is the
 * truth's. Layout and reasoning: docs/gated.md.
 *
 * | case | what happens |
 * |---|---|
 * | the gate holds the key done | `done` with the gate's stored result; the truth is not asked |
 * | the gate holds a live lease | `busy` (the consumer requeues after `busyRequeueDelayMs`); the truth is not asked |
 * | the gate has no entry (new key, expired, flushed, evicted) | the gate lease is taken, then the truth claims: `acquired` (the handler runs in the truth's transaction), `done` (its result is copied to the gate with `doneTtlMs`: repopulated), `busy` (the gate lease is given up) |
 * | the gate is down or slower than its deadline | the truth alone decides, for `gateRetryMs`; then the gate is tried again |
 * | the gate holds another fingerprint | the truth decides (it may have forgotten a rolled-back attempt the gate still remembers) |
 *
 * **The gate is never ahead of the truth.** The gate says `done` only for a key whose truth
 * commit succeeded first: the result is copied to the gate after the truth's COMMIT, never before
 * it and never instead of it, and a truth commit that failed gives the gate lease up. Both holes
 * of an asynchronous or gate-first design are closed (docs/gated.md): a gate that loses its entry
 * (restart, flush, eviction) costs one truth read, never a repeated effect, because the truth holds
 * the key; and an effect that rolls back never leaves the key marked done in the gate.
 *
 * **Cost.** A duplicate of a completed key, and a concurrent duplicate of a key in flight, cost
 * one gate round trip and no truth round trip while the gate is up. A new key costs two gate
 * round trips more: the gate's claim before the truth's, and its commit after the truth's
 * COMMIT (awaited before `commit()` resolves, so before the broker ack; bounded by the gate's
 * own deadline).
 *
 * **Failures.** A gate failure never fails a claim: the truth decides instead (slower, still
 * correct). A truth failure fails the claim (`ClaimerUnavailableError`): the truth is the
 * record, and the gated claimer fails closed like it. `claimMany` is not offered.
 */
export class GatedClaimer implements Claimer {
  /** The truth's kind (`distributed` for a PostgresClaimer). */
  readonly kind: ClaimerKind;
  /** The truth's: true when the handler's effect goes through the truth's transaction (`failOpen` is then refused). */
  readonly transactional: boolean;

  private readonly gate: Claimer;
  private readonly truth: Claimer;
  private readonly logger: Logger;
  private readonly window: GateWindow;
  private readonly options: ResolvedGatedClaimerOptions;
  private readonly counters: GatedClaimerStats = { gateAnswers: 0, truthClaims: 0, repopulated: 0, fallbackClaims: 0, conflictChecks: 0, gateFailures: 0 };

  private readonly side: GateSide = {
    commit: async (gate, result) => {
      if (!gate) return;
      if (!this.window.usable()) return; // down: the gate lease expires by itself
      try {
        await gate.commit(result);
      } catch (error) {
        this.gateFailed('commit', error);
        await this.side.release(gate);
      }
    },
    release: async (gate, options) => {
      if (!gate || !this.window.usable()) return;
      try {
        await gate.release(options);
      } catch (error) {
        this.gateFailed('release', error);
      }
    },
    extend: async (gate, ttlMs) => {
      if (!gate || !this.window.usable()) return;
      try {
        await gate.extend(ttlMs);
      } catch (error) {
        this.gateFailed('extend', error);
      }
    },
  };

  /**
   * @param dependencies `{ gate, truth }`: the two claimers, built by the application (and
   *   optionally `logger`, `clock`)
   * @param options see {@link GatedClaimerOptions}
   * @throws ConfigurationError for a missing or invalid claimer, the same claimer twice, or an
   *   unknown or invalid option
   */
  constructor(dependencies: GatedClaimerDependencies, options: GatedClaimerOptions = {}) {
    this.options = resolveGatedOptions(options);
    const resolved = resolveGatedDependencies(dependencies);
    this.gate = resolved.gate;
    this.truth = resolved.truth;
    this.logger = resolved.logger;
    this.kind = this.truth.kind;
    this.transactional = this.truth.transactional === true;
    this.window = new GateWindow(this.options.gateRetryMs, resolved.clock, this.logger);
    const truth = this.truth;
    if (truth.peek) this.peek = (key) => truth.peek!(key);
  }

  /**
   * Reads the key's state from the truth (the gate may hold less, or nothing): present when the
   * truth has `peek` (a PostgresClaimer has). See {@link Claimer.peek}.
   */
  readonly peek?: (key: string) => Promise<KeyPeek>;

  /** A copy of the counters. */
  get stats(): Readonly<GatedClaimerStats> {
    return { ...this.counters };
  }

  /** The options in force, defaults applied. */
  get settings(): ResolvedGatedClaimerOptions {
    return this.options;
  }

  /**
   * For the consumer's start line: each part's store, and the truth's and gate's own details
   * prefixed (`{ store: 'gated', gate: 'redis', gatePrefix, truth: 'postgresql', truthMode,
   * truthSchema }`; a part without `describe()` is named by its kind). See {@link Claimer.describe}.
   */
  describe(): Readonly<Record<string, string | number | boolean>> {
    return { store: 'gated', ...partDetails('gate', this.gate), ...partDetails('truth', this.truth) };
  }

  /** True while the gate is considered down (claims go to the truth alone). */
  get gateDown(): boolean {
    return this.window.isDown;
  }

  /**
   * Checks both stores (called by the consumer's `start()`). The truth must be ready: its errors
   * are thrown. A gate that is unreachable only starts the consumer in fallback (logged); a gate
   * misconfiguration (a non-retriable error) is thrown.
   * @throws whatever the truth's `ready()` throws (SchemaMismatchError, ClaimerUnavailableError)
   * @throws ConfigurationError from the gate's `ready()`
   */
  async ready(): Promise<void> {
    const [truth, gate] = await Promise.allSettled([this.truth.ready?.(), this.gate.ready?.()]);
    if (truth.status === 'rejected') throw truth.reason;
    if (gate.status === 'rejected') {
      if (!isRetriable(gate.reason)) throw gate.reason;
      this.gateFailed('ready', gate.reason);
    }
  }

  /**
   * Claims `key`: the gate first, the truth when the gate cannot answer (see the class table).
   * @throws InvalidKeyError, ConfigurationError for a bad key or TTLs
   * @throws KeyConflictError when the truth holds another fingerprint
   * @throws ClaimerUnavailableError when the truth fails (a gate failure alone never fails a claim)
   */
  async claim(key: string, options: ClaimOptions): Promise<ClaimResult> {
    validateKey(key);
    validateClaimOptions(options);
    if (!this.window.usable()) {
      this.counters.fallbackClaims++;
      return this.truth.claim(key, options);
    }
    let gated: ClaimResult;
    try {
      gated = await this.gate.claim(key, options);
    } catch (error) {
      if (error instanceof KeyConflictError) {
        this.counters.conflictChecks++;
        return this.truth.claim(key, options);
      }
      if (!isRetriable(error)) throw error;
      this.gateFailed('claim', error);
      this.counters.fallbackClaims++;
      return this.truth.claim(key, options);
    }
    this.window.succeeded();
    if (gated.state !== 'acquired') {
      this.counters.gateAnswers++;
      return gated;
    }
    return this.decideInTruth(key, options, gated.receipt);
  }

  /** The gate let the claim through and holds a lease for it: the truth decides. */
  private async decideInTruth(key: string, options: ClaimOptions, gate: Receipt): Promise<ClaimResult> {
    let truth: ClaimResult;
    try {
      truth = await this.truth.claim(key, options);
    } catch (error) {
      await this.side.release(gate);
      throw error;
    }
    this.counters.truthClaims++;
    switch (truth.state) {
      case 'acquired':
        return { state: 'acquired', attempt: truth.attempt, receipt: new GatedReceipt(truth.receipt, gate, this.side) };
      case 'done':
        // Committed in the truth, absent from the gate: copy it, with the done TTL.
        this.counters.repopulated++;
        await this.side.commit(gate, truth.result as JsonValue | undefined);
        return truth;
      case 'busy':
        await this.side.release(gate);
        return truth;
    }
  }

  /** Records a failed gate operation. Outages open the fallback window; other errors are logged at debug. */
  private gateFailed(operation: string, error: unknown): void {
    this.counters.gateFailures++;
    if (isRetriable(error)) this.window.failed(operation, error);
    else this.logger.debug({ component: 'GatedClaimer', operation, err: error }, 'twophase: a gate operation failed; the truth keeps deciding');
  }
}

/** `{ gate: 'redis', gatePrefix: 'twophase' }` from the gate's `{ store: 'redis', prefix: 'twophase' }`. */
function partDetails(role: 'gate' | 'truth', claimer: Claimer): Record<string, string | number | boolean> {
  const { store, ...rest } = claimer.describe?.() ?? {};
  const details: Record<string, string | number | boolean> = { [role]: store ?? claimer.kind };
  for (const [name, value] of Object.entries(rest)) details[`${role}${name[0]!.toUpperCase()}${name.slice(1)}`] = value;
  return details;
}
