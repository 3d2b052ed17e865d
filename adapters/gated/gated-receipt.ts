/**
 * The receipt of a gated claim: the truth's receipt decides every rule of the contract (its
 * errors, repeats and ordering are the caller's), and the gate's lease follows it:
 * - commit: the truth commits first (in transactional mode: the row completed and the effect's
 *   COMMIT); only once that succeeded is the result copied to the gate. A truth commit that
 *   failed for good (rolled back, lease lost, already released) gives the gate lease up instead,
 *   so the gate never says `done` for a key the truth does not hold as done;
 * - release: the truth releases (ROLLBACK), and the gate lease is given up whatever the truth
 *   answered (giving the gate up is always safe: the next claim asks the truth);
 * - extend: both, the truth's answer is the caller's.
 * Gate failures never reach the caller (see {@link GateSide}).
 */
import { isRetriable, type JsonValue, type Receipt, type ReleaseOptions, ResultTooLargeError } from '../../src';

/** What a gated receipt does to the gate's lease; failures are absorbed and reported by the claimer. */
export interface GateSide {
  /** Marks the gate's key done with `result` (or, failing that, releases it). Never rejects. */
  commit(gate: Receipt | undefined, result: JsonValue | undefined): Promise<void>;
  /** Releases the gate's lease. Never rejects. */
  release(gate: Receipt | undefined, options?: ReleaseOptions): Promise<void>;
  /** Extends the gate's lease. Never rejects. */
  extend(gate: Receipt | undefined, ttlMs: number): Promise<void>;
}

export class GatedReceipt implements Receipt {
  readonly acquired = true;

  constructor(
    private readonly truth: Receipt,
    private readonly gate: Receipt | undefined,
    private readonly side: GateSide,
  ) {}

  get key(): string {
    return this.truth.key;
  }

  /** The truth's owner token. */
  get ownerToken(): string {
    return this.truth.ownerToken;
  }

  /** The truth's fencing token (the one a downstream store should compare). */
  get fencingToken(): number {
    return this.truth.fencingToken;
  }

  /** The truth's transaction (`ctx.transaction`), or undefined for a standalone truth. */
  get transaction(): unknown {
    return this.truth.transaction;
  }

  /** {@inheritDoc Receipt.commit} */
  async commit(result?: JsonValue): Promise<void> {
    try {
      await this.truth.commit(result);
    } catch (error) {
      // Retriable: the truth may still commit on a retry, and this receipt stays usable; the gate
      // lease stays too (it expires by itself). Too large: nothing was written anywhere.
      if (!isRetriable(error) && !(error instanceof ResultTooLargeError)) await this.side.release(this.gate);
      throw error;
    }
    await this.side.commit(this.gate, result);
  }

  /** {@inheritDoc Receipt.release} */
  async release(options?: ReleaseOptions): Promise<void> {
    try {
      await this.truth.release(options);
    } finally {
      await this.side.release(this.gate, options);
    }
  }

  /** {@inheritDoc Receipt.extend} */
  async extend(ttlMs: number): Promise<void> {
    const gate = this.side.extend(this.gate, ttlMs);
    try {
      await this.truth.extend(ttlMs);
    } finally {
      await gate;
    }
  }
}
