/**
 * A claimer view for simulating a process crash in one process: wraps a shared claimer for one
 * worker. Once `crashed` is set, every store call of that worker fails with
 * ClaimerUnavailableError, as if its process were gone (no commit, no release, no extend).
 * Extends of keys in `stalled` fail too, to simulate a worker that cannot keep its lease alive.
 * Everything else is the wrapped claimer's: `claimMany` and `commitMany` go to its batch forms
 * (with its own receipts), `ready()` to its readiness check, and `transactional`,
 * `sharesTransactions` and a receipt's `transaction` / `sharedTransaction` are passed through.
 *
 * For the demo, unit tests and fault-injection runs; never proof of a real store.
 */
import { type Claimer, type ClaimOptions, type ClaimResult, ClaimerUnavailableError, type Receipt } from '../../src';
import { commitEach, type ClaimManyEntry, type ClaimRequest, type CommitManyEntry, type CommitRequest } from '../../src/adapter-kit';

export class CrashableClaimer implements Claimer {
  /** Set to make every later call of this worker fail. */
  crashed = false;
  /** Keys whose extends fail (keep-alive cut off). */
  readonly stalled = new Set<string>();

  /** The wrapped claimer's receipt behind each receipt this claimer handed out. */
  private readonly innerReceipts = new WeakMap<Receipt, Receipt>();

  constructor(private readonly inner: Claimer) {}

  get kind() {
    return this.inner.kind;
  }

  /** The wrapped claimer's `transactional`. */
  get transactional(): boolean | undefined {
    return this.inner.transactional;
  }

  /** The wrapped claimer's `sharesTransactions`. */
  get sharesTransactions(): boolean | undefined {
    return this.inner.sharesTransactions;
  }

  /** The wrapped claimer's readiness check (none: resolves). @throws ClaimerUnavailableError once crashed */
  async ready(): Promise<void> {
    this.check();
    await this.inner.ready?.();
  }

  async claim(key: string, options: ClaimOptions): Promise<ClaimResult> {
    this.check();
    return this.wrap(await this.inner.claim(key, options));
  }

  async claimMany(requests: readonly ClaimRequest[]): Promise<ClaimManyEntry[]> {
    this.check();
    const entries = this.inner.claimMany
      ? await this.inner.claimMany(requests)
      : await Promise.all(
          requests.map(async (r): Promise<ClaimManyEntry> => {
            try {
              return { ok: true, result: await this.inner.claim(r.key, r.options) };
            } catch (error) {
              return { ok: false, error: error as Error };
            }
          }),
        );
    return entries.map((e) => (e.ok ? { ok: true as const, result: this.wrap(e.result) } : e));
  }

  /**
   * Commits through the wrapped claimer's `commitMany` (each commit on its own receipt when it has
   * none), handing it its own receipts. Once crashed, every entry fails with ClaimerUnavailableError.
   */
  async commitMany(requests: readonly CommitRequest[]): Promise<CommitManyEntry[]> {
    if (this.crashed && Array.isArray(requests)) {
      return requests.map(() => ({ ok: false as const, error: new ClaimerUnavailableError('worker crashed: its process is gone') }));
    }
    if (!this.inner.commitMany || !Array.isArray(requests)) return commitEach(requests);
    const unwrapped = requests.map((request) => {
      const innerReceipt = request?.receipt ? this.innerReceipts.get(request.receipt) : undefined;
      return innerReceipt ? { ...request, receipt: innerReceipt } : request;
    });
    return this.inner.commitMany(unwrapped);
  }

  private wrap(result: ClaimResult): ClaimResult {
    if (result.state !== 'acquired') return result;
    const inner = result.receipt;
    const receipt: Receipt = {
      key: inner.key,
      acquired: true,
      ownerToken: inner.ownerToken,
      fencingToken: inner.fencingToken,
      ...(inner.transaction !== undefined ? { transaction: inner.transaction } : {}),
      ...(inner.sharedTransaction !== undefined ? { sharedTransaction: inner.sharedTransaction } : {}),
      commit: async (value) => {
        this.check();
        return inner.commit(value);
      },
      release: async (options) => {
        this.check();
        return inner.release(options);
      },
      extend: async (ttl) => {
        this.check();
        if (this.stalled.has(inner.key)) throw new ClaimerUnavailableError('keep-alive cut off: the store is unreachable from this worker');
        return inner.extend(ttl);
      },
    };
    this.innerReceipts.set(receipt, inner);
    return { ...result, receipt };
  }

  private check(): void {
    if (this.crashed) throw new ClaimerUnavailableError('worker crashed: its process is gone');
  }
}
