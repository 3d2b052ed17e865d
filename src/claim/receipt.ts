/**
 * Receipts: the settlement rules of the claim contract, written once for every claimer.
 *
 * A claimer supplies the store primitives ({@link LeaseOperations}); {@link LeaseReceipt} turns
 * them into the contract's repeat and ordering rules, so every claimer behaves the same.
 */
import type { JsonValue, Receipt, ReleaseOptions } from './claimer';
import {
  ClaimerUnavailableError,
  LeaseLostError,
  NoLeaseError,
  ReceiptStateError,
  TwophaseError,
} from '../util/errors';
import { checkTtl } from './keys';
import { MAX_LEASE_TTL_MS, MIN_LEASE_TTL_MS } from '../util/limits';
import { encodeResult } from './result-codec';

/**
 * What a store primitive reports:
 * - `ok`: it acted (or found its own identical earlier action: a repeat);
 * - `committed`: the key is done by this same lease (same owner token / fencing token): its own
 *   commit landed earlier, for example a commit whose reply was lost;
 * - `released`: this same lease released the key earlier and nobody claimed it since;
 * - `lost`: the key belongs to a newer owner, or the record is gone.
 * The `committed` and `released` answers let a receipt that never heard its earlier operation's
 * reply tell "my own operation landed" from "a newer owner took the key".
 */
export type LeaseOutcome = 'ok' | 'committed' | 'released' | 'lost';

/** Identity of one acquisition of a key. */
export interface LeaseIdentity {
  readonly key: string;
  readonly ownerToken: string;
  readonly fencingToken: number;
}

/**
 * Store primitives behind a receipt. Each acts only when the record is still this owner's
 * (same owner token, no newer fencing token). When the record is this owner's but already done
 * or released by it, each reports `committed` or `released` (a commit may report `ok` for its
 * own repeat); `lost` when a newer owner holds the key or the record is gone. Transient failures
 * reject (or throw) with {@link ClaimerUnavailableError}; any other error is wrapped in one.
 *
 * A store in process memory may answer synchronously (the outcome itself, not a promise): the
 * receipt then settles its operation without waiting a turn for the answer.
 */
export interface LeaseOperations {
  /** Marks the key done for `doneTtlMs` ms with the encoded JSON result (or none). */
  commit(lease: LeaseIdentity, resultJson: string | undefined, doneTtlMs: number): LeaseOutcome | Promise<LeaseOutcome>;
  /**
   * Ends this owner's lease so the key can be claimed again; with `resetAttempts`, also zeroes
   * the attempt count; else with `uncountAttempt`, takes this attempt off the count (the next
   * acquisition repeats its number). A store that ignores `uncountAttempt` keeps the count.
   */
  release(lease: LeaseIdentity, resetAttempts: boolean, uncountAttempt?: boolean): LeaseOutcome | Promise<LeaseOutcome>;
  /** Sets this owner's lease to expire `ttlMs` ms from now. */
  extend(lease: LeaseIdentity, ttlMs: number): LeaseOutcome | Promise<LeaseOutcome>;
}

type Settled = 'committed' | 'released' | 'lost';

const RESOLVED: Promise<void> = Promise.resolve();

/** The receipt of an acquired claim. Operations on one receipt run one at a time, in call order. */
export class LeaseReceipt implements Receipt {
  readonly acquired = true;
  private settled: Settled | undefined = undefined;
  private lostError: LeaseLostError | undefined = undefined;
  /** The last operation called (it may reject); a later call waits for it when `pending` > 0. */
  private last: Promise<void> = RESOLVED;
  /** Operations called and not finished (running or waiting their turn). */
  private pending = 0;

  constructor(
    private readonly lease: LeaseIdentity,
    private readonly operations: LeaseOperations,
    private readonly doneTtlMs: number,
    private readonly maxResultBytes: number,
  ) {}

  get key(): string {
    return this.lease.key;
  }

  get ownerToken(): string {
    return this.lease.ownerToken;
  }

  get fencingToken(): number {
    return this.lease.fencingToken;
  }

  commit(result?: JsonValue): Promise<void> {
    // Size check before anything is queued or written.
    let encoded: string | undefined;
    try {
      encoded = encodeResult(result, this.maxResultBytes);
    } catch (error) {
      return Promise.reject(error);
    }
    // Counted in `pending` at once; the common case (nothing in flight) runs now, without a closure.
    if (this.pending++ === 0) return (this.last = this.commitNow(encoded));
    return this.queue(() => this.commitNow(encoded));
  }

  release(options?: ReleaseOptions): Promise<void> {
    const reset = options?.resetAttempts === true;
    const uncount = !reset && options?.uncountAttempt === true;
    if (this.pending++ === 0) return (this.last = this.releaseNow(reset, uncount));
    return this.queue(() => this.releaseNow(reset, uncount));
  }

  extend(ttlMs: number): Promise<void> {
    try {
      checkTtl('ttlMs', ttlMs, MIN_LEASE_TTL_MS, MAX_LEASE_TTL_MS);
    } catch (error) {
      return Promise.reject(error);
    }
    if (this.pending++ === 0) return (this.last = this.extendNow(ttlMs));
    return this.queue(() => this.extendNow(ttlMs));
  }

  /**
   * Each `…Now` runs one operation and counts it finished (`pending`) in the same step that
   * settles its promise, so the caller's continuation already sees it done.
   */
  private commitNow(encoded: string | undefined): Promise<void> {
    if (this.settled === 'committed') return this.finished(RESOLVED);
    if (this.settled === 'released') return this.finished(Promise.reject(new ReceiptStateError(this.key, 'commit', 'released')));
    if (this.settled === 'lost') return this.finished(Promise.reject(this.lostError!));
    const answer = this.call(this.operations.commit, encoded, this.doneTtlMs);
    if (typeof answer === 'string') return this.endedNow(this.commitEnded, answer);
    return answer.then((outcome) => this.commitEnded(outcome), this.failed);
  }

  private commitEnded(outcome: LeaseOutcome): void {
    this.pending--;
    if (outcome === 'lost') throw this.markLost('commit');
    if (outcome === 'released') throw this.settle('released', 'commit');
    // `ok`, or `committed`: this lease's own earlier commit landed (its reply was lost).
    this.settled = 'committed';
  }

  private releaseNow(reset: boolean, uncount: boolean): Promise<void> {
    if (this.settled === 'released' || this.settled === 'lost') return this.finished(RESOLVED);
    if (this.settled === 'committed') return this.finished(Promise.reject(new ReceiptStateError(this.key, 'release', 'committed')));
    const answer = this.call(this.operations.release, reset, uncount);
    if (typeof answer === 'string') return this.endedNow(this.releaseEnded, answer);
    return answer.then((outcome) => this.releaseEnded(outcome), this.failed);
  }

  private releaseEnded(outcome: LeaseOutcome): void {
    this.pending--;
    if (outcome === 'lost') this.markLost('release');
    // This lease's own commit landed earlier (its reply was lost): the key is done, not free.
    else if (outcome === 'committed') throw this.settle('committed', 'release');
    else this.settled = 'released';
  }

  private extendNow(ttlMs: number): Promise<void> {
    if (this.settled === 'lost') return this.finished(Promise.reject(this.lostError!));
    if (this.settled) return this.finished(Promise.reject(new ReceiptStateError(this.key, 'extend', this.settled)));
    const answer = this.call(this.operations.extend, ttlMs, undefined);
    if (typeof answer === 'string') return this.endedNow(this.extendEnded, answer);
    return answer.then((outcome) => this.extendEnded(outcome), this.failed);
  }

  private extendEnded(outcome: LeaseOutcome): void {
    this.pending--;
    if (outcome === 'lost') throw this.markLost('extend');
    if (outcome === 'committed' || outcome === 'released') throw this.settle(outcome, 'extend');
  }

  /** An operation the store answered synchronously: settled at once by `ended`, as a promise. */
  private endedNow(ended: (this: LeaseReceipt, outcome: LeaseOutcome) => void, outcome: LeaseOutcome): Promise<void> {
    try {
      ended.call(this, outcome);
      return RESOLVED;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** An operation that ended without a store call. */
  private finished(result: Promise<void>): Promise<void> {
    this.pending--;
    return result;
  }

  /** A store primitive failed: counted finished; any failure that is not a twophase error becomes ClaimerUnavailableError. */
  private readonly failed = (error: unknown): never => {
    this.pending--;
    throw this.unavailable(error);
  };

  /** Records a settlement the store reported for this lease, and the error for `operation` after it. */
  private settle(state: 'committed' | 'released', operation: string): ReceiptStateError {
    this.settled = state;
    return new ReceiptStateError(this.key, operation, state);
  }

  private markLost(operation: string): LeaseLostError {
    this.settled = 'lost';
    this.lostError ??= new LeaseLostError(this.key, this.fencingToken, operation);
    return this.lostError;
  }

  /** Runs a store primitive: its outcome, now or as a promise (a synchronous throw becomes a rejection). */
  private call<A, B>(primitive: (lease: LeaseIdentity, a: A, b: B) => LeaseOutcome | Promise<LeaseOutcome>, a: A, b: B): LeaseOutcome | Promise<LeaseOutcome> {
    try {
      const answer = primitive.call(this.operations, this.lease, a, b);
      return typeof answer === 'string' ? answer : Promise.resolve(answer);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  private unavailable(error: unknown): Error {
    if (error instanceof TwophaseError) return error;
    return new ClaimerUnavailableError(`claim store failed on "${this.key}": ${(error as Error)?.message ?? String(error)}`, { cause: error });
  }

  /** Runs `fn` (already counted in `pending`) once every earlier operation has finished, in call order. */
  private queue(fn: () => Promise<void>): Promise<void> {
    const run = this.last.then(fn, fn);
    this.last = run;
    return run;
  }
}

/** The receipt of a `done` or `busy` claim: it holds no lease, so every operation rejects. */
export class NonAcquiredReceipt implements Receipt {
  readonly acquired = false;
  readonly ownerToken = '';
  readonly fencingToken = 0;

  constructor(
    readonly key: string,
    private readonly state: 'done' | 'busy',
  ) {}

  commit(): Promise<void> {
    return Promise.reject(new NoLeaseError(this.key, 'commit', this.state));
  }

  release(): Promise<void> {
    return Promise.reject(new NoLeaseError(this.key, 'release', this.state));
  }

  extend(): Promise<void> {
    return Promise.reject(new NoLeaseError(this.key, 'extend', this.state));
  }
}
