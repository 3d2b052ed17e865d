/**
 * Errors of the PostgreSQL adapter, and the one function that classifies what `pg` or the server
 * reports: a deployment fault to fix (configuration, schema), a refused key, or a transient
 * store failure (retry later). Twophase's own errors pass through unchanged.
 */
import { ClaimerUnavailableError, ConfigurationError, InvalidKeyError, PermanentError, TwophaseError } from '../../src';

/**
 * The inbox tables are missing, older than this version of twophase expects, or do not have the
 * expected columns. Not retriable: run `twophase postgres migrate` (or the exported migrations).
 */
export class SchemaMismatchError extends TwophaseError {
  constructor(
    message: string,
    /** Every difference found, one line each. */
    readonly problems: readonly string[] = [],
  ) {
    super('SCHEMA_MISMATCH', problems.length === 0 ? message : `${message}:\n- ${problems.join('\n- ')}`);
  }
}

/**
 * The claim's transaction ended without applying: COMMIT failed, the session was terminated
 * (`idle_in_transaction_session_timeout`, `pg_terminate_backend`, a lost connection) or a statement
 * of the handler failed and aborted the transaction. The effect written through the transaction
 * and the claim were both rolled back; the delivery must be retried. Not retriable on this receipt
 * (the transaction is gone); the consumer requeues the message instead.
 */
export class TransactionAbortedError extends TwophaseError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('TRANSACTION_ABORTED', message, options);
  }
}

/**
 * The handler sent a statement through `ctx.transaction` that would end the inbox transaction or
 * open another one (BEGIN, COMMIT, ROLLBACK, END, ABORT, PREPARE TRANSACTION): refused before it
 * was sent. Savepoints are allowed. A {@link PermanentError} (code `TRANSACTION_MISUSE`): the
 * handler's own code sent it, so a retry would meet it again. A handler that lets it propagate
 * has its delivery dead-lettered at once (`permanent_error`), its writes rolled back with the
 * claim; one that catches it and goes on has its commit refused (`TransactionAbortedError`), so
 * the delivery is requeued like any rolled-back transaction. The fix: leave transaction control
 * to twophase (the handler or a data-access helper it calls), then replay the dead letter.
 */
export class TransactionMisuseError extends PermanentError {
  constructor(
    /** The refused statement's leading keywords (`COMMIT`, `BEGIN`, …). */
    readonly statement: string,
  ) {
    super(
      `${statement} refused on ctx.transaction: the inbox transaction is twophase's (it commits the effect with the claim), so ${statement} would ` +
        `${statement === 'BEGIN' || statement === 'START TRANSACTION' ? 'open a transaction that a later COMMIT ends early' : 'end it outside twophase'}; nothing was sent. ` +
        'Write through ctx.transaction without BEGIN/COMMIT/ROLLBACK (use SAVEPOINT for a nested scope); the delivery fails and its writes roll back',
      { code: 'TRANSACTION_MISUSE' },
    );
  }
}

/** SQLSTATE classes and codes the adapter tells apart (https://www.postgresql.org/docs/current/errcodes-appendix.html). */
export const SQLSTATE = {
  foreignKeyViolation: '23503',
  checkViolation: '23514',
  lockNotAvailable: '55P03',
  queryCanceled: '57014',
  undefinedTable: '42P01',
  undefinedFunction: '42883',
  undefinedColumn: '42703',
  invalidSchemaName: '3F000',
  insufficientPrivilege: '42501',
  inFailedTransaction: '25P02',
  idleInTransactionTimeout: '25P03',
  divisionByZero: '22012',
} as const;

/** The SQLSTATE of a `pg` error, or undefined for other errors (socket errors, timeouts). */
export function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** `error` and its causes, outermost first (at most 4: a library's wrapper keeps the driver's error as `cause`). */
export function causeChain(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let current = error; chain.length < 4 && current !== null && current !== undefined; current = (current as { cause?: unknown }).cause) chain.push(current);
  return chain;
}

/**
 * The error that carries the SQLSTATE in a library's error: the error itself, or one of its
 * causes (Drizzle wraps the driver's error in its own `DrizzleQueryError`); else `error`.
 */
export function driverError(error: unknown): unknown {
  return causeChain(error).find((e) => sqlState(e) !== undefined) ?? error;
}

/**
 * Whether a COMMIT that failed with `error` may still have committed: only when the connection
 * failed with no SQLSTATE. node-postgres refuses a query on a client whose connection had already
 * failed or was closed ("Client has encountered a connection error and is not queryable", "Client
 * was closed and is not queryable") without sending it: that COMMIT never reached the server,
 * which rolls back the transaction of a session that ended. A library's error is read through its
 * causes.
 */
export function mayHaveCommitted(error: unknown): boolean {
  return !causeChain(error).some((e) => sqlState(e) !== undefined || (e instanceof Error && / and is not queryable$/.test(e.message)));
}

/**
 * Turns any error of an operation on `what` into a twophase error:
 * - a {@link TwophaseError} is returned as is;
 * - a missing table, function, column or schema becomes {@link SchemaMismatchError};
 * - a missing privilege becomes {@link ConfigurationError};
 * - a foreign-key violation (a tenant key for a tenant the tenants table does not hold) becomes
 *   {@link InvalidKeyError}, which the consumer dead-letters with reason `invalid_key`;
 * - everything else (connection refused or reset, the server shutting down, statement timeouts,
 *   serialization failures, deadlines) becomes a retriable {@link ClaimerUnavailableError}.
 */
export function toClaimerError(error: unknown, what: string): TwophaseError {
  if (error instanceof TwophaseError) return error;
  const message = error instanceof Error ? error.message : String(error);
  const state = sqlState(error);
  switch (state) {
    case SQLSTATE.undefinedTable:
    case SQLSTATE.undefinedFunction:
    case SQLSTATE.undefinedColumn:
    case SQLSTATE.invalidSchemaName:
      return new SchemaMismatchError(`${what}: the twophase schema (inbox and outbox tables) is missing or out of date (PostgreSQL said: ${message}); run \`twophase postgres migrate\``);
    case SQLSTATE.insufficientPrivilege:
      return new ConfigurationError(`${what}: the database user lacks a privilege the claimer needs (PostgreSQL said: ${message})`, { cause: error });
    case SQLSTATE.foreignKeyViolation:
      return new InvalidKeyError(`${what}: the tenant does not exist in the tenants table (PostgreSQL said: ${message})`);
    default:
      return new ClaimerUnavailableError(`${what}: PostgreSQL unavailable: ${message}`, { cause: error });
  }
}
