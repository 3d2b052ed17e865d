/**
 * A claimer view for simulating a process crash in one process: wraps a shared claimer for one
 * worker. Once `crashed` is set, every store call of that worker fails with
 * ClaimerUnavailableError, as if its process were gone (no commit, no release, no extend).
 * Extends of keys in `stalled` fail too, to simulate a worker that cannot keep its lease alive.
 *
 * For the demo, unit tests and fault-injection runs; never proof of a real store.
 */
import {
  type Claimer,
  type ClaimManyEntry,
  type ClaimOptions,
  type ClaimRequest,
  type ClaimResult,
  ClaimerUnavailableError,
  type Receipt,
} from '../../src';

export class CrashableClaimer implements Claimer {
  /** Set to make every later call of this worker fail. */
  crashed = false;
  /** Keys whose extends fail (keep-alive cut off). */
  readonly stalled = new Set<string>();

  constructor(private readonly inner: Claimer) {}

  get kind() {
    return this.inner.kind;
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

  private wrap(result: ClaimResult): ClaimResult {
    if (result.state !== 'acquired') return result;
    const inner = result.receipt;
    const receipt: Receipt = {
      key: inner.key,
      acquired: true,
      ownerToken: inner.ownerToken,
      fencingToken: inner.fencingToken,
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
    return { ...result, receipt };
  }

  private check(): void {
    if (this.crashed) throw new ClaimerUnavailableError('worker crashed: its process is gone');
  }
}
