import { escapeLiteral } from 'pg';
/**
 * Statements of the transactional (inbox) mode, in the order one delivery sends them on its pool
 * client:
 * 1–3. {@link attemptAndClaim}, one round trip: advisory lock of the key's scope without waiting,
 *    the done check and the attempt count (committed on their own, outside the transaction to
 *    come); BEGIN with per-transaction limits from the lease; the claim row, in the transaction;
 * 4. the handler's own statements;
 * 5. commit: {@link completeCommitUnlock} (the row completed and the attempt count deleted in
 *    the transaction, COMMIT, unlock: one round trip); or release: ROLLBACK then
 *    {@link endAttempt} (forget the count when dead-lettered, unlock).
 */

/** The row of `twophase_begin_attempt` (the first answer of {@link attemptAndClaim}). */
export interface BeginAttemptRow {
  readonly state: 'busy' | 'done' | 'conflict' | 'counted';
  readonly attempts: number;
  readonly outcome: { result?: unknown } | null;
  readonly stored_fingerprint: Buffer | null;
}

/**
 * Steps 1–3 in one round trip (one simple query, so values are written in as literals: integers
 * checked, digests as bytea hex, text through `escapeLiteral`):
 * 1. `twophase_begin_attempt` in its own implicit transaction, ended by the COMMIT that follows
 *    it (https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-FLOW-MULTI-STATEMENT),
 *    so the attempt count is durable before, and outside, the handler's transaction;
 * 2. BEGIN, then limits local to the transaction (`SET LOCAL`), from the lease:
 *    - `idle_in_transaction_session_timeout = leaseMs`: a handler that leaves the transaction idle
 *      longer (hung, or its process stopped without closing the socket) has its session
 *      terminated by the server, which rolls the transaction back; a late COMMIT then fails;
 *    - `statement_timeout = leaseMs`: no single statement of the transaction runs longer;
 *    - `lock_timeout = lockMs`: the claim (and the handler's statements) never wait longer for a
 *      row lock; a claim that passes it is `busy`
 *    (https://www.postgresql.org/docs/current/runtime-config-client.html);
 * 3. `twophase_claim_counted`: the claim with the attempt step 1 counted, or `skipped` when step 1
 *    answered busy, done or conflict (the caller then rolls the empty transaction back).
 * Answers: step 1's row first, the claim's row last.
 */
export function attemptAndClaim(
  schema: string,
  leaseMs: number,
  lockMs: number,
  retainMs: number,
  claim: { tenant?: string; lockId: string; scope: Buffer; key: Buffer; keyText: string | null; fingerprint: Buffer | null; owner: string },
): string {
  for (const n of [leaseMs, lockMs, retainMs]) if (!Number.isInteger(n) || n < 0) throw new RangeError('integer milliseconds expected');
  if (!/^-?\d{1,19}$/.test(claim.lockId)) throw new RangeError('lock id must be a decimal bigint');
  const tenant = claim.tenant === undefined ? [] : [literal(claim.tenant)];
  const suffix = claim.tenant === undefined ? '' : '_tenant';
  const begin = [...tenant, claim.lockId, literal(claim.scope), literal(claim.key), literal(claim.fingerprint), String(retainMs)].join(', ');
  const claimArgs = [...tenant, literal(claim.key), `${literal(claim.keyText)}::text`, literal(claim.fingerprint), literal(claim.owner), String(leaseMs)].join(', ');
  return (
    `SELECT * FROM ${schema}.twophase_begin_attempt${suffix}(${begin}); COMMIT; ` +
    `BEGIN; SET LOCAL idle_in_transaction_session_timeout = ${leaseMs}; SET LOCAL statement_timeout = ${leaseMs}; SET LOCAL lock_timeout = ${lockMs}; ` +
    `SELECT * FROM ${schema}.twophase_claim_counted${suffix}(${claimArgs})`
  );
}

/** Parameters: lock id, scope digest, forget (boolean). */
export function endAttempt(schema: string): string {
  return `SELECT ${schema}.twophase_end_attempt($1, $2, $3) AS unlocked`;
}

/**
 * The commit, in one round trip (a simple query of three statements):
 * 1. the claim row becomes `completed` (as statements/settle.ts `commit`) and the key's attempt
 *    count is deleted — both commit or vanish with the effect; should the row be missing (it
 *    cannot: this transaction inserted it), a division by zero aborts the transaction, so COMMIT
 *    turns into ROLLBACK rather than committing the effect without its claim;
 * 2. COMMIT;
 * 3. the advisory unlock.
 * `commitSql` is settle.commitUpdate's text, its parameters ([tenant,] key digest, owner token, fencing
 * token, outcome JSON, retention ms) written in as literals; the scope digest follows them.
 * Answers, in order: `kept` (as settle.commit), COMMIT's command tag, the unlock.
 */
export function completeCommitUnlock(commitSql: string, schema: string, values: readonly unknown[], scope: Buffer, lockId: string): string {
  if (!/^-?\d{1,19}$/.test(lockId)) throw new RangeError('lock id must be a decimal bigint');
  return `${completeStatement(commitSql, schema, values, scope)}; COMMIT; SELECT pg_advisory_unlock(${lockId})`;
}

/**
 * Step 1 of {@link completeCommitUnlock} alone: the claim row completed and the key's attempt
 * count deleted, in the open transaction; a missing row aborts the transaction (division by zero).
 * Answers one row: `kept`, `one`.
 */
export function completeStatement(commitSql: string, schema: string, values: readonly unknown[], scope: Buffer): string {
  const update = inline(commitSql, values);
  return (
    `WITH forgotten AS (DELETE FROM ${schema}.twophase_attempts WHERE scope_digest = ${literal(scope)}), done AS (${update}) ` +
    `SELECT (SELECT bool_and(kept) FROM done) AS kept, 1 / (SELECT count(*)::int FROM done) AS one`
  );
}

/** A value as an SQL literal: bytea hex, an escaped string, an integer, a boolean, NULL. */
export function literal(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (Buffer.isBuffer(value)) return `'\\x${value.toString('hex')}'::bytea`;
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) throw new RangeError('integers only');
    return String(value);
  }
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  return escapeLiteral(String(value));
}

/**
 * Replaces `$n` placeholders with literals, leaving quoted identifiers (`"…"`) and string literals
 * (`'…'`) as they are: a `$1` inside a quoted name is part of the name, not a placeholder.
 */
export function inline(sql: string, values: readonly unknown[]): string {
  return sql.replace(/"(?:[^"]|"")*"|'(?:[^']|'')*'|\$(\d+)/g, (match: string, n: string | undefined) => {
    if (n === undefined) return match;
    const index = Number(n) - 1;
    if (index < 0 || index >= values.length) throw new RangeError(`no value for $${n}`);
    return literal(values[index]);
  });
}
