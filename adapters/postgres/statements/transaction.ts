/**
 * Statements of the transactional (inbox) mode, in the order one delivery sends them on its pool
 * client:
 * 1. {@link beginAttempt} (auto-committed): advisory lock of the key's scope without waiting, the
 *    done check, and the attempt count written outside the transaction to come;
 * 2. {@link beginTransaction}: BEGIN with per-transaction limits from the lease;
 * 3. the claim (statements/claim.ts, with the attempt from step 1);
 * 4. the handler's own statements;
 * 5. commit: {@link complete} (the row completed and the attempt count deleted, in the
 *    transaction) then {@link commitAndUnlock}; or release: ROLLBACK then {@link endAttempt}
 *    (forget the count when dead-lettered, unlock).
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

/**
 * The commit's last statement in the transaction: the claim row becomes `completed` (as
 * statements/settle.ts `commit`) and the key's attempt count is deleted — both commit or vanish
 * with the effect. Parameters: [tenant,] key digest, owner token, fencing token, outcome JSON,
 * retention ms, scope digest. Answers `kept` like settle.commit.
 */
export function complete(schema: string, tenant: boolean, commitSql: string): string {
  const scope = tenant ? '$7' : '$6';
  return `WITH forgotten AS (DELETE FROM ${schema}.twophase_attempts WHERE scope_digest = ${scope}) ${commitSql}`;
}

/**
 * COMMIT and the advisory unlock in one round trip (a simple query of two statements). `lockId`
 * is the decimal bigint of key-digest.ts, checked here before it is written into the text.
 */
export function commitAndUnlock(lockId: string): string {
  if (!/^-?\d{1,19}$/.test(lockId)) throw new RangeError('lock id must be a decimal bigint');
  return `COMMIT; SELECT pg_advisory_unlock(${lockId})`;
}
