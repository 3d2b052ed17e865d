/**
 * Every error twophase throws. One base class with a stable `code`, a `retriable` flag and the
 * underlying `cause`; `name` is the class name. Library code never throws a bare `Error`.
 */

/** Stable machine-readable codes, one per error class. */
export type TwophaseErrorCode =
  | 'CONFIGURATION'
  | 'INVALID_KEY'
  | 'KEY_CONFLICT'
  | 'LEASE_LOST'
  | 'NO_LEASE'
  | 'RECEIPT_STATE'
  | 'RESULT_TOO_LARGE'
  | 'CLAIMER_UNAVAILABLE'
  | 'DEPLOYMENT_VALIDATION'
  | 'INVALID_MESSAGE'
  | 'INVALID_DISPOSITION'
  | 'RETRYABLE_HANDLER'
  | 'PERMANENT_HANDLER'
  | 'TIMEOUT'
  | 'SHUTDOWN'
  | 'IN_PROGRESS'
  | 'PREVIOUS_ATTEMPT_FAILED'
  | 'TRANSACTION_UNAVAILABLE'
  // A transactional claimer refused a BEGIN, COMMIT or ROLLBACK sent through ctx.transaction.
  | 'TRANSACTION_MISUSE'
  | 'OUTBOX_NOT_AVAILABLE'
  | 'OUTBOX_NO_TRANSACTION'
  | 'INVALID_OUTBOX_MESSAGE'
  | 'OUTBOX_ID_CONFLICT'
  // Adapters add codes of their own (BROKER_UNAVAILABLE, STALE_DELIVERY, …).
  | (string & {});

/** Base class of every twophase error. */
export class TwophaseError extends Error {
  /** Stable code for programmatic checks (never parse `message`). */
  readonly code: TwophaseErrorCode;
  /** True when the same operation may succeed if tried again later. */
  readonly retriable: boolean;

  constructor(code: TwophaseErrorCode, message: string, options?: { cause?: unknown; retriable?: boolean }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retriable = options?.retriable ?? false;
  }
}

/** An option or a combination of options is invalid. Thrown at construction, never mid-flight. */
export class ConfigurationError extends TwophaseError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('CONFIGURATION', message, options);
  }
}

/** An idempotency key is empty, too long, not a string, or has characters a store refuses. */
export class InvalidKeyError extends TwophaseError {
  constructor(message: string) {
    super('INVALID_KEY', message);
  }
}

/** The key is known with a different payload fingerprint (same key, different message). */
export class KeyConflictError extends TwophaseError {
  constructor(
    readonly key: string,
    readonly storedFingerprint: string,
    readonly givenFingerprint: string,
  ) {
    super('KEY_CONFLICT', `key "${key}" was claimed with a different payload fingerprint`);
  }
}

/**
 * The receipt's lease was taken over by a newer owner (higher fencing token). Final: repeating the
 * operation repeats this error.
 */
export class LeaseLostError extends TwophaseError {
  constructor(
    readonly key: string,
    readonly fencingToken: number,
    operation: string,
  ) {
    super('LEASE_LOST', `${operation} refused: the lease on "${key}" (fencing token ${fencingToken}) was lost to a newer owner`);
  }
}

/** An operation on a receipt that never held a lease (a `done` or `busy` claim). */
export class NoLeaseError extends TwophaseError {
  constructor(readonly key: string, operation: string, state: string) {
    super('NO_LEASE', `${operation} refused: the claim on "${key}" is ${state}, it holds no lease`);
  }
}

/** An operation that contradicts an earlier one on the same receipt (commit after release, …). */
export class ReceiptStateError extends TwophaseError {
  constructor(readonly key: string, operation: string, settledAs: string) {
    super('RECEIPT_STATE', `${operation} refused: the receipt for "${key}" was already ${settledAs}`);
  }
}

/** The JSON result given to `commit` is larger than the configured bound. Nothing was written. */
export class ResultTooLargeError extends TwophaseError {
  constructor(readonly sizeBytes: number, readonly maxBytes: number) {
    super('RESULT_TOO_LARGE', `commit result is ${sizeBytes} bytes, more than the ${maxBytes}-byte limit`);
  }
}

/**
 * A result JSON cannot store as it is: a BigInt, a cycle, a function, symbol, Map or Set (which
 * JSON would drop or empty), or NaN, Infinity or -Infinity (which JSON writes as null), so a
 * replay would return something else. Names where and what.
 * Nothing was written; not retriable (the same function returns the same kind of value).
 */
export class UnstorableResultError extends TwophaseError {
  constructor(readonly path: string, readonly problem: string) {
    super('RESULT_NOT_STORABLE', `the result cannot be stored: ${path} ${problem}; return a JSON value (for example a BigInt as a string, a Map as an object)`);
  }
}

/**
 * An adapter's entry point was loaded in a project without the client library it uses (an
 * optional peer dependency npm does not install by itself). Names the package and the fix.
 */
export class MissingPeerDependencyError extends TwophaseError {
  /** The first missing package. */
  readonly peer: string;
  /** Every missing package the entry point needs, in the order it checks them. */
  readonly peers: readonly string[];

  /** @param peer the missing package, or every missing one (named together, one install command) */
  constructor(peer: string | readonly string[], readonly entry: string, options?: { cause?: unknown }) {
    const peers = typeof peer === 'string' ? [peer] : [...peer];
    const named = peers.length === 1 ? `the package "${peers[0]}", which is not installed` : `the packages ${peers.map((p) => `"${p}"`).join(' and ')}, which are not installed`;
    super('MISSING_PEER', `${entry} needs ${named} (twophase declares ${peers.length === 1 ? 'it as an optional peer dependency' : 'them as optional peer dependencies'}). Install ${peers.length === 1 ? 'it' : 'them'} in your project: npm install ${peers.join(' ')}`, options);
    this.peer = peers[0]!;
    this.peers = peers;
  }
}

/** The claim store could not be reached or did not answer in time. Retriable. */
export class ClaimerUnavailableError extends TwophaseError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('CLAIMER_UNAVAILABLE', message, { cause: options?.cause, retriable: true });
  }
}

/** Startup checks found the claimer unfit for the declared deployment. Lists every problem. */
export class DeploymentValidationError extends TwophaseError {
  constructor(readonly problems: readonly string[]) {
    super('DEPLOYMENT_VALIDATION', `deployment validation failed:\n- ${problems.join('\n- ')}`);
  }
}

/** A delivery cannot be handled at all (undecodable body, missing or bad key). Dead-lettered. */
export class InvalidMessageError extends TwophaseError {
  constructor(
    readonly reason: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super('INVALID_MESSAGE', message, options);
  }
}

/** A handler returned something that is not a disposition. Never treated as an implicit ack. */
export class InvalidDispositionError extends TwophaseError {
  /**
   * @param received what the handler returned (or passed to a disposition factory)
   * @param problem what is wrong with it, when a factory (`ack`, `requeue`, `reject`) refused its
   *   argument; default: the value is not a disposition at all
   */
  constructor(received: unknown, problem?: string) {
    super('INVALID_DISPOSITION', problem ?? `handler returned ${describe(received)}, not a disposition (ack(), requeue() or reject())`);
  }
}

/** Throw from a handler to ask for a retry (release, requeue with backoff, up to maxAttempts). */
export class RetryableError extends TwophaseError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('RETRYABLE_HANDLER', message, { cause: options?.cause, retriable: true });
  }
}

/**
 * Throw from a handler when retrying cannot help: release and dead-letter at once. An adapter's
 * error of the same nature (the handler's own code at fault, so a retry meets it again) extends
 * it with its own `code`: the PostgreSQL adapter's `TransactionMisuseError`.
 */
export class PermanentError extends TwophaseError {
  /** @param options.code the error's stable code; default `PERMANENT_HANDLER` */
  constructor(message: string, options?: { cause?: unknown; code?: TwophaseErrorCode }) {
    super(options?.code ?? 'PERMANENT_HANDLER', message, { cause: options?.cause });
  }
}

/** An operation passed its own deadline. Retriable. */
export class TimeoutError extends TwophaseError {
  constructor(message: string) {
    super('TIMEOUT', message, { retriable: true });
  }
}

/** Work was interrupted because the consumer is shutting down. */
export class ShutdownError extends TwophaseError {
  constructor(message = 'consumer is shutting down') {
    super('SHUTDOWN', message, { retriable: true });
  }
}

/**
 * `runOnce`: another caller holds the key's lease (its run is still going), and it did not finish
 * within the call's `waitMs`. Retriable: ask again later (an HTTP layer answers 409 Conflict).
 */
export class InProgressError extends TwophaseError {
  constructor(
    readonly key: string,
    /** How long this call waited for the other run, ms (0 when it did not wait). */
    readonly waitedMs: number,
  ) {
    super('IN_PROGRESS', `"${key}" is being run by another caller${waitedMs > 0 ? ` (waited ${waitedMs} ms)` : ''}; try again later`, { retriable: true });
  }
}

/**
 * `runOnce`: an earlier run of the key failed under `onFailure: 'record'`, or ended without
 * settling (its process crashed, its lease was lost), so its effect may be partly applied. The
 * function is not run again until a call passes `retry: true`. Not retriable as is.
 */
export class PreviousAttemptFailedError extends TwophaseError {
  constructor(
    readonly key: string,
    /** Acquisitions of the key before this call (earlier blocked calls included). */
    readonly previousAttempts: number,
  ) {
    super(
      'PREVIOUS_ATTEMPT_FAILED',
      `an earlier run of "${key}" failed or did not finish (${previousAttempts} earlier attempt${previousAttempts === 1 ? '' : 's'}); its effect may be partly applied, so it is run again only when the call passes retry: true`,
    );
  }
}

/**
 * The handler used `ctx.transaction`, but the claimer gives no transaction (a claimer that is not
 * transactional, such as the PostgreSQL claimer in its default standalone mode, or the `failOpen`
 * path). Not retriable: the deployment must change (`requireTransaction` in the consumer options
 * refuses the combination at construction). `cause` is what the handler threw.
 */
export class TransactionUnavailableError extends TwophaseError {
  constructor(options?: { cause?: unknown }) {
    super(
      'TRANSACTION_UNAVAILABLE',
      "the handler used ctx.transaction, but the claimer gives no transaction (ctx.transaction is undefined): use a transactional claimer, e.g. new PostgresClaimer({ pool }, { mode: 'transactional' })" +
        (options?.cause instanceof Error ? ` (the handler threw: ${options.cause.message})` : ''),
      options,
    );
  }
}

/**
 * `ctx.outbox` was used where nothing can stage a message with the effect: the claimer is not
 * transactional (the outbox rows must commit in the claim's transaction), or the run had no claim
 * (`failOpen`). Fix: use `new PostgresClaimer({ pool }, { mode: 'transactional' })`, or stage
 * into a transaction of your own with `stageOutbox(client, messages)` from `twophase/postgres`.
 */
export class OutboxNotAvailableError extends TwophaseError {
  constructor(message: string) {
    super('OUTBOX_NOT_AVAILABLE', message);
  }
}

/**
 * Staging found no open transaction: the client is in auto-commit (no `BEGIN`), or the
 * transaction already ended (the handler's claim was settled, the caller committed or rolled
 * back). A row staged there would be published without the effect it belongs to, so nothing was
 * written. Fix: stage between `BEGIN` and `COMMIT`, before the handler returns.
 */
export class OutboxTransactionError extends TwophaseError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('OUTBOX_NO_TRANSACTION', message, options);
  }
}

/** An outbox message is malformed (no destination, a header that is not a string, …). Nothing was staged. */
export class InvalidOutboxMessageError extends TwophaseError {
  constructor(message: string) {
    super('INVALID_OUTBOX_MESSAGE', message);
  }
}

/**
 * A message was staged under an id the outbox already holds: the same `idScope` was used for two
 * different units of work. Nothing of the call was staged (the statement failed, and with it the
 * caller's transaction).
 */
export class OutboxIdConflictError extends TwophaseError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('OUTBOX_ID_CONFLICT', message, options);
  }
}

/** True when `error` is a twophase error flagged retriable (store outages, timeouts, retryable handler errors). */
export function isRetriable(error: unknown): boolean {
  return error instanceof TwophaseError && error.retriable;
}

function describe(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (value === null) return 'null';
  if (typeof value === 'object') return `an object (${Object.keys(value as object).slice(0, 5).join(', ') || 'no keys'})`;
  if (typeof value === 'function') return `the function ${value.name || '(anonymous)'} itself (call it: return ${value.name || 'ack'}(…))`;
  return `${typeof value} ${String(value).slice(0, 40)}`;
}
