/**
 * Wraps the shared claimer for one demo worker. When the worker "crashes", every later store
 * call of that worker fails, as if its process were gone: no commit, no release, no extend.
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
  crashed = false;

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
      : await Promise.all(requests.map(async (r) => {
          try {
            return { ok: true as const, result: await this.inner.claim(r.key, r.options) };
          } catch (error) {
            return { ok: false as const, error: error as Error };
          }
        }));
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
      release: async () => {
        this.check();
        return inner.release();
      },
      extend: async (ttl) => {
        this.check();
        return inner.extend(ttl);
      },
    };
    return { ...result, receipt };
  }

  private check(): void {
    if (this.crashed) throw new ClaimerUnavailableError('demo worker crashed: its process is gone');
  }
}
