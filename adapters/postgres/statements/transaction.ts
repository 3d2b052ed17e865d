/**
 * Statements of the transactional (inbox) mode, in the order one delivery sends them on its pool
 * client:
 * 1. {@link beginAttempt} (auto-committed): advisory lock of the key's scope without waiting, the
 *    done check, and the attempt count written outside the transaction to come;
 * 2. {@link beginTransaction}: BEGIN with per-transaction limits from the lease;
 * 3. the claim (statements/claim.ts, with the attempt from step 1);
 * 4. the handler's own statements;
 * 5. commit: {@link complete} then COMMIT; or release: ROLLBACK;
 * 6. {@link endAttempt} (auto-committed): forget the count when done or dead-lettered, unlock.
 */

/** Parameters: [tenant,] lock id, scope digest, key digest, fingerprint digest or NULL, retention ms. */
export function beginAttempt(schema: string, tenant: boolean): string {
  return tenant
    ? `SELECT * FROM ${schema}.twophase_begin_attempt_tenant($1, $2, $3, $4, $5, $6)`
    : `SELECT * FROM ${schema}.twophase_begin_attempt($1, $2, $3, $4, $5)`;
}

/** A row of {@link beginAttempt}. */
export interface BeginAttemptRow {
  readonly state: 'busy' | 'done' | 'conflict' | 'counted';
  readonly attempts: number;
  readonly outcome: { result?: unknown } | null;
  readonly stored_fingerprint: Buffer | null;
}

/**
 * BEGIN, then limits local to this transaction (`SET LOCAL`), from the lease:
 * - `idle_in_transaction_session_timeout = leaseMs`: a handler that leaves the transaction idle
 *   longer (hung, or its process stopped without closing the socket) has its session terminated by
 *   the server, which rolls the transaction back; a late COMMIT then fails;
 * - `statement_timeout = leaseMs`: no single statement of the transaction runs longer;
 * - `lock_timeout = lockMs`: the claim (and the handler's statements) never wait longer for a row
 *   lock; a claim that passes it is `busy`.
 * Integers only are interpolated (validated by the caller), so the text is one simple query.
 * (https://www.postgresql.org/docs/current/runtime-config-client.html)
 */
export function beginTransaction(leaseMs: number, lockMs: number): string {
  if (!Number.isInteger(leaseMs) || !Number.isInteger(lockMs)) throw new RangeError('integer milliseconds expected');
  return `BEGIN; SET LOCAL idle_in_transaction_session_timeout = ${leaseMs}; SET LOCAL statement_timeout = ${leaseMs}; SET LOCAL lock_timeout = ${lockMs}`;
}

/** Parameters: lock id, scope digest, forget (boolean). */
export function endAttempt(schema: string): string {
  return `SELECT ${schema}.twophase_end_attempt($1, $2, $3) AS unlocked`;
}
