/**
 * The transactional (inbox) mode: one transaction per acquired claim, on a client borrowed from
 * the caller's pool for the whole delivery, shared with the handler as `ctx.transaction`.
 *
 * Claim (statements/transaction.ts gives the order):
 * 1. `twophase_begin_attempt`, auto-committed: a session-level advisory lock on the key's scope
 *    taken without waiting (not available: `busy`, another delivery of the key is in flight, never
 *    a wait); a completed key answers `done` with its stored result and opens no transaction;
 *    otherwise the attempt is counted in `twophase_attempts`, outside the transaction to come, so
 *    neither a rollback nor a crash erases it (maxAttempts → retry_exhausted keeps working);
 * 2. BEGIN with `idle_in_transaction_session_timeout` and `statement_timeout` = leaseTtlMs and a
 *    bounded `lock_timeout`, all local to the transaction, and the fencing token drawn.
 * No claim row is written while the handler runs: the advisory lock is the claim.
 *
 * commit(result): the claim row is written `completed` with the result, then COMMIT: the effect
 * and the claim become visible together or not at all. release(): ROLLBACK: the effect vanishes with the
 * claim. Then the advisory lock is released (and the attempt count forgotten after a commit or a
 * dead-letter) and the client goes back to the pool.
 *
 * A worker that dies mid-transaction (SIGKILL, lost connection) or leaves the transaction idle
 * past leaseTtlMs: PostgreSQL ends the session, rolls the transaction back and drops the advisory
 * lock; the redelivery claims again. A late COMMIT on a terminated session fails (the connection is
 * gone), and the receipt reports {@link TransactionAbortedError}: the consumer then requeues.
 */
import { randomUUID } from 'node:crypto';
import type { PoolClient, QueryResult } from 'pg';
import { type ClaimOptions, ClaimerUnavailableError, type ClaimResult, type JsonValue, type OutboxWriter, KeyConflictError } from '../../src';
import { type LeaseIdentity, type LeaseOperations, type LeaseOutcome, LeaseReceipt, NonAcquiredReceipt, type SharedTransaction } from '../../src/adapter-kit';
import { mayHaveCommitted, SQLSTATE, sqlState, toClaimerError, TransactionAbortedError, TransactionMisuseError } from './errors';
import { transactionControl } from './transaction-control';
import { type KeyDigests, sha256 } from './key-digest';
import type { ClaimSession } from './claim-session';
import { borrow, type BorrowedClient } from './pool-client';
import { conflictError, runWithin } from './statement-runner';
import { storedResult } from './stored-outcome';
import type { ClaimRow } from './statements/claim';
import * as settle from './statements/settle';
import { attemptAndBegin, attemptAndClaim, type BeginAttemptRow, completeCall, completeCommitUnlock, completeInsert, completeStatement, endAttempt, uncountAttempt } from './statements/transaction';
import { standaloneClaimResult } from './standalone-lease';
import { outcomeJson } from './stored-outcome';
import { claimLimits, type EnteredPoolClient, type EnteredTransaction, type PoolClientTransactions, type TransactionLimits } from './transaction-port';
import { PostgresOutboxWriter, type SqlExecutor } from './outbox-staging';

/**
 * The receipt of a transactional claim: a {@link LeaseReceipt} that also carries the open
 * transaction. `transaction` is the pool client (guarded: once the receipt is settled, its
 * `query` rejects, so an abandoned handler cannot write outside the transaction; `release` is
 * refused — twophase returns the client).
 */
export class TransactionReceipt<Tx = PoolClient> extends LeaseReceipt {
  constructor(
    lease: LeaseIdentity,
    /** `handle`: the handler's transaction object; `executor`: outbox staging through it, when `handle` has no pg-style `query`. */
    private readonly tx: LeaseOperations & { readonly handle: Tx; readonly executor?: SqlExecutor },
    doneTtlMs: number,
    maxResultBytes: number,
    /** Quoted schema of the outbox table (the claimer's). */
    private readonly outboxSchema: string,
    /** The chunk's transaction when this receipt shares it (`transactionBatch: 'per-chunk'`). */
    readonly sharedTransaction?: SharedTransaction,
  ) {
    super(lease, tx, doneTtlMs, maxResultBytes);
  }

  private writer: PostgresOutboxWriter | undefined;

  /** Stages outbox rows in this claim's transaction (`ctx.outbox`). */
  get outbox(): OutboxWriter {
    this.writer ??= new PostgresOutboxWriter(this.tx.executor ?? (this.tx.handle as unknown as SqlExecutor), this.outboxSchema, true, false);
    return this.writer;
  }

  /** The transaction's client (or, with a transaction port, the library's transaction object), for the handler's effect (`ctx.transaction`). */
  get transaction(): Tx {
    return this.tx.handle;
  }
}

/** Store primitives of one transactional claim. */
export class TransactionLease implements LeaseOperations {
  /** Set once commit or release began: the transaction is no longer the handler's. */
  finished = false;
  /** Set when the handler sent a refused transaction-control statement: the commit fails. */
  misuse: TransactionMisuseError | undefined;
  /**
   * The handler's transaction object: the guarded client, or (with a port that builds its
   * transaction object over a pool client, see {@link PoolClientTransactions}) the library's
   * object over that guarded client.
   */
  handle: PoolClient;
  /** Outbox staging through the guarded client, when `handle` is a library's object. */
  executor: SqlExecutor | undefined;
  /** The client twophase hands on: its `query` refuses transaction control and any use after the end. */
  private readonly guarded: PoolClient;
  /** Leaves a library's transaction callback (a port's {@link EnteredPoolClient}), before the COMMIT or ROLLBACK. */
  private leaveLibrary: ((commit: boolean) => Promise<void>) | undefined;

  constructor(
    private readonly session: ClaimSession,
    private readonly borrowed: BorrowedClient,
    private readonly tenant: string | undefined,
    private readonly digests: KeyDigests,
    private readonly key: string,
    /** The claim's fingerprint digest and counted attempt, written with the completed row. */
    private readonly fingerprint: Buffer | null = null,
    private readonly attempt = 1,
    /** Builds the library's transaction object over the guarded client (a port's {@link WrappedPoolClient.wrap}). */
    wrap?: (client: PoolClient) => unknown,
  ) {
    this.guarded = guardClient(borrowed.client, this);
    // The receipt's Tx is the library's type then; this lease only hands the object on.
    this.handle = wrap === undefined ? this.guarded : (wrap(this.guarded) as PoolClient);
    this.executor = wrap === undefined ? undefined : (this.guarded as unknown as SqlExecutor);
  }

  /**
   * Enters a library's transaction over the guarded client (a port's {@link EnteredPoolClient}):
   * its object becomes the handle. On failure the claim ends (rolled back, the attempt uncounted)
   * and the library's error is thrown.
   */
  async enterLibrary(over: EnteredPoolClient<unknown>, limits: TransactionLimits, what: string): Promise<void> {
    let entered: EnteredTransaction<unknown>;
    try {
      entered = await over.enter(this.guarded, limits);
    } catch (error) {
      this.finished = true;
      await this.end(what, false, true, true);
      throw error;
    }
    this.handle = entered.tx as PoolClient;
    this.executor = this.guarded as unknown as SqlExecutor;
    this.leaveLibrary = (commit) => entered.leave(commit);
  }

  async commit(lease: LeaseIdentity, resultJson: string | undefined, doneTtlMs: number): Promise<LeaseOutcome> {
    if (this.finished) throw new TransactionAbortedError(`commit of "${this.key}": the transaction already ended`);
    this.finished = true;
    const what = `commit of "${this.key}"`;
    if (this.misuse) {
      await this.leaveLibrary?.(false).catch(() => undefined);
      await this.end(what, false, true);
      throw new TransactionAbortedError(`${what}: refused, the handler sent ${this.misuse.statement} through ctx.transaction (${this.misuse.message}); the effect was not applied`, { cause: this.misuse });
    }
    if (this.leaveLibrary !== undefined) {
      try {
        await this.leaveLibrary(true);
      } catch (error) {
        await this.end(what, false, true);
        throw new TransactionAbortedError(`${what}: the transaction did not commit (${(error as Error)?.message ?? String(error)}); nothing was applied`, { cause: error });
      }
    }
    try {
      const schema = this.session.options.schema;
      const completion = this.tenant !== undefined
        ? completeStatement(settle.commitUpdate(schema, true), schema, [this.tenant, this.digests.key, lease.ownerToken, String(lease.fencingToken), outcomeJson(resultJson), doneTtlMs], this.digests.scope)
        : (this.session.completesInFunction ? completeCall : completeInsert)(schema, {
        key: this.digests.key,
        scope: this.digests.scope,
        keyText: this.session.options.keepKeyText ? this.key : null,
        fingerprint: this.fingerprint,
        attempt: this.attempt,
        owner: lease.ownerToken,
        fencingToken: lease.fencingToken,
        outcomeJson: outcomeJson(resultJson),
        retainMs: doneTtlMs,
      });
      const text = completeCommitUnlock(completion, this.digests.lockId);
      const replies = (await this.borrowed.client.query({ text, query_timeout: this.session.options.operationTimeoutMs } as never)) as unknown as QueryResult[];
      if (replies[0]?.rows[0]?.kept === false) {
        this.session.logger.warn({ key: this.key }, 'the commit result did not fit the 4096-byte outcome column once stored; the key is completed without it');
      }
      // COMMIT of a transaction that an error aborted answers ROLLBACK, not an error.
      if (replies[1]?.command !== 'COMMIT') {
        throw new TransactionAbortedError(`${what}: PostgreSQL rolled the transaction back (a statement of the handler failed); the effect was not applied`);
      }
    } catch (error) {
      this.borrowed.noteError(error);
      await this.end(what, false, true);
      if (error instanceof TransactionAbortedError) throw error;
      // The completion's row check (a division by zero) failing means the row was gone: say that, not the check's text.
      const reason = sqlState(error) === SQLSTATE.divisionByZero ? "the key's row is held live by another claimer of the same table" : ((error as Error)?.message ?? String(error));
      throw new TransactionAbortedError(
        `${what}: the transaction did not commit (${reason}); ` +
          (mayHaveCommitted(error) ? 'the connection failed, so it may have committed: a redelivery finds the key done, or runs it once' : 'nothing was applied'),
        { cause: error },
      );
    }
    this.borrowed.giveBack();
    return 'ok';
  }

  async release(_lease: LeaseIdentity, resetAttempts: boolean, uncountAttempt = false): Promise<LeaseOutcome> {
    if (this.finished) return 'ok';
    this.finished = true;
    await this.leaveLibrary?.(false).catch(() => undefined);
    await this.end(`release of "${this.key}"`, resetAttempts, true, !resetAttempts && uncountAttempt);
    return 'ok';
  }

  /** The lease is the transaction: the server ends it on idle or a lost session. Nothing to send. */
  async extend(): Promise<LeaseOutcome> {
    if (this.finished) throw new TransactionAbortedError(`extend of "${this.key}": the transaction already ended`);
    return 'ok';
  }

  /**
   * Ends the claim: ROLLBACK (when `rollback`), then (when `uncount`, still holding the key's
   * lock) one attempt off the count, then unlock (forgetting the attempt count when `forget`),
   * then returns the client. Any failure destroys the client: its session ends, which rolls back
   * and unlocks on the server. Never throws.
   */
  async end(what: string, forget: boolean, rollback: boolean, uncount = false): Promise<void> {
    try {
      if (rollback) await this.run(what, 'ROLLBACK', undefined);
      if (uncount) await this.run(what, uncountAttempt(this.session.options.schema), [this.digests.scope]);
      await this.run(what, endAttempt(this.session.options.schema), [this.digests.lockId, this.digests.scope, forget]);
      this.borrowed.giveBack();
    } catch (error) {
      if (this.session.warnings.admit('session_end_failed')) this.session.logger.warn({ key: this.key, err: error }, `${what}: could not end the claim's session cleanly; closing its connection (PostgreSQL rolls back and unlocks)`);
      this.borrowed.giveBack(true);
    }
  }

  private run<R extends object>(what: string, text: string, values: unknown[] | undefined): Promise<R[]> {
    return runWithin<R & Record<string, unknown>>(this.borrowed, what, text, values, this.session.options.operationTimeoutMs);
  }
}

/**
 * Claims `key` in a new transaction (see the file header).
 * @throws KeyConflictError, InvalidKeyError (unknown tenant), SchemaMismatchError, ClaimerUnavailableError
 */
export async function claimInTransaction(
  session: ClaimSession,
  key: string,
  tenant: string | undefined,
  digests: KeyDigests,
  options: ClaimOptions,
  over?: PoolClientTransactions<unknown>,
): Promise<ClaimResult> {
  const what = `claim of "${key}"`;
  const opts = session.options;
  const deadlineAt = session.clock.now() + opts.operationTimeoutMs;
  const borrowed = await borrow(session.pool, what, opts.operationTimeoutMs);
  const fingerprint = options.fingerprint === undefined ? null : sha256(options.fingerprint);
  const owner = randomUUID();
  // From the send on, the session may hold the advisory lock and an open transaction.
  let sent = false;
  // Set once a lease owns the client: from then on the lease ends the claim, never this catch.
  let leased = false;
  try {
    if (tenant !== undefined) {
      sent = true;
      return await claimTenantRow(session, borrowed, key, tenant, digests, options, fingerprint, owner, deadlineAt);
    }
    const text = attemptAndBegin(opts.schema, options.leaseTtlMs, Math.min(opts.operationTimeoutMs, options.leaseTtlMs), options.doneTtlMs, {
      lockId: digests.lockId,
      scope: digests.scope,
      key: digests.key,
      fingerprint,
    });
    const remainingMs = session.remaining(deadlineAt);
    if (remainingMs <= 0) throw new ClaimerUnavailableError(`${what}: deadline passed before sending`);
    sent = true;
    let replies: QueryResult[];
    try {
      replies = (await borrowed.client.query({ text, query_timeout: Math.ceil(remainingMs) } as never)) as unknown as QueryResult[];
    } catch (error) {
      borrowed.noteError(error);
      throw error;
    }
    const begun = replies[0]!.rows[0] as BeginAttemptRow;
    if (begun.state === 'counted') {
      const fence = Number((replies[replies.length - 1]!.rows[0] as { fencing_token: string }).fencing_token);
      const tx = new TransactionLease(session, borrowed, tenant, digests, key, fingerprint, begun.attempts, over !== undefined && 'wrap' in over ? (client) => over.wrap(client) : undefined);
      leased = true;
      if (over !== undefined && 'enter' in over) await tx.enterLibrary(over, claimLimits(options.leaseTtlMs, opts.operationTimeoutMs), what);
      const lease = { key, ownerToken: owner, fencingToken: fence };
      return { state: 'acquired', attempt: begun.attempts, receipt: new TransactionReceipt(lease, tx, options.doneTtlMs, opts.maxResultBytes, opts.schema) };
    }
    // Step 1 answered busy, done or conflict, and holds no lock: end the empty transaction.
    await runWithin(borrowed, what, 'ROLLBACK', undefined, opts.operationTimeoutMs);
    borrowed.giveBack();
    switch (begun.state) {
      case 'done':
        return { state: 'done', receipt: new NonAcquiredReceipt(key, 'done'), result: storedResult(begun.outcome) as JsonValue };
      case 'conflict':
        throw conflictError(key, begun.stored_fingerprint, options);
      default:
        return { state: 'busy', receipt: new NonAcquiredReceipt(key, 'busy') };
    }
  } catch (error) {
    if (leased) throw toClaimerError(error, what);
    if (sent && sqlState(error) === SQLSTATE.lockNotAvailable) {
      // Another transaction holds the row (lock_timeout): busy, never an unbounded wait.
      const tx = new TransactionLease(session, borrowed, tenant, digests, key);
      tx.finished = true;
      await tx.end(what, false, true);
      return { state: 'busy', receipt: new NonAcquiredReceipt(key, 'busy') };
    }
    if (error instanceof KeyConflictError) throw error;
    borrowed.noteError(error);
    // Possibly holding the advisory lock or a transaction: close the session so the server drops both.
    borrowed.giveBack(sent);
    throw toClaimerError(error, what);
  }
}

/**
 * The claim of a tenant-inbox key (see statements/transaction.ts, `attemptAndClaim`): the claim
 * row is written at the claim, so an unknown tenant is refused before the handler runs.
 * Errors are classified by the caller (claimInTransaction's catch).
 */
async function claimTenantRow(
  session: ClaimSession,
  borrowed: BorrowedClient,
  key: string,
  tenant: string,
  digests: KeyDigests,
  options: ClaimOptions,
  fingerprint: Buffer | null,
  owner: string,
  deadlineAt: number,
): Promise<ClaimResult> {
  const what = `claim of "${key}"`;
  const opts = session.options;
  const text = attemptAndClaim(opts.schema, options.leaseTtlMs, Math.min(opts.operationTimeoutMs, options.leaseTtlMs), options.doneTtlMs, {
    tenant,
    lockId: digests.lockId,
    scope: digests.scope,
    key: digests.key,
    keyText: opts.keepKeyText ? key : null,
    fingerprint,
    owner,
  });
  const remainingMs = session.remaining(deadlineAt);
  if (remainingMs <= 0) throw new ClaimerUnavailableError(`${what}: deadline passed before sending`);
  let replies: QueryResult[];
  try {
    replies = (await borrowed.client.query({ text, query_timeout: Math.ceil(remainingMs) } as never)) as unknown as QueryResult[];
  } catch (error) {
    borrowed.noteError(error);
    throw error;
  }
  const begun = replies[0]!.rows[0] as BeginAttemptRow;
  const row = replies[replies.length - 1]!.rows[0] as ClaimRow | { state: 'skipped' };
  const tx = new TransactionLease(session, borrowed, tenant, digests, key, fingerprint);
  if (row.state === 'acquired') {
    const lease = { key, ownerToken: owner, fencingToken: Number(row.fencing_token) };
    return { state: 'acquired', attempt: row.attempt, receipt: new TransactionReceipt(lease, tx, options.doneTtlMs, opts.maxResultBytes, opts.schema) };
  }
  tx.finished = true;
  if (row.state === 'skipped') {
    // Step 1 answered busy, done or conflict, and holds no lock: end the empty transaction.
    await runWithin(borrowed, what, 'ROLLBACK', undefined, opts.operationTimeoutMs);
    borrowed.giveBack();
    switch (begun.state) {
      case 'done':
        return { state: 'done', receipt: new NonAcquiredReceipt(key, 'done'), result: storedResult(begun.outcome) as JsonValue };
      case 'conflict':
        throw conflictError(key, begun.stored_fingerprint, options);
      default:
        return { state: 'busy', receipt: new NonAcquiredReceipt(key, 'busy') };
    }
  }
  // A row a standalone claimer of the same table holds: answer as it does.
  await tx.end(what, false, true);
  return standaloneClaimResult(session, key, tenant, digests, owner, options, row);
}

/** What {@link guardClient} reads and writes on the lease of the transaction it guards. */
export interface GuardedLease {
  /** True once the claim is settled: the client refuses every query. */
  readonly finished: boolean;
  /** Set by the first refused transaction-control statement: the lease's commit then fails with it. */
  misuse?: TransactionMisuseError;
}

/**
 * The client the handler gets: refuses queries once the claim is settled, refuses statements that
 * end or nest the transaction (see transaction-control.ts), and refuses release. A refusal rejects
 * the query (or calls its callback) with the error; nothing reaches the server.
 */
export function guardClient(client: PoolClient, lease: GuardedLease): PoolClient {
  // One guarded query function per handle, not one per property read.
  const query = (...args: unknown[]): unknown => {
    const refused = refusal(args[0], lease);
    if (refused) {
      const callback = args.find((a) => typeof a === 'function') as ((e: Error) => void) | undefined;
      if (callback) return void callback(refused);
      return Promise.reject(refused);
    }
    return (client.query as (...a: unknown[]) => unknown)(...args);
  };
  return new Proxy(client, {
    get(target, property) {
      if (property === 'query') return query;
      if (property === 'release') {
        return () => {
          throw new TransactionAbortedError('ctx.transaction is returned to the pool by twophase; do not release it');
        };
      }
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** Why a query must not be sent on the guarded client, or undefined. */
function refusal(query: unknown, lease: GuardedLease): Error | undefined {
  if (lease.finished) return new TransactionAbortedError('ctx.transaction was used after its claim was settled (committed or rolled back); nothing was sent');
  const text = typeof query === 'string' ? query : (query as { text?: unknown } | null | undefined)?.text;
  if (typeof text !== 'string') return undefined;
  const statement = transactionControl(text);
  if (statement === undefined) return undefined;
  const error = new TransactionMisuseError(statement);
  lease.misuse ??= error;
  return error;
}
