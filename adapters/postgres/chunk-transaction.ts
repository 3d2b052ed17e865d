/**
 * The transactional mode's batch form (`transactionBatch: 'per-chunk'`): the acquired keys of one
 * `claimMany` (a chunk of one Kafka partition's records) share ONE transaction on one pool
 * client, so the chunk costs one COMMIT instead of one per record.
 *
 * - `claimMany` opens the transaction (statements/chunk.ts): on the platform inbox each acquired
 *   key's advisory lock is its claim and no row is written yet; on the tenant inbox every key's
 *   claim row is inserted in it. Each acquired key gets a {@link TransactionReceipt} whose
 *   `transaction` is that client and whose `sharedTransaction` is the {@link ChunkTransaction}.
 * - A member's `commit(result)` records its completion; when it is the last member to settle,
 *   every row is written completed (the platform inbox: one INSERT for all) and the transaction
 *   COMMITs (one round trip). Before that, the commit
 *   waits for the COMMIT — unless a source {@link ChunkTransaction.adopt | adopted} the chunk (the
 *   Kafka source does: it runs the members one after the other and acknowledges none before
 *   `outcome` resolved true), in which case it resolves at once.
 * - A member's `release()` (a failed or rejected record, a shutdown, a claim dropped before
 *   dispatch), a failed COMMIT, or a lost session roll the WHOLE chunk back: every member's effect
 *   and claim vanish; members not settled yet then fail their commit with
 *   {@link TransactionAbortedError}. The source runs the chunk's unacknowledged records again, one
 *   by one, each in its own transaction (`claim()`), so one poison record never blocks the others.
 * - Attempt counts are taken before the transaction (auto-committed), so they survive the
 *   rollback: a rolled-back innocent member's next attempt counts one more.
 */
import type { PoolClient, QueryResult } from 'pg';
import type { LeaseIdentity, LeaseOperations, LeaseOutcome } from '../../src/adapter-kit';
import { mayHaveCommitted, TransactionAbortedError, type TransactionMisuseError } from './errors';
import type { KeyDigests } from './key-digest';
import type { BorrowedClient } from './pool-client';
import type { ClaimSession } from './claim-session';
import { outcomeJson } from './stored-outcome';
import { type ChunkCompletion, commitChunk, commitChunkRows, rollbackChunk } from './statements/chunk';
import type { CompletedRow } from './statements/transaction';
import * as settle from './statements/settle';
import { guardClient } from './transaction-lease';
import { type SharedTransaction } from '../../src/adapter-kit';

type ChunkState = 'open' | 'committing' | 'committed' | 'rolled_back';

/**
 * A member's completion: its claim row, written `completed` by the chunk's commit (the platform
 * inbox: no row was written at the claim), or the UPDATE of the row its claim inserted (the tenant inbox).
 */
export type MemberCompletion = { readonly row: CompletedRow } | { readonly update: ChunkCompletion };

/** The shared transaction of one chunk. */
export class ChunkTransaction implements SharedTransaction {
  readonly outcome: Promise<boolean>;
  private resolveOutcome!: (committed: boolean) => void;
  private state: ChunkState = 'open';
  private adopted = false;
  private readonly members: ChunkMemberLease[] = [];
  private readonly completions = new Map<ChunkMemberLease, MemberCompletion>();
  private ending: Promise<boolean> | undefined;

  constructor(
    private readonly session: ClaimSession,
    private readonly borrowed: BorrowedClient,
    /** Locks held by keys claimed in step 1 that did not become members (released at the end, counts kept). */
    private readonly otherLocks: readonly { lockId: string; scope: Buffer }[],
  ) {
    this.outcome = new Promise((resolve) => {
      this.resolveOutcome = resolve;
    });
    borrowed.client.on('error', this.onSessionError);
  }

  /**
   * The session died (terminated, `idle_in_transaction_session_timeout`, a lost connection):
   * PostgreSQL rolled the chunk back. End it now, so commits waiting for it fail at once and the
   * client leaves the pool, instead of waiting for a member's next operation.
   */
  private readonly onSessionError = (): void => {
    void this.rollback("the chunk's PostgreSQL session ended");
  };

  /** {@inheritDoc SharedTransaction.adopt} */
  adopt(): void {
    this.adopted = true;
  }

  /** True while members may still write and commit. */
  get open(): boolean {
    return this.state === 'open';
  }

  /** The client handlers write through. */
  get client(): PoolClient {
    return this.borrowed.client;
  }

  /** Adds a member (while claiming only). */
  add(member: ChunkMemberLease): void {
    this.members.push(member);
  }

  /**
   * A member committed: records its completion; COMMITs when it was the last member to settle.
   * Resolves true when the member may report its commit done (committed, or adopted and still
   * open), false when the chunk rolled back.
   */
  async committed(member: ChunkMemberLease, completion: MemberCompletion): Promise<boolean> {
    if (this.state !== 'open') return this.outcome;
    this.completions.set(member, completion);
    if (this.completions.size === this.members.length) return this.commit();
    if (this.adopted) return true;
    return this.outcome;
  }

  /** A member was released: the whole chunk rolls back (idempotent). */
  released(member: ChunkMemberLease, forget: boolean): Promise<boolean> {
    member.forget = forget;
    return this.rollback(`release of "${member.key}"`);
  }

  /** Every row completed, COMMIT, unlock: one round trip. A failure rolls back. */
  private commit(): Promise<boolean> {
    if (this.ending) return this.ending;
    this.state = 'committing';
    this.ending = (async () => {
      const what = `commit of a chunk of ${this.members.length} keys`;
      try {
        const schema = this.session.options.schema;
        const members = [...this.completions.keys()];
        const completions = [...this.completions.values()];
        const rows = completions.flatMap((c) => ('row' in c ? [c.row] : []));
        // The platform inbox: one statement for every member; the tenant inbox: one per member.
        const oneStatement = rows.length === completions.length;
        const text = oneStatement
          ? commitChunkRows(schema, rows, this.lockIds())
          : commitChunk(schema, completions.map((c) => (c as { update: ChunkCompletion }).update), this.lockIds());
        const replies = (await this.borrowed.client.query({ text, query_timeout: this.session.options.operationTimeoutMs } as never)) as unknown as QueryResult[];
        const completionReplies = oneStatement ? 1 : members.length;
        if (replies[completionReplies]?.command !== 'COMMIT') throw new TransactionAbortedError(`${what}: PostgreSQL rolled the transaction back (a statement of a handler failed)`);
        // The platform inbox names the keys whose result was dropped (NULL when none: nothing to look up).
        const droppedKeys = oneStatement ? ((replies[0]?.rows[0]?.dropped as string[] | null) ?? []) : undefined;
        const dropped = droppedKeys && droppedKeys.length > 0 ? new Set<string>(droppedKeys) : undefined;
        if (droppedKeys === undefined || dropped !== undefined) {
          members.forEach((member, i) => {
            const kept = dropped ? !dropped.has(member.digests.key.toString('hex')) : replies[i]?.rows[0]?.kept !== false;
            if (!kept) this.session.logger.warn({ key: member.key }, 'the commit result did not fit the 4096-byte outcome column once stored; the key is completed without it');
          });
        }
      } catch (error) {
        this.borrowed.noteError(error);
        this.session.logger.warn(
          { err: error, keys: this.members.length, possiblyCommitted: mayHaveCommitted(error) },
          `${what} failed; every member's effect is rolled back${mayHaveCommitted(error) ? ' (the connection failed during COMMIT, so it may have committed: redeliveries find those keys done, or run them once)' : ''}`,
        );
        await this.end(what);
        return this.finish('rolled_back');
      }
      this.borrowed.giveBack();
      return this.finish('committed');
    })();
    return this.ending;
  }

  /** Ends a chunk that got no member (or must not be used): ROLLBACK, locks released. */
  abandon(what: string): Promise<boolean> {
    return this.rollback(what);
  }

  private rollback(what: string): Promise<boolean> {
    if (this.ending) return this.ending;
    this.state = 'rolled_back';
    this.ending = this.end(what).then(() => this.finish('rolled_back'));
    return this.ending;
  }

  /**
   * ROLLBACK, counts kept or forgotten, locks released, the client returned.
   * Any failure destroys the client: its session ends, which rolls back and unlocks. Never throws.
   */
  private async end(what: string): Promise<void> {
    try {
      if (this.borrowed.broken !== undefined) throw this.borrowed.broken;
      const keys = [
        ...this.members.map((m) => ({ lockId: m.digests.lockId, scope: m.digests.scope, forget: m.forget })),
        ...this.otherLocks.map((l) => ({ ...l, forget: false })),
      ];
      await this.borrowed.client.query({ text: rollbackChunk(this.session.options.schema, keys), query_timeout: this.session.options.operationTimeoutMs } as never);
      this.borrowed.giveBack();
    } catch (error) {
      if (this.session.warnings.admit('session_end_failed')) this.session.logger.warn({ err: error }, `${what}: could not end the chunk's session cleanly; closing its connection (PostgreSQL rolls back and unlocks)`);
      this.borrowed.giveBack(true);
    }
  }

  private finish(state: 'committed' | 'rolled_back'): boolean {
    this.borrowed.client.off('error', this.onSessionError);
    this.state = state;
    for (const member of this.members) member.finished = true;
    const committed = state === 'committed';
    this.resolveOutcome(committed);
    return committed;
  }

  private lockIds(): string[] {
    return [...this.members.map((m) => m.digests.lockId), ...this.otherLocks.map((l) => l.lockId)];
  }
}

/** Store primitives of one member of a chunk. */
export class ChunkMemberLease implements LeaseOperations {
  /** Set once this member committed or released, or the chunk ended: its handle refuses queries. */
  finished = false;
  /** Forget the attempt count when the chunk rolls back (this member was dead-lettered). */
  forget = false;
  /** Set when the handler sent a refused transaction-control statement: the commit fails. */
  misuse: TransactionMisuseError | undefined;
  readonly handle: PoolClient;

  /**
   * @param claimed the platform inbox: what the claim counted (no row was written; the commit
   *   inserts it completed). Undefined for the tenant inbox, whose claim inserted the row.
   */
  constructor(
    private readonly chunk: ChunkTransaction,
    private readonly session: ClaimSession,
    private readonly tenant: string | undefined,
    readonly digests: KeyDigests,
    readonly key: string,
    private readonly claimed?: { readonly attempt: number; readonly fingerprint: Buffer | null },
  ) {
    this.handle = guardClient(chunk.client, this);
    chunk.add(this);
  }

  async commit(lease: LeaseIdentity, resultJson: string | undefined, doneTtlMs: number): Promise<LeaseOutcome> {
    if (this.finished) throw new TransactionAbortedError(`commit of "${this.key}": the chunk's transaction already ended; the effect was not applied`);
    this.finished = true;
    if (this.misuse) {
      await this.chunk.released(this, false);
      throw new TransactionAbortedError(`commit of "${this.key}": refused, the handler sent ${this.misuse.statement} through ctx.transaction (${this.misuse.message}); the chunk rolled back`, { cause: this.misuse });
    }
    let completion: MemberCompletion;
    if (this.claimed) {
      completion = {
        row: {
          key: this.digests.key,
          scope: this.digests.scope,
          keyText: this.session.options.keepKeyText ? this.key : null,
          fingerprint: this.claimed.fingerprint,
          attempt: this.claimed.attempt,
          owner: lease.ownerToken,
          fencingToken: lease.fencingToken,
          outcomeJson: outcomeJson(resultJson),
          retainMs: doneTtlMs,
        },
      };
    } else {
      const hasTenant = this.tenant !== undefined;
      const values = [...(hasTenant ? [this.tenant] : []), this.digests.key, lease.ownerToken, String(lease.fencingToken), outcomeJson(resultJson), doneTtlMs];
      completion = { update: { commitSql: settle.commitUpdate(this.session.options.schema, hasTenant), values, scope: this.digests.scope } };
    }
    const ok = await this.chunk.committed(this, completion);
    if (!ok) throw new TransactionAbortedError(`commit of "${this.key}": the chunk's shared transaction rolled back (another record of the chunk failed, or COMMIT failed); the effect was not applied`);
    return 'ok';
  }

  async release(_lease: LeaseIdentity, resetAttempts: boolean): Promise<LeaseOutcome> {
    if (this.finished) return 'ok';
    this.finished = true;
    await this.chunk.released(this, resetAttempts);
    return 'ok';
  }

  /** The lease is the transaction (its idle limit); nothing to send. */
  async extend(): Promise<LeaseOutcome> {
    if (this.finished || !this.chunk.open) throw new TransactionAbortedError(`extend of "${this.key}": the transaction already ended`);
    return 'ok';
  }
}
