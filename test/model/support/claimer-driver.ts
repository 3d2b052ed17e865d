/**
 * Runs model operations against a real Claimer and reports what it answered as a model
 * {@link Outcome}. Keeps the real receipts by the ids the model uses.
 */
import {
  type Claimer,
  KeyConflictError,
  LeaseLostError,
  NoLeaseError,
  type Receipt,
  ReceiptStateError,
} from '../../../src';
import type { Operation, Outcome } from './claim-model';

export class ClaimerDriver {
  private readonly receipts = new Map<number, Receipt>();
  private nonAcquired: Receipt | undefined;
  private nextId = 1;
  /** Highest fencing token seen per key, to check that tokens strictly increase. */
  private readonly highestFence = new Map<string, number>();

  /** @param keyPrefix prepended to every model key (an isolated namespace per run) */
  constructor(
    private readonly claimer: Claimer,
    private readonly keyPrefix = '',
  ) {}

  /** A non-acquired receipt has been seen (the `non_acquired` operation needs one). */
  get hasNonAcquired(): boolean {
    return this.nonAcquired !== undefined;
  }

  /**
   * Runs one operation. `advance` is the caller's business (it owns the clock).
   * @throws Error when a fencing token does not strictly increase, or on an unexpected error
   */
  async run(o: Exclude<Operation, { op: 'advance' }>): Promise<Outcome> {
    try {
      switch (o.op) {
        case 'claim': {
          const key = this.keyPrefix + o.key;
          const result = await this.claimer.claim(key, {
            leaseTtlMs: o.leaseTtlMs,
            doneTtlMs: o.doneTtlMs,
            ...(o.fingerprint === undefined ? {} : { fingerprint: o.fingerprint }),
          });
          if (result.state === 'acquired') {
            const fence = result.receipt.fencingToken;
            const previous = this.highestFence.get(key) ?? 0;
            if (!(fence > previous)) throw new Error(`fencing token of ${key} did not increase: ${previous} then ${fence}`);
            this.highestFence.set(key, fence);
            const receiptId = this.nextId++;
            this.receipts.set(receiptId, result.receipt);
            return { t: 'acquired', attempt: result.attempt, receiptId, fence };
          }
          this.nonAcquired = result.receipt;
          if (result.state === 'done') return { t: 'done', result: result.result === undefined ? undefined : JSON.stringify(result.result) };
          return { t: 'busy' };
        }
        case 'commit':
          await this.receipt(o.receiptId).commit(o.result);
          return { t: 'ok' };
        case 'release':
          await this.receipt(o.receiptId).release();
          return { t: 'ok' };
        case 'extend':
          await this.receipt(o.receiptId).extend(o.ttlMs);
          return { t: 'ok' };
        case 'non_acquired': {
          const r = this.nonAcquired;
          if (!r) throw new Error('driver: no non-acquired receipt yet');
          if (o.which === 'extend') await r.extend(1000);
          else await r[o.which]();
          return { t: 'ok' };
        }
      }
    } catch (error) {
      if (error instanceof KeyConflictError) return { t: 'conflict' };
      if (error instanceof LeaseLostError) return { t: 'lease_lost' };
      if (error instanceof ReceiptStateError) return { t: 'receipt_state' };
      if (error instanceof NoLeaseError) return { t: 'no_lease' };
      throw error;
    }
  }

  private receipt(id: number): Receipt {
    const r = this.receipts.get(id);
    if (!r) throw new Error(`driver: unknown receipt #${id}`);
    return r;
  }
}
