/**
 * The store primitives behind a standalone receipt: commit, release and extend, each one
 * auto-committed statement that compares the owner and fencing tokens (statements/settle.ts).
 */
import type { LeaseIdentity, LeaseOperations, LeaseOutcome } from '../../src/adapter-kit';
import type { KeyDigests } from './key-digest';
import type { PostgresClaimer } from './postgres-claimer';
import * as settle from './statements/settle';

/** What a settle statement answers (statements/settle.ts); every value is a {@link LeaseOutcome}. */
type SettleOutcome = LeaseOutcome;

export class StandaloneLease implements LeaseOperations {
  constructor(
    private readonly claimer: PostgresClaimer,
    private readonly tenant: string | undefined,
    private readonly digests: KeyDigests,
    /** The claim's doneTtlMs: how long a released key keeps its attempt count. */
    private readonly retainMs: number,
  ) {}

  async commit(lease: LeaseIdentity, resultJson: string | undefined, doneTtlMs: number): Promise<LeaseOutcome> {
    const rows = await this.run<{ outcome: SettleOutcome; kept: boolean | null }>(`commit of "${lease.key}"`, settle.commit(this.schema, this.hasTenant), lease, [outcomeJson(resultJson), doneTtlMs]);
    const row = rows[0];
    if (row?.kept === false) {
      this.claimer.logger.warn({ key: lease.key }, 'the commit result did not fit the 4096-byte outcome column once stored; the key is completed without it');
    }
    return row?.outcome ?? 'lost';
  }

  async release(lease: LeaseIdentity, resetAttempts: boolean): Promise<LeaseOutcome> {
    const rows = await this.run<{ outcome: SettleOutcome }>(`release of "${lease.key}"`, settle.release(this.schema, this.hasTenant), lease, [resetAttempts, this.retainMs]);
    return rows[0]?.outcome ?? 'lost';
  }

  async extend(lease: LeaseIdentity, ttlMs: number): Promise<LeaseOutcome> {
    const rows = await this.run<{ outcome: SettleOutcome }>(`extend of "${lease.key}"`, settle.extend(this.schema, this.hasTenant), lease, [ttlMs]);
    return rows[0]?.outcome ?? 'lost';
  }

  private get schema(): string {
    return this.claimer.options.schema;
  }

  private get hasTenant(): boolean {
    return this.tenant !== undefined;
  }

  private run<R extends object>(what: string, text: string, lease: LeaseIdentity, extra: unknown[]): Promise<R[]> {
    const match = [this.digests.key, lease.ownerToken, String(lease.fencingToken)];
    return this.claimer.query<R & Record<string, unknown>>(what, text, this.tenant === undefined ? [...match, ...extra] : [this.tenant, ...match, ...extra]);
  }
}

/** The stored outcome of a commit: `{"result": …}`, or `{}` without a result. */
export function outcomeJson(resultJson: string | undefined): string {
  return resultJson === undefined ? '{}' : `{"result":${resultJson}}`;
}
