/**
 * The standalone mode's claim answer and the store primitives behind its receipt: commit, release
 * and extend, each one auto-committed statement that compares the owner and fencing tokens
 * (statements/settle.ts).
 */
import type { ClaimOptions, ClaimResult, JsonValue } from '../../src';
import { type LeaseIdentity, type LeaseOperations, type LeaseOutcome, LeaseReceipt, NonAcquiredReceipt } from '../../src/adapter-kit';
import type { ClaimSession } from './claim-session';
import type { KeyDigests } from './key-digest';
import { conflictError } from './statement-runner';
import { outcomeJson, storedResult } from './stored-outcome';
import type { ClaimRow } from './statements/claim';
import * as settle from './statements/settle';

/** What a settle statement answers (statements/settle.ts); every value is a {@link LeaseOutcome}. */
type SettleOutcome = LeaseOutcome;

export class StandaloneLease implements LeaseOperations {
  constructor(
    private readonly session: ClaimSession,
    private readonly tenant: string | undefined,
    private readonly digests: KeyDigests,
    /** The claim's doneTtlMs: how long a released key keeps its attempt count. */
    private readonly retainMs: number,
  ) {}

  async commit(lease: LeaseIdentity, resultJson: string | undefined, doneTtlMs: number): Promise<LeaseOutcome> {
    const rows = await this.run<{ outcome: SettleOutcome; kept: boolean | null }>(`commit of "${lease.key}"`, settle.commit(this.schema, this.hasTenant), lease, [outcomeJson(resultJson), doneTtlMs]);
    const row = rows[0];
    if (row?.kept === false) {
      this.session.logger.warn({ key: lease.key }, 'the commit result did not fit the 4096-byte outcome column once stored; the key is completed without it');
    }
    return row?.outcome ?? 'lost';
  }

  async release(lease: LeaseIdentity, resetAttempts: boolean, uncountAttempt = false): Promise<LeaseOutcome> {
    const rows = await this.run<{ outcome: SettleOutcome }>(`release of "${lease.key}"`, settle.release(this.schema, this.hasTenant), lease, [resetAttempts, this.retainMs, uncountAttempt]);
    return rows[0]?.outcome ?? 'lost';
  }

  async extend(lease: LeaseIdentity, ttlMs: number): Promise<LeaseOutcome> {
    const rows = await this.run<{ outcome: SettleOutcome }>(`extend of "${lease.key}"`, settle.extend(this.schema, this.hasTenant), lease, [ttlMs]);
    return rows[0]?.outcome ?? 'lost';
  }

  private get schema(): string {
    return this.session.options.schema;
  }

  private get hasTenant(): boolean {
    return this.tenant !== undefined;
  }

  private run<R extends object>(what: string, text: string, lease: LeaseIdentity, extra: unknown[]): Promise<R[]> {
    const match = [this.digests.key, lease.ownerToken, String(lease.fencingToken)];
    return this.session.query<R & Record<string, unknown>>(what, text, this.tenant === undefined ? [...match, ...extra] : [this.tenant, ...match, ...extra]);
  }
}

/**
 * Turns a claim function row (statements/claim.ts) into a ClaimResult of the standalone mode: an
 * acquired row gets a receipt over a {@link StandaloneLease}. The transactional claims answer so
 * too for a row that a standalone claimer of the same table holds.
 * @throws KeyConflictError for a row stored with another fingerprint
 */
export function standaloneClaimResult(
  session: ClaimSession,
  key: string,
  tenant: string | undefined,
  digests: KeyDigests,
  owner: string,
  options: ClaimOptions,
  row: ClaimRow,
): ClaimResult {
  switch (row.state) {
    case 'acquired': {
      const lease = { key, ownerToken: owner, fencingToken: Number(row.fencing_token) };
      const ops = new StandaloneLease(session, tenant, digests, options.doneTtlMs);
      return { state: 'acquired', attempt: row.attempt, receipt: new LeaseReceipt(lease, ops, options.doneTtlMs, session.options.maxResultBytes) };
    }
    case 'done':
      return { state: 'done', receipt: new NonAcquiredReceipt(key, 'done'), result: storedResult(row.outcome) as JsonValue };
    case 'busy':
      return { state: 'busy', receipt: new NonAcquiredReceipt(key, 'busy') };
    case 'conflict':
      throw conflictError(key, row.stored_fingerprint, options);
  }
}
