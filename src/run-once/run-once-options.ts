/**
 * Options of {@link runOnce}: meaning, units, defaults and the checks run on every call.
 */
import type { Claimer } from '../claim/claimer';
import { ConfigurationError } from '../util/errors';
import { checkTtl } from '../claim/keys';
import { checkKnownOptions, describeType, optionNames } from '../util/known-options';
import { checkBoolean, checkInteger } from '../util/option-checks';
import { DEFAULT_MAX_RESULT_BYTES, MAX_DONE_TTL_MS, MAX_LEASE_TTL_MS, MIN_LEASE_TTL_MS } from '../util/limits';
import { consoleWarnLogger, guardLogger, type Logger } from '../util/logger';
import type { RunOnceScope } from './run-once-key';
import { checkClaimer } from '../util/wiring-checks';

/**
 * What a failed run leaves behind:
 * - `record`: the key keeps its attempt count (for `doneTtlMs`), and later calls get
 *   `PreviousAttemptFailedError` without running the function, until one passes `retry: true`.
 *   For effects that may be half applied when the function throws (a payment call whose answer
 *   was lost). PostgreSQL inbox status: `failed_retryable` (claimable, the next acquisition
 *   counts as a retry).
 * - `release`: the key is freed with its attempt count reset, and the next call runs the function
 *   as a first attempt. For functions that fail before any effect, or whose effects all go
 *   through the claim's transaction. PostgreSQL inbox status: `failed_permanent` (claimable,
 *   counting starts again at 1).
 */
export type FailurePolicy = 'record' | 'release';

export interface RunOnceOptions {
  /** The claim store (any {@link Claimer}: in-memory, Redis, PostgreSQL). */
  readonly claimer: Claimer;
  /** Where the key belongs: operation, and optionally tenant and actor (see {@link RunOnceScope}). */
  readonly scope: RunOnceScope;
  /** The caller's key (an `Idempotency-Key` header, a job's run id). Non-empty; with its scope at most 512 bytes. */
  readonly key: string;
  /**
   * Digest of what the key stands for (the request body, the job's parameters). A later call with
   * the same key and another fingerprint rejects with `KeyConflictError`. At most 128 characters.
   */
  readonly fingerprint?: string;
  /** Lease length, ms: how long a crashed run blocks the key. 100 ms … 1 day. Kept alive every leaseTtlMs/3 while the function runs. */
  readonly leaseTtlMs: number;
  /** How long a completed key replays its result (and a recorded failure stays recorded), ms. ≥ leaseTtlMs, ≤ 365 days. */
  readonly doneTtlMs: number;
  /**
   * How long to wait for another caller's run of the key before rejecting with `InProgressError`,
   * ms. Default 0 (reject at once). While waiting the key is polled with backoff (50 ms doubling
   * to 1 s); a run that completes is replayed. 0 … 1 day.
   */
  readonly waitMs?: number;
  /**
   * What a failure leaves behind (see {@link FailurePolicy}): a policy, or a function choosing one
   * per error (for example `release` for a validation error thrown before any write). Default
   * `record`; `release` with a transactional claimer ({@link Claimer.transactional}, the
   * PostgreSQL inbox mode), whose failed run rolled its writes back with the claim and so applied
   * nothing (set `record` there when the function also has effects outside the transaction). A
   * failure is: the function threw, its result is not JSON or too large, or (with a transactional
   * claimer) the commit failed.
   */
  readonly onFailure?: FailurePolicy | ((error: unknown) => FailurePolicy);
  /**
   * Run the function even though an earlier run of the key failed or did not finish (the explicit
   * retry after `PreviousAttemptFailedError`). A completed key is still replayed, and a running
   * one still rejects with `InProgressError`. Default false; true with a transactional claimer
   * when `onFailure` is not set (a run that never finished, its process killed mid-transaction,
   * applied nothing either: the next call runs the function).
   */
  readonly retry?: boolean;
  /** Extend the lease while the function runs. Default true. */
  readonly keepAlive?: boolean;
  /** Largest result, bytes of UTF-8 JSON. Default 4096 (the claimers' default bound; a claimer's own smaller bound applies too). */
  readonly maxResultBytes?: number;
  /** Time allowed for the commit with its retries of transient store errors, ms. Default 10 000. */
  readonly commitDeadlineMs?: number;
  /** Time allowed for a release with its retries, ms. Default 5000. */
  readonly releaseDeadlineMs?: number;
  /** Where failed releases and commits are logged. Default: warnings and errors as JSON lines on stderr. */
  readonly logger?: Logger;
}

/** Defaults of the optional fields. */
export const RUN_ONCE_DEFAULTS = {
  waitMs: 0,
  onFailure: 'record',
  retry: false,
  keepAlive: true,
  maxResultBytes: DEFAULT_MAX_RESULT_BYTES,
  commitDeadlineMs: 10_000,
  releaseDeadlineMs: 5000,
} as const;

/** Options with every default applied. */
export type ResolvedRunOnceOptions = Required<Omit<RunOnceOptions, 'fingerprint' | 'onFailure'>> & {
  readonly fingerprint: string | undefined;
  readonly onFailure: (error: unknown) => FailurePolicy;
};

const RUN_ONCE_OPTION_NAMES = optionNames<RunOnceOptions>()([
  'claimer',
  'scope',
  'key',
  'fingerprint',
  'leaseTtlMs',
  'doneTtlMs',
  'waitMs',
  'onFailure',
  'retry',
  'keepAlive',
  'maxResultBytes',
  'commitDeadlineMs',
  'releaseDeadlineMs',
  'logger',
]);

const POLICIES: readonly FailurePolicy[] = ['record', 'release'];

/**
 * Applies the defaults to a copy and checks every field.
 * @throws ConfigurationError naming the field and the value
 */
export function resolveRunOnceOptions(options: RunOnceOptions): ResolvedRunOnceOptions {
  if (!options || typeof options !== 'object') throw new ConfigurationError(`runOnce options are required, got ${describeType(options)}`);
  checkKnownOptions('runOnce options', options, RUN_ONCE_OPTION_NAMES);
  checkClaimer('runOnce: claimer', options.claimer);
  checkTtl('leaseTtlMs', options.leaseTtlMs, MIN_LEASE_TTL_MS, MAX_LEASE_TTL_MS);
  checkTtl('doneTtlMs', options.doneTtlMs, MIN_LEASE_TTL_MS, MAX_DONE_TTL_MS);
  if (options.doneTtlMs < options.leaseTtlMs) throw new ConfigurationError(`doneTtlMs (${options.doneTtlMs}) must be ≥ leaseTtlMs (${options.leaseTtlMs})`);
  const waitMs = options.waitMs ?? RUN_ONCE_DEFAULTS.waitMs;
  checkInteger('waitMs', waitMs, 0, MAX_LEASE_TTL_MS);
  const maxResultBytes = options.maxResultBytes ?? RUN_ONCE_DEFAULTS.maxResultBytes;
  checkInteger('maxResultBytes', maxResultBytes, 1, 1024 * 1024);
  const commitDeadlineMs = options.commitDeadlineMs ?? RUN_ONCE_DEFAULTS.commitDeadlineMs;
  checkInteger('commitDeadlineMs', commitDeadlineMs, 1, 600_000);
  const releaseDeadlineMs = options.releaseDeadlineMs ?? RUN_ONCE_DEFAULTS.releaseDeadlineMs;
  checkInteger('releaseDeadlineMs', releaseDeadlineMs, 1, 600_000);
  // With a transactional claimer a failed run's writes rolled back with its transaction: nothing
  // was applied, so by default a failure does not block the key (see FailurePolicy).
  const rolledBack = options.onFailure === undefined && options.claimer.transactional === true;
  const retry = options.retry ?? (rolledBack ? true : RUN_ONCE_DEFAULTS.retry);
  checkBoolean('retry', retry);
  const keepAlive = options.keepAlive ?? RUN_ONCE_DEFAULTS.keepAlive;
  checkBoolean('keepAlive', keepAlive);
  const policy = options.onFailure ?? (rolledBack ? 'release' : RUN_ONCE_DEFAULTS.onFailure);
  if (typeof policy !== 'function' && !POLICIES.includes(policy)) {
    throw new ConfigurationError(`onFailure must be 'record', 'release' or a function returning one, got ${describeType(policy)}`);
  }
  const logger = options.logger ?? consoleWarnLogger;
  if (!logger || typeof logger !== 'object' || (['debug', 'info', 'warn', 'error'] as const).some((m) => typeof logger[m] !== 'function')) {
    throw new ConfigurationError('logger must be a pino-compatible logger with debug, info, warn and error methods');
  }
  return {
    claimer: options.claimer,
    scope: options.scope,
    key: options.key,
    fingerprint: options.fingerprint,
    leaseTtlMs: options.leaseTtlMs,
    doneTtlMs: options.doneTtlMs,
    waitMs,
    onFailure: typeof policy === 'function' ? checkedPolicy(policy) : () => policy,
    retry,
    keepAlive,
    maxResultBytes,
    commitDeadlineMs,
    releaseDeadlineMs,
    logger: guardLogger(logger),
  };
}

/** A caller's policy function whose answer is checked; a bad answer (or a throw) means `record`, the safe side. */
function checkedPolicy(choose: (error: unknown) => FailurePolicy): (error: unknown) => FailurePolicy {
  return (error) => {
    try {
      const chosen = choose(error);
      return POLICIES.includes(chosen) ? chosen : 'record';
    } catch {
      return 'record';
    }
  };
}

