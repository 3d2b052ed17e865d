/**
 * The transactional (inbox) mode inside a database library's own transaction (a
 * {@link TransactionPort}: Drizzle's `db.transaction`, Prisma's `$transaction`…).
 *
 * The library owns BEGIN, COMMIT and ROLLBACK, and only runs code inside a callback. So the claim
 * is turned inside out: `claim()` opens the library's transaction, and inside its callback
 * 1. sends `twophase_port_claim` (statements/port.ts): the transaction's limits, the key's
 *    advisory lock at transaction level without waiting (`busy` when another delivery holds it),
 *    the done check and the fencing token;
 * 2. counts the attempt on the claimer's own pool, auto-committed, while the transaction holds
 *    the key's lock, so neither a rollback nor a crash erases it;
 * 3. resolves the claim with the receipt (`ctx.transaction` is the library's transaction object)
 *    and waits, still inside the callback, until the receipt is settled:
 *    - commit: the completed claim row is written in the transaction, the callback returns, the
 *      library COMMITs; `commit()` resolves only once that COMMIT resolved;
 *    - release: the callback rejects with an internal signal; the library rolls back.
 * `busy`, `done` and a fingerprint conflict roll the empty transaction back before the claim
 * answers. The advisory lock ends with the transaction, so there is nothing to unlock.
 *
 * A worker that dies mid-transaction, or a transaction idle past the lease: PostgreSQL ends the
 * session (the limits of step 1), rolls back and drops the lock; the library's late COMMIT fails
 * and `commit()` rejects with {@link TransactionAbortedError}.
 */
import { randomUUID } from 'node:crypto';
import type { QueryResultRow } from 'pg';
import { type ClaimOptions, ClaimerUnavailableError, type ClaimResult, type JsonValue, KeyConflictError } from '../../src';
import { type LeaseIdentity, type LeaseOperations, type LeaseOutcome, NonAcquiredReceipt } from '../../src/adapter-kit';
import { driverError, mayHaveCommitted, SQLSTATE, sqlState, toClaimerError, TransactionAbortedError } from './errors';
import { type KeyDigests, sha256 } from './key-digest';
import type { ClaimSession } from './claim-session';
import { portExecutor } from './port-executor';
import type { SqlExecutor } from './outbox-staging';
import { conflictError } from './statement-runner';
import { storedResult } from './stored-outcome';
import { outcomeJson } from './stored-outcome';
import { countAttempt, forgetAttempts, portClaim, type PortClaimRow, portCompletion } from './statements/port';
import { uncountAttempt as uncountStatement } from './statements/transaction';
import { TransactionReceipt } from './transaction-lease';
import { claimLimits, type SqlRow, type TransactionPort } from './transaction-port';

/** How the receipt was settled: what the library's callback does next. */
type Settlement = { readonly kind: 'commit'; readonly lease: LeaseIdentity; readonly resultJson: string | undefined; readonly doneTtlMs: number } | { readonly kind: 'release' };

/** Rejects the library's callback so that it rolls back; never leaves twophase. */
class RollbackSignal extends Error {
  constructor(readonly reason: 'released' | 'not acquired' | 'abandoned') {
    super(`twophase rolls this transaction back (${reason})`);
    this.name = 'RollbackSignal';
  }
}

/** A failure of the completion statement, carried out of the library's callback. */
class CompletionFailure extends Error {
  constructor(readonly error: unknown) {
    super('the completion statement failed', { cause: error });
    this.name = 'CompletionFailure';
  }
}

/** Store primitives of one claim held in a library's transaction. */
export class PortLease<Tx> implements LeaseOperations {
  /** Set once commit or release began. */
  finished = false;
  /** The library's transaction object, handed to the handler. */
  readonly handle: Tx;
  /** Outbox staging through the same transaction. */
  readonly executor: SqlExecutor;
  private settle!: (settlement: Settlement) => void;
  /** Resolves with the receipt's settlement (the library's callback waits for it). */
  readonly settlement = new Promise<Settlement>((resolve) => (this.settle = resolve));
  /** Set by the callback after the completion: false when the result did not fit once stored. */
  kept = true;
  /** The library's transaction, settled: resolves after COMMIT, rejects after a rollback or a failure. */
  ended: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly session: ClaimSession,
    private readonly port: TransactionPort<Tx>,
    tx: Tx,
    private readonly digests: KeyDigests,
    private readonly key: string,
  ) {
    this.handle = tx;
    this.executor = portExecutor(port, tx);
  }

  async commit(lease: LeaseIdentity, resultJson: string | undefined, doneTtlMs: number): Promise<LeaseOutcome> {
    const what = `commit of "${this.key}"`;
    if (this.finished) throw new TransactionAbortedError(`${what}: the transaction already ended`);
    this.finished = true;
    this.settle({ kind: 'commit', lease, resultJson, doneTtlMs });
    try {
      await this.ended;
    } catch (caught) {
      throw commitError(what, caught, this.port as TransactionPort<unknown>);
    }
    if (!this.kept) this.session.logger.warn({ key: this.key }, 'the commit result did not fit the 4096-byte outcome column once stored; the key is completed without it');
    return 'ok';
  }

  async release(_lease: LeaseIdentity, resetAttempts: boolean, uncountAttempt = false): Promise<LeaseOutcome> {
    if (this.finished) return 'ok';
    this.finished = true;
    if (resetAttempts || uncountAttempt) {
      // While the transaction still holds the key's lock: no other claim counts in between.
      const text = resetAttempts ? forgetAttempts(this.session.options.schema) : uncountStatement(this.session.options.schema);
      await this.session.query(`release of "${this.key}"`, text, [this.digests.scope]).catch((error: unknown) => {
        this.session.logger.warn({ key: this.key, err: error }, `release of "${this.key}": could not ${resetAttempts ? 'reset' : 'lower'} the attempt count; the next attempt counts on`);
      });
    }
    this.settle({ kind: 'release' });
    // The rollback's own outcome does not matter: a failed rollback ends the session, which rolls back.
    await this.ended.catch(() => undefined);
    return 'ok';
  }

  /** The lease is the transaction: the server ends it when idle past the lease. Nothing to send. */
  async extend(): Promise<LeaseOutcome> {
    if (this.finished) throw new TransactionAbortedError(`extend of "${this.key}": the transaction already ended`);
    return 'ok';
  }
}

/** The {@link TransactionAbortedError} of a library transaction that did not commit. */
function commitError(what: string, caught: unknown, port: TransactionPort<unknown>): TransactionAbortedError {
  const failed = caught instanceof CompletionFailure ? caught.error : caught;
  const closedByLibrary = port.rolledBackBy?.(failed);
  if (closedByLibrary !== undefined) return new TransactionAbortedError(`${what}: the transaction did not commit (${closedByLibrary}); nothing was applied`, { cause: failed });
  if (caught instanceof CompletionFailure) {
    const cause = driverError(caught.error);
    const reason =
      sqlState(cause) === SQLSTATE.divisionByZero
        ? "the key's row is held live by another claimer of the same table, or the claim's transaction was ended through the library's transaction object (a COMMIT or ROLLBACK sent by the handler)"
        : errorText(cause);
    return new TransactionAbortedError(`${what}: the transaction did not commit (${reason}); nothing was applied`, { cause });
  }
  const cause = driverError(caught);
  return new TransactionAbortedError(`${what}: the transaction did not commit (${errorText(cause)}); ${mayHaveCommitted(cause) ? MAY_HAVE_COMMITTED : 'nothing was applied'}`, { cause });
}

const MAY_HAVE_COMMITTED = 'the connection failed, so it may have committed: a redelivery finds the key done, or runs it once';

/**
 * The error's message, without a library's call-site header: Prisma starts its messages with
 * "Invalid `prisma.$queryRawUnsafe()` invocation:", which names twophase's own statement call. A
 * wrapper with a cause (Drizzle's "Failed query: rollback" over the driver's error) is shown as
 * its first line, then the cause's message.
 */
function errorText(error: unknown): string {
  const text = (error instanceof Error ? error.message : String(error)).replace(/^\s*Invalid `[^`]*` invocation:\s*/, '');
  const cause = (error as { cause?: unknown } | null)?.cause;
  return cause instanceof Error && sqlState(error) === undefined ? `${text.split('\n')[0]}: ${cause.message}` : text;
}

/**
 * Claims `key` in a new transaction of the claimer's port (see the file header).
 * @throws KeyConflictError, SchemaMismatchError, ClaimerUnavailableError (no connection, or no
 *   answer, within `operationTimeoutMs`)
 */
export function claimThroughPort<Tx>(session: ClaimSession, port: TransactionPort<Tx>, key: string, digests: KeyDigests, options: ClaimOptions): Promise<ClaimResult> {
  const what = `claim of "${key}"`;
  const opts = session.options;
  const fingerprint = options.fingerprint === undefined ? null : sha256(options.fingerprint);
  const owner = randomUUID();
  return new Promise<ClaimResult>((resolve, reject) => {
    /** Set once the claim answered (or gave up): a later acquisition rolls back at once. */
    let answered = false;
    const answer = (result: ClaimResult | Error): void => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      if (result instanceof Error) reject(result);
      else resolve(result);
    };
    const timer = setTimeout(
      () => answer(new ClaimerUnavailableError(`${what}: no answer from the ${port.name} transaction within ${opts.operationTimeoutMs} ms (no connection, or PostgreSQL unreachable)`)),
      opts.operationTimeoutMs,
    );
    /** What the rolled-back transaction answers once it ended (busy, done, conflict). */
    let afterRollback: ClaimResult | Error | undefined;
    let lease: PortLease<Tx> | undefined;

    const work = async (tx: Tx): Promise<void> => {
      if (answered) throw new RollbackSignal('abandoned');
      const rows = await port.query(tx, portClaim(opts.schema), [
        digests.lockId,
        digests.key.toString('hex'),
        fingerprint?.toString('hex') ?? null,
        options.leaseTtlMs,
        Math.min(opts.operationTimeoutMs, options.leaseTtlMs),
      ]);
      const row = rows[0] as unknown as PortClaimRow | undefined;
      if (!row) throw new ClaimerUnavailableError(`${what}: twophase_port_claim answered no row`);
      if (row.state !== 'acquired') {
        afterRollback = notAcquired(key, row, options);
        throw new RollbackSignal('not acquired');
      }
      if (answered) throw new RollbackSignal('abandoned');
      const [counted] = await session.query<{ attempts: number }>(`${what} (attempt count)`, countAttempt(opts.schema), [digests.scope, options.doneTtlMs]);
      const attempt = counted!.attempts;
      if (answered) throw new RollbackSignal('abandoned');
      const started = row.started!;
      const current = new PortLease(session, port, tx, digests, key);
      current.ended = ended;
      lease = current;
      const identity = { key, ownerToken: owner, fencingToken: Number(row.fencing_token) };
      answer({ state: 'acquired', attempt, receipt: new TransactionReceipt<Tx>(identity, current, options.doneTtlMs, opts.maxResultBytes, opts.schema) });
      const settlement = await current.settlement;
      if (settlement.kind === 'release') throw new RollbackSignal('released');
      let completed: readonly SqlRow[];
      try {
        completed = await port.query(tx, portCompletion(opts.schema), [
          digests.key.toString('hex'),
          opts.keepKeyText ? key : null,
          fingerprint?.toString('hex') ?? null,
          attempt,
          settlement.lease.ownerToken,
          String(settlement.lease.fencingToken),
          outcomeJson(settlement.resultJson),
          settlement.doneTtlMs,
          digests.scope.toString('hex'),
          started,
        ]);
      } catch (error) {
        throw new CompletionFailure(error);
      }
      current.kept = (completed[0] as QueryResultRow | undefined)?.kept !== 'false';
    };

    const ended = Promise.resolve()
      .then(() => port.transaction(work, claimLimits(options.leaseTtlMs, opts.operationTimeoutMs)))
      .then(
        () => undefined,
        (error: unknown) => {
          if (afterRollback !== undefined) answer(afterRollback);
          else if (!(error instanceof RollbackSignal)) answer(error instanceof KeyConflictError ? error : toClaimerError(driverError(error), what));
          throw error;
        },
      );
    // Read by the lease's commit and release; a rejection nobody reads (an abandoned claim) is not unhandled.
    const gaveNoAnswer = (): void => {
      if (!lease) answer(new ClaimerUnavailableError(`${what}: the ${port.name} transaction ended before the claim answered`));
    };
    ended.then(gaveNoAnswer, gaveNoAnswer);
  });
}

/** The answer of a claim that was not acquired (its transaction rolls back first). */
function notAcquired(key: string, row: PortClaimRow, options: ClaimOptions): ClaimResult | Error {
  switch (row.state) {
    case 'done':
      return { state: 'done', receipt: new NonAcquiredReceipt(key, 'done'), result: storedResult(row.outcome === null ? null : (JSON.parse(row.outcome) as { result?: unknown })) as JsonValue };
    case 'conflict':
      return conflictError(key, row.stored_fingerprint === null ? null : Buffer.from(row.stored_fingerprint, 'hex'), options);
    default:
      return { state: 'busy', receipt: new NonAcquiredReceipt(key, 'busy') };
  }
}
