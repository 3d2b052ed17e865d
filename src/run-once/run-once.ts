/**
 * `runOnce`: the claim, commit and release contract for code that is not a broker consumer (an
 * HTTP mutation, a scheduled task, a job runner's handler).
 */
import { performance } from 'node:perf_hooks';
import type { AcquiredClaim, Claimer, JsonValue, Receipt } from '../claim/claimer';
import { ConfigurationError, type LeaseLostError, PreviousAttemptFailedError, InProgressError } from '../util/errors';
import { LeaseKeeper } from '../claim/keep-alive';
import { type Outbox, ScopedOutbox, UnavailableOutbox } from '../outbox/staging-outbox';
import { decodeResult, encodeResult } from '../claim/result-codec';
import { assertStorable } from '../util/storable-result';
import { type BackoffPolicy, retry, retryWithin } from '../util/retry';
import { runOnceKey } from './run-once-key';
import { warnUnscopedHttpOnce } from './run-once-scope-check';
import { type ResolvedRunOnceOptions, resolveRunOnceOptions, type RunOnceOptions } from './run-once-options';
import { RECEIPT_RETRY_BACKOFF, releaseWithin, unstorable } from '../claim/settlement';

/**
 * What the function is given.
 * @typeParam TTransaction - the type of `transaction`: a `pg` PoolClient with the PostgreSQL
 *   claimer in transactional mode; `undefined` with other claimers.
 */
export interface RunOnceContext<TTransaction = undefined> {
  /** The scoped claim key. */
  readonly key: string;
  /** 1 on a first run; more on an explicit retry (`retry: true`). */
  readonly attempt: number;
  /** Strictly increasing per key: hand it to downstream stores so they refuse an older owner. */
  readonly fencingToken: number;
  /** Aborted (reason: LeaseLostError) when keep-alive finds the lease taken by a newer owner. */
  readonly signal: AbortSignal;
  /**
   * The claim's transaction with a transactional claimer (the PostgreSQL inbox mode): write the
   * effect through it so it commits with the claim or not at all; never COMMIT, ROLLBACK or
   * release it yourself. Undefined with other claimers.
   */
  readonly transaction: TTransaction;
  /**
   * Stages messages in the claim's transaction (the PostgreSQL claimer in transactional mode):
   * published by an `OutboxRelay` once it committed. Ids are derived from `key` and each message's
   * position, so a retry of the same key stages the same ids; return `outbox.stagedIds` in the
   * result to hand them to a replaying caller. With other claimers every call rejects with
   * `OutboxNotAvailableError`.
   */
  readonly outbox: Outbox;
}

/** How a call ended when it did not throw. */
export type RunOnceResult<T> =
  | {
      /** This call ran the function. */
      readonly status: 'ran';
      /** The function's result as stored: after a JSON round trip, exactly what a replay returns. */
      readonly result: T;
      readonly key: string;
      readonly attempt: number;
      readonly fencingToken: number;
      /**
       * True when the key was committed with the result. False only with a claimer whose claim
       * lives beside the effect (Redis, in-memory) when the commit failed past its deadline or the
       * lease was lost: the effect is applied but not recorded (logged as an error), so a later
       * call finds an unfinished attempt (`PreviousAttemptFailedError`, unless `retry: true`).
       */
      readonly committed: boolean;
    }
  | {
      /** An earlier call completed the key: its stored result, the function not run. */
      readonly status: 'replayed';
      readonly result: T;
      readonly key: string;
    };

/** Polling of a key another caller holds, while `waitMs` lasts. */
const WAIT_BACKOFF: Readonly<BackoffPolicy> = { initialDelayMs: 50, maxDelayMs: 1000, multiplier: 2, jitter: 0.2 };

const RESET_ATTEMPTS = Object.freeze({ resetAttempts: true });

/**
 * The claimers whose `ready()` runOnce has called, and its promise: called once per claimer and
 * shared by concurrent calls; forgotten when it fails, so the next call tries again.
 */
const readied = new WeakMap<Claimer, Promise<void>>();

/** Calls `claimer.ready()` once (a consumer's `start()` does this for a consumer's claimer). */
function readyOnce(claimer: Claimer): Promise<void> | undefined {
  if (!claimer.ready) return undefined;
  let ready = readied.get(claimer);
  if (!ready) {
    ready = claimer.ready();
    readied.set(claimer, ready);
    ready.catch(() => readied.delete(claimer));
  }
  return ready;
}

/**
 * Runs `fn` once per scoped key, across calls, processes and replicas sharing the claim store.
 *
 * - First call: claims the key, runs `fn`, commits its JSON result (bounded by `maxResultBytes`)
 *   and resolves `{ status: 'ran', result }`.
 * - A repeat after that: resolves `{ status: 'replayed', result }` with the stored result, without
 *   running `fn`, for `doneTtlMs`.
 * - A repeat while a run holds the lease: waits up to `waitMs` (polling), then replays, or
 *   rejects with {@link InProgressError} (an HTTP layer answers 409).
 * - `fn` fails: the key is released per `onFailure` and the error is rethrown. With `record`
 *   (default) later calls reject with {@link PreviousAttemptFailedError} until one passes
 *   `retry: true`; with `release` the next call runs `fn` afresh. A run that never settled (its
 *   process crashed) counts as failed under `record`.
 * - With the PostgreSQL claimer in transactional mode `fn` gets the claim's transaction
 *   (`context.transaction`): its writes commit with the key or roll back with a failure.
 *
 * Safe to call concurrently with the same key: exactly one caller runs `fn` at a time. The first
 * call with a claimer runs its `ready()` (for example a Redis client still connecting), once per
 * claimer; a failed `ready()` rejects that call and is tried again by the next.
 * @throws ConfigurationError for invalid options (unknown name, bad TTL, bad scope)
 * @throws InvalidKeyError for an empty key, or one too long with its scope (digest it)
 * @throws KeyConflictError when the key is known with another fingerprint (HTTP 422)
 * @throws InProgressError when another caller's run did not finish within `waitMs` (HTTP 409)
 * @throws PreviousAttemptFailedError when an earlier run failed or did not finish, unless `retry: true`
 * @throws ClaimerUnavailableError when the store fails (retriable; `fn` did not run), also from the
 *   claimer's `ready()` (for example Redis not reachable within its `readyTimeoutMs`)
 * @throws ResultTooLargeError when the result is too large to store, UnstorableResultError when
 *   JSON cannot hold it as it is (a BigInt, a cycle, a function, a Map, NaN or ±Infinity; the
 *   error names the path).
 *   The result is known only once `fn` returned, so both are failures of a run that happened:
 *   released per `onFailure` (with a transaction, `fn`'s writes roll back with the claim)
 * @throws whatever `fn` threw, after the release
 */
export async function runOnce<T extends JsonValue | undefined, TTransaction = undefined>(
  options: RunOnceOptions,
  fn: (context: RunOnceContext<TTransaction>) => T | Promise<T>,
): Promise<RunOnceResult<T>> {
  const o = resolveRunOnceOptions(options);
  if (typeof fn !== 'function') throw new ConfigurationError('runOnce: the second argument must be the function to run');
  const key = runOnceKey(o.scope, o.key);
  warnUnscopedHttpOnce(o.claimer, o.scope, o.logger);
  const claimOptions = Object.freeze({ leaseTtlMs: o.leaseTtlMs, doneTtlMs: o.doneTtlMs, ...(o.fingerprint === undefined ? {} : { fingerprint: o.fingerprint }) });
  const readying = readyOnce(o.claimer);
  if (readying) await readying;
  if (!o.retry && o.claimer.peek) {
    // Refused without taking the lease: calls at the same moment must not read the refusal as a run.
    const peeked = await o.claimer.peek(key);
    if (peeked.state === 'failed') throw new PreviousAttemptFailedError(key, peeked.attempts);
  }
  const now = () => performance.now();
  const started = now();
  let paused = false;
  // A busy key is polled until it is acquired or done, while the pauses fit in waitMs.
  const claim = await retry(() => o.claimer.claim(key, claimOptions), {
    backoff: WAIT_BACKOFF,
    deadlineMs: o.waitMs,
    startedAt: started,
    now,
    retryIf: () => false,
    pending: (result) => result.state === 'busy',
    onRetry: () => void (paused = true),
    // The caller awaits this answer and may have nothing else running (a script's one call).
    keepProcessAlive: true,
  });
  if (claim.state === 'done') return { status: 'replayed', result: claim.result as T, key };
  if (claim.state === 'acquired') return acquired(o, key, claim, fn);
  // Before the first pause the call has not waited: the time so far is the claim's own.
  throw new InProgressError(key, paused ? Math.round(now() - started) : 0);
}

async function acquired<T extends JsonValue | undefined, TTransaction>(
  o: ResolvedRunOnceOptions,
  key: string,
  claim: AcquiredClaim,
  fn: (context: RunOnceContext<TTransaction>) => T | Promise<T>,
): Promise<RunOnceResult<T>> {
  const { receipt, attempt } = claim;
  if (attempt > 1 && !o.retry) {
    // The count is kept: the key stays blocked until an explicit retry.
    await releaseWithin(receipt, o.releaseDeadlineMs, o.logger, undefined, true);
    throw new PreviousAttemptFailedError(key, attempt - 1);
  }
  const abort = new AbortController();
  const keeper = o.keepAlive ? new LeaseKeeper(o.leaseTtlMs, Math.max(1, Math.floor(o.leaseTtlMs / 3))) : undefined;
  const kept = keeper?.keep(receipt, {
    onLost: (error: LeaseLostError) => abort.abort(error),
    onError: (error) => o.logger.warn({ err: error, key }, 'runOnce: lease extend failed; will try again'),
  });
  const context: RunOnceContext<TTransaction> = {
    key,
    attempt,
    fencingToken: receipt.fencingToken,
    signal: abort.signal,
    transaction: receipt.transaction as TTransaction,
    outbox: receipt.outbox ? new ScopedOutbox(receipt.outbox, key) : new UnavailableOutbox('the claimer has no transaction (only the PostgreSQL claimer in transactional mode has one)'),
  };
  let result: T;
  try {
    const value = await fn(context);
    // The result a replay will return: checked, bounded, and round-tripped through JSON now.
    assertStorable(value);
    result = decodeResult(encodeResult(value, o.maxResultBytes)) as T;
  } catch (error) {
    await stopKeeping(kept, keeper);
    await releaseAfterFailure(o, receipt, error);
    throw error;
  }
  await stopKeeping(kept, keeper);
  let commitError: unknown;
  try {
    await retryWithin(() => receipt.commit(result), { deadlineMs: o.commitDeadlineMs, backoff: RECEIPT_RETRY_BACKOFF, keepProcessAlive: true });
  } catch (error) {
    commitError = error;
  }
  if (commitError === undefined) return { status: 'ran', result, key, attempt, fencingToken: receipt.fencingToken, committed: true };
  if (receipt.transaction !== undefined || unstorable(commitError)) {
    // The transaction rolled back with the claim (nothing applied), or the claimer refused the
    // result before writing: a failure of the run, released per the policy.
    await releaseAfterFailure(o, receipt, commitError);
    throw commitError;
  }
  o.logger.error(
    { err: commitError, key, attempt, fencingToken: receipt.fencingToken },
    'runOnce: the function ran but its commit failed; the key is not recorded as done (a later call finds an unfinished attempt)',
  );
  return { status: 'ran', result, key, attempt, fencingToken: receipt.fencingToken, committed: false };
}

async function releaseAfterFailure(o: ResolvedRunOnceOptions, receipt: Receipt, error: unknown): Promise<void> {
  const policy = o.onFailure(error);
  // The caller awaits this answer and may have nothing else running (a job script's one call).
  await releaseWithin(receipt, o.releaseDeadlineMs, o.logger, policy === 'release' ? RESET_ATTEMPTS : undefined, true);
}

async function stopKeeping(kept: { stop(): Promise<void> | undefined } | undefined, keeper: LeaseKeeper | undefined): Promise<void> {
  const extending = kept?.stop();
  keeper?.close();
  if (extending) await extending.catch(() => undefined);
}
