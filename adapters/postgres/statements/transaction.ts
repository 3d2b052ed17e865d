import { escapeLiteral } from 'pg';
/**
 * Statements of the transactional (inbox) mode, in the order one delivery sends them on its pool
 * client:
 * 1. {@link beginAttempt} (auto-committed): advisory lock of the key's scope without waiting, the
 *    done check, and the attempt count written outside the transaction to come;
 * 2. {@link beginAndClaim}: BEGIN with per-transaction limits from the lease, and the claim
 *    (the claim function of statements/claim.ts, with the attempt from step 1), in one round trip;
 * 3. (the claim row is now in the transaction);
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
 * BEGIN, then limits local to this transaction (`SET LOCAL`), from the lease, then the claim —
 * one simple query (one round trip), so its values are written into the text as literals:
 * integers checked here, digests as bytea hex, text through `escapeLiteral`.
 * - `idle_in_transaction_session_timeout = leaseMs`: a handler that leaves the transaction idle
 *   longer (hung, or its process stopped without closing the socket) has its session terminated by
 *   the server, which rolls the transaction back; a late COMMIT then fails;
 * - `statement_timeout = leaseMs`: no single statement of the transaction runs longer;
 * - `lock_timeout = lockMs`: the claim (and the handler's statements) never wait longer for a row
 *   lock; a claim that passes it is `busy`.
 * (https://www.postgresql.org/docs/current/runtime-config-client.html)
 * The claim's arguments: [tenant,] key digest, key text, fingerprint digest, owner, lease ms, attempt.
 */
export function beginAndClaim(schema: string, leaseMs: number, lockMs: number, claim: { tenant?: string; key: Buffer; keyText: string | null; fingerprint: Buffer | null; owner: string; attempt: number }): string {
  for (const n of [leaseMs, lockMs, claim.attempt]) if (!Number.isInteger(n) || n < 0) throw new RangeError('integer milliseconds and attempt expected');
  const bytes = (b: Buffer | null) => (b === null ? 'NULL' : `'\\x${b.toString('hex')}'::bytea`);
  const text = (t: string | null) => (t === null ? 'NULL' : escapeLiteral(t));
  const args = [
    ...(claim.tenant === undefined ? [] : [text(claim.tenant)]),
    bytes(claim.key),
    `${text(claim.keyText)}::text`,
    bytes(claim.fingerprint),
    text(claim.owner),
    String(leaseMs),
    String(claim.attempt),
  ].join(', ');
  const fn = claim.tenant === undefined ? 'twophase_claim' : 'twophase_claim_tenant';
  return (
    `BEGIN; SET LOCAL idle_in_transaction_session_timeout = ${leaseMs}; SET LOCAL statement_timeout = ${leaseMs}; ` +
    `SET LOCAL lock_timeout = ${lockMs}; SELECT * FROM ${schema}.${fn}(${args})`
  );
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
