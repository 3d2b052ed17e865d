/**
 * The claim contract: the only thing the consumer pipeline knows about a claim store.
 *
 * For each delivery the consumer calls `claim(key, options)` and gets one of three states:
 * - `acquired`: this caller now holds a lease on the key and must settle the {@link Receipt}
 *   (commit after the effect, or release so the key can be claimed again);
 * - `done`: a previous owner committed; the stored result, if any, is attached;
 * - `busy`: another owner holds a live lease.
 *
 * Rules every implementation follows (proved by `test/conformance/claimer-conformance.ts`):
 * - a store failure rejects with {@link ClaimerUnavailableError}, never a guessed state;
 * - a stored fingerprint that differs from the given one rejects with {@link KeyConflictError};
 * - concurrent claims of one key give exactly one `acquired`;
 * - the fencing token strictly increases each time a key is acquired, takeovers included;
 * - a receipt's operations compare the owner token before acting (see {@link Receipt}).
 */
import type { OutboxWriter } from '../outbox/ports';
import type { ClaimerUnavailableError, KeyConflictError } from '../util/errors';

/** A JSON value, as stored with a commit. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** Where the claimer keeps its state: process memory, or a store shared by every replica. */
export type ClaimerKind = 'in_memory' | 'distributed';

/** Options of one claim. Validated by {@link twophase/adapter-kit!validateClaimOptions}. */
export interface ClaimOptions {
  /** How long the lease lives without an extend, in milliseconds. > 0. */
  readonly leaseTtlMs: number;
  /** How long a committed key is remembered as done, in milliseconds. ≥ leaseTtlMs. */
  readonly doneTtlMs: number;
  /**
   * Optional digest of the payload. When the key's record holds a different fingerprint, the
   * claim rejects with {@link KeyConflictError}. At most 128 characters.
   */
  readonly fingerprint?: string;
}

/** The three claim states. */
export type ClaimState = 'acquired' | 'done' | 'busy';

/** The answer to a claim. Every state carries a receipt; only `acquired` receipts hold a lease. */
export type ClaimResult = AcquiredClaim | DoneClaim | BusyClaim;

export interface AcquiredClaim {
  readonly state: 'acquired';
  readonly receipt: Receipt;
  /** How many times this key was acquired, this time included (1 on the first attempt). */
  readonly attempt: number;
}

export interface DoneClaim {
  readonly state: 'done';
  /** A non-acquired receipt: its operations reject with `NoLeaseError`. */
  readonly receipt: Receipt;
  /** The JSON result the committing owner stored, or undefined when it stored none. */
  readonly result?: JsonValue;
}

export interface BusyClaim {
  readonly state: 'busy';
  /** A non-acquired receipt: its operations reject with `NoLeaseError`. */
  readonly receipt: Receipt;
}

/**
 * The handle on one claim.
 *
 * Compare-token-then-act: each operation acts only while the key is still this owner's.
 * - After a takeover by a newer owner, `commit` and `extend` reject with `LeaseLostError`, and
 *   `release` resolves without touching the new owner's lease. A lease-lost outcome is final:
 *   repeating the call rejects with the same error.
 * - A repeated `commit` (or `release`) after it succeeded resolves as a no-op.
 * - `commit` after `release`, or `release` after `commit`, rejects with `ReceiptStateError`.
 * - A transient store error rejects with `ClaimerUnavailableError` and leaves the receipt usable.
 * - The last three rules hold also when the earlier call landed in the store but its reply was
 *   lost (the call rejected with `ClaimerUnavailableError`): the store recognises this owner's own
 *   commit or release by its owner token and fencing token. So a retried commit whose first try
 *   landed resolves (the key is committed), and a release after it rejects with
 *   `ReceiptStateError`; only a newer owner makes commit reject with `LeaseLostError`.
 * - A lease that expired with no newer owner is still this owner's: commit and extend succeed.
 * - On a non-acquired receipt (`done`, `busy`) every operation rejects with `NoLeaseError`.
 */
export interface Receipt {
  readonly key: string;
  /** True only for the receipt of an `acquired` claim. */
  readonly acquired: boolean;
  /** Random token identifying this owner; empty on a non-acquired receipt. */
  readonly ownerToken: string;
  /**
   * Strictly increasing per key across acquisitions, takeovers included; 0 on a non-acquired
   * receipt. Give it to a downstream store so it can refuse writes from an older owner.
   */
  readonly fencingToken: number;
  /**
   * Optional: a per-delivery resource the claimer opened with this claim, which the handler's
   * effect must go through — for the PostgreSQL claimer in transactional mode, the transaction's
   * client. When set, the effect commits with `commit()` and vanishes with `release()`; the
   * consumer passes it to the handler as `ctx.transaction`, acks only after `commit()` succeeded,
   * and when the commit failed (the effect was rolled back with the claim) releases the receipt
   * and requeues.
   * Undefined for claimers whose claim lives beside the effect (Redis, in-memory).
   */
  readonly transaction?: unknown;
  /**
   * Optional: stages outbox rows into {@link Receipt.transaction}, so they commit with the claim
   * and the effect (the PostgreSQL claimer in transactional mode). The consumer and `runOnce`
   * expose it as `ctx.outbox`. Undefined for claimers without a transaction.
   */
  readonly outbox?: OutboxWriter;
  /**
   * Optional: set when this receipt's transaction is shared with other receipts of the same
   * `claimMany` call (the PostgreSQL claimer's `transactionBatch: 'per-chunk'`): the shared
   * transaction COMMITs once every member receipt committed, and rolls back, for every member,
   * as soon as one member is released or the transaction fails. Undefined otherwise.
   */
  readonly sharedTransaction?: SharedTransaction;
  /**
   * Marks the key done for `doneTtlMs`, storing `result` (JSON, at most the claimer's
   * `maxResultBytes`, default 4096 bytes UTF-8).
   * @throws ResultTooLargeError before anything is written when the result is too large
   * @throws LeaseLostError when a newer owner took the key
   * @throws ReceiptStateError after release
   * @throws ClaimerUnavailableError on a store failure (retriable)
   * @throws NoLeaseError on a non-acquired receipt
   */
  commit(result?: JsonValue): Promise<void>;
  /**
   * Gives the key up so it can be claimed again at once. Leaves a newer owner's lease alone.
   * The attempt count is kept (the next acquisition is attempt n+1) unless
   * `options.resetAttempts` is true: the consumer resets it when it dead-letters a message, so a
   * replay from the dead-letter queue starts again at attempt 1; or `options.uncountAttempt` is
   * true: the consumer gives a key back that way when a shutdown stopped its handler, so the next
   * acquisition is attempt n again. The fencing token keeps rising.
   * @throws ReceiptStateError after commit
   * @throws ClaimerUnavailableError on a store failure (retriable)
   * @throws NoLeaseError on a non-acquired receipt
   */
  release(options?: ReleaseOptions): Promise<void>;
  /**
   * Sets the lease to expire `ttlMs` milliseconds from now (store time).
   * @throws LeaseLostError when a newer owner took the key
   * @throws ReceiptStateError after commit or release
   * @throws ClaimerUnavailableError on a store failure (retriable)
   * @throws NoLeaseError on a non-acquired receipt
   */
  extend(ttlMs: number): Promise<void>;
}

/**
 * A transaction shared by the receipts of one batch claim (see {@link Receipt.sharedTransaction}).
 *
 * By default `commit()` of a member resolves only once the shared transaction committed (or
 * rejects once it rolled back), so it waits for the other members' handlers: a source that runs a
 * batch's handlers one after the other must {@link SharedTransaction.adopt | adopt} it instead.
 */
export interface SharedTransaction {
  /**
   * Called by a source that waits for {@link SharedTransaction.outcome} itself before it
   * acknowledges any member to its broker (the Kafka source). From then on, `commit()` of a
   * member that is not the last to settle resolves once its completion is recorded in the shared
   * transaction — not yet durable — so the next member's handler can run. Safe to repeat.
   */
  adopt(): void;
  /**
   * Resolves true once the shared transaction committed (every member's effect and completion
   * are durable), false once it rolled back (a member was released, COMMIT failed, or the
   * session ended). Never rejects.
   */
  readonly outcome: Promise<boolean>;
}

/** Options of {@link Receipt.release}. */
export interface ReleaseOptions {
  /** Forget the key's attempt count, so its next acquisition is attempt 1. Default false. */
  readonly resetAttempts?: boolean;
  /**
   * This attempt does not count (a shutdown stopped its handler): the key's attempt count goes
   * back by one, so its next acquisition has this attempt's number again. Ignored with
   * `resetAttempts`. Default false. A claimer that does not support it keeps the count.
   */
  readonly uncountAttempt?: boolean;
}

/** One entry of a batch claim. */
/**
 * The state of a key as {@link Claimer.peek} reads it:
 * - `absent`: no record (never claimed, forgotten, or released with its count reset): a claim
 *   would be attempt 1;
 * - `done`: completed and retained;
 * - `busy`: a live lease;
 * - `failed`: an earlier attempt was released keeping its count, or its lease ended without a
 *   commit: a claim would be attempt `attempts + 1`.
 */
export interface KeyPeek {
  readonly state: 'absent' | 'done' | 'busy' | 'failed';
  /** Attempts counted for the key (0 when `absent`). */
  readonly attempts: number;
}

export interface ClaimRequest {
  readonly key: string;
  readonly options: ClaimOptions;
}

/** One answer of a batch claim: the result, or the error that claim alone rejected with. */
export type ClaimManyEntry =
  | { readonly ok: true; readonly result: ClaimResult }
  | { readonly ok: false; readonly error: Error };

/** One entry of a batch commit: the receipt of an acquired claim and the result to store. */
export interface CommitRequest {
  readonly receipt: Receipt;
  /** The JSON result to store with the commit, as for {@link Receipt.commit}; undefined for none. */
  readonly result?: JsonValue;
}

/** One answer of a batch commit: done, or the error that receipt's commit alone rejected with. */
export type CommitManyEntry = { readonly ok: true } | { readonly ok: false; readonly error: Error };

/** A claim store. Implementations: `InMemoryClaimer` (core), `RedisClaimer` (`twophase/redis`). */
export interface Claimer {
  /** Reported by the implementation itself; startup validation relies on it. */
  readonly kind: ClaimerKind;
  /**
   * Optional: what the claimer says about itself on the consumer's start line, as flat fields
   * (the PostgreSQL claimer: `{ mode: 'transactional', schema: 'twophase' }`). Called once per
   * consumer start; must not throw or touch the store.
   */
  describe?(): Readonly<Record<string, string | number | boolean>>;
  /**
   * Optional: a warning about running a consumer with `concurrency` deliveries in flight on this
   * claimer, or undefined (the PostgreSQL claimer in transactional mode: a pool smaller than the
   * concurrency). The consumer logs it once at start, after `ready()`. Must not throw.
   */
  startWarning?(options: { readonly concurrency: number }): string | undefined;
  /**
   * Optional: true when every acquired receipt carries a transaction the handler's effect must go
   * through ({@link Receipt.transaction}; the PostgreSQL claimer in `transactional` mode). The
   * consumer then refuses `failOpen: true` at construction with a `ConfigurationError`: an
   * unguarded run has no claim, so it would have no transaction either.
   */
  readonly transactional?: boolean;
  /**
   * Optional: true when {@link Claimer.claimMany} hands out receipts that share one transaction
   * ({@link Receipt.sharedTransaction}; the PostgreSQL claimer with `transactionBatch:
   * 'per-chunk'`). A member's commit then waits for the whole batch, so only a source that adopts
   * the shared transaction (`MessageSource.adoptsSharedTransactions`, the Kafka source) may
   * claim ahead with it: the consumer refuses any other source that claims ahead
   * (`MessageSource.claimsAhead`) at construction with a `ConfigurationError`.
   */
  readonly sharesTransactions?: boolean;
  /**
   * Optional: reads the state of `key` without writing anything or taking its lease. `runOnce`
   * asks it before claiming, so a call it refuses (an earlier run failed) never holds the lease,
   * which calls made at the same moment would read as a run in progress. A claimer without it is
   * claimed as usual (the refusal then holds the lease for one round trip).
   * @throws InvalidKeyError for an empty, non-string or too long key
   * @throws ClaimerUnavailableError when the store fails or passes its deadline
   */
  peek?(key: string): Promise<KeyPeek>;
  /**
   * Claims `key`.
   * @throws InvalidKeyError for an empty, non-string or too long key
   * @throws ConfigurationError for invalid TTLs
   * @throws KeyConflictError when the stored fingerprint differs
   * @throws ClaimerUnavailableError when the store fails or passes its deadline
   */
  claim(key: string, options: ClaimOptions): Promise<ClaimResult>;
  /**
   * Optional batch form: claims every request in one store round trip where the store allows.
   * Entries come back in request order; one failing entry does not fail the others. Rejects as a
   * whole only with {@link ClaimerUnavailableError}.
   */
  claimMany?(requests: readonly ClaimRequest[]): Promise<ClaimManyEntry[]>;
  /**
   * Optional batch form of {@link Receipt.commit}: commits every request's receipt, in one store
   * round trip where the store allows (the receipts of this claimer's own claims). Each entry
   * follows the receipt rules exactly as `request.receipt.commit(request.result)` would (a repeat
   * resolves; after release `ReceiptStateError`; a newer owner `LeaseLostError`; a store failure
   * `ClaimerUnavailableError`, the receipt staying usable; a non-acquired receipt `NoLeaseError`;
   * a result over the size limit `ResultTooLargeError`). Entries come back in request order; one
   * failing entry does not fail the others, and the call as a whole never rejects for an entry.
   * Safe to repeat: committed receipts resolve again as no-ops.
   * @throws ConfigurationError when `requests` is not an array (an entry without a receipt fails
   *   alone, with ConfigurationError)
   */
  commitMany?(requests: readonly CommitRequest[]): Promise<CommitManyEntry[]>;
  /** Optional: checks the store at startup (reachability, eviction policy). Called by `start()`. */
  ready?(): Promise<void>;
}

export type { ClaimerUnavailableError, KeyConflictError };
