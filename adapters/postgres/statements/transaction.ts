import { escapeLiteral } from 'pg';
/**
 * Statements of the transactional (inbox) mode, in the order one delivery sends them on its pool
 * client:
 * 1–2. {@link attemptAndBegin}, one round trip: advisory lock of the key's scope without waiting,
 *    the done check and the attempt count (committed on their own, outside the transaction to
 *    come); BEGIN with per-transaction limits from the lease and the fencing token drawn;
 * 3. the handler's own statements;
 * 4. commit: {@link completeCommitUnlock} (the claim row written `completed` and the attempt
 *    count deleted in the transaction, COMMIT, unlock: one round trip); or release: ROLLBACK then
 *    {@link endAttempt} (forget the count when dead-lettered, unlock).
 * No claim row is written before the commit: while the delivery runs, the advisory lock is the
 * claim (every transactional claimer of the key takes it first), and the row is written once,
 * already `completed`, in the transaction that applies the effect (one INSERT instead of an
 * INSERT and an UPDATE of the same row).
 */

/** The row of `twophase_begin_attempt` (the first answer of {@link attemptAndBegin}). */
export interface BeginAttemptRow {
  readonly state: 'busy' | 'done' | 'conflict' | 'counted';
  readonly attempts: number;
  readonly outcome: { result?: unknown } | null;
  readonly stored_fingerprint: Buffer | null;
}

/**
 * Steps 1–2 in one round trip (one simple query, so values are written in as literals: integers
 * checked, digests as bytea hex, text through `escapeLiteral`):
 * 1. `twophase_begin_attempt` in its own implicit transaction, ended by the COMMIT that follows
 *    it (https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-FLOW-MULTI-STATEMENT),
 *    so the attempt count is durable before, and outside, the handler's transaction;
 * 2. BEGIN, then limits local to the transaction (`set_config(…, true)`, as `SET LOCAL`), from
 *    the lease, and the claim's fencing token drawn from the fence sequence:
 *    - `idle_in_transaction_session_timeout = leaseMs`: a handler that leaves the transaction idle
 *      longer (hung, or its process stopped without closing the socket) has its session
 *      terminated by the server, which rolls the transaction back; a late COMMIT then fails;
 *    - `statement_timeout = leaseMs`: no single statement of the transaction runs longer;
 *    - `lock_timeout = lockMs`: the handler's statements never wait longer for a row lock
 *    (https://www.postgresql.org/docs/current/runtime-config-client.html).
 * Answers: step 1's row first (state `counted` = acquired, with the attempt), the fencing token
 * last. When step 1 answered busy, done or conflict, the caller rolls the empty transaction back.
 */
export function attemptAndBegin(
  schema: string,
  leaseMs: number,
  lockMs: number,
  retainMs: number,
  claim: { tenant?: string; lockId: string; scope: Buffer; key: Buffer; fingerprint: Buffer | null },
): string {
  for (const n of [leaseMs, lockMs, retainMs]) if (!Number.isInteger(n) || n < 0) throw new RangeError('integer milliseconds expected');
  if (!/^-?\d{1,19}$/.test(claim.lockId)) throw new RangeError('lock id must be a decimal bigint');
  const tenant = claim.tenant === undefined ? [] : [literal(claim.tenant)];
  const suffix = claim.tenant === undefined ? '' : '_tenant';
  const begin = [...tenant, claim.lockId, literal(claim.scope), literal(claim.key), literal(claim.fingerprint), String(retainMs)].join(', ');
  return (
    `SELECT * FROM ${schema}.twophase_begin_attempt${suffix}(${begin}); COMMIT; ` +
    `BEGIN; SELECT set_config('idle_in_transaction_session_timeout', '${leaseMs}', true), set_config('statement_timeout', '${leaseMs}', true), ` +
    `set_config('lock_timeout', '${lockMs}', true), nextval('${schema}.twophase_fence_seq') AS fencing_token`
  );
}

/**
 * Steps 1–2 for the tenant inbox, with the claim row written at the claim: as
 * {@link attemptAndBegin}, then `twophase_claim_counted_tenant`, which inserts the row
 * (`processing`) in the transaction, so a tenant the tenants table does not hold is refused by its
 * foreign key before the handler runs (the consumer dead-letters with `invalid_key`). The commit
 * then completes that row ({@link completeStatement}). Answers: step 1's row first, the claim's
 * row last (`skipped` when step 1 answered busy, done or conflict).
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

/** The completed claim row {@link completeInsert} writes. */
export interface CompletedRow {
  readonly tenant?: string;
  readonly key: Buffer;
  /** The key's scope digest (its attempt count's row). */
  readonly scope: Buffer;
  readonly keyText: string | null;
  readonly fingerprint: Buffer | null;
  readonly attempt: number;
  readonly owner: string;
  readonly fencingToken: number;
  /** `{"result": …}` or `{}`, JSON text. */
  readonly outcomeJson: string;
  readonly retainMs: number;
}

/**
 * Step 4's first statement (per-record transactions): the claim row written `completed` with its
 * outcome (bounded to 4096 bytes as settle.ts does) and the key's attempt count deleted, in the
 * open transaction. An existing row is replaced only when it is past its retention or released (a
 * row a standalone claimer of the same table holds live is not): otherwise the row count is 0 and
 * a division by zero aborts the transaction, so COMMIT turns into ROLLBACK. Answers one row:
 * `kept`, `one`.
 */
export function completeInsert(schema: string, row: CompletedRow): string {
  if (!Number.isInteger(row.attempt) || row.attempt < 1 || !Number.isInteger(row.fencingToken) || !Number.isInteger(row.retainMs)) throw new RangeError('integers expected');
  const tenant = row.tenant !== undefined;
  const table = `${schema}.${tenant ? 'twophase_tenant_inbox' : 'twophase_inbox'}`;
  const outcome = `${literal(row.outcomeJson)}::jsonb`;
  const values = [
    ...(tenant ? [literal(row.tenant)] : []),
    literal(row.key),
    `${literal(row.keyText)}::text`,
    `${literal(row.fingerprint)}::bytea`,
    "'completed'",
    String(row.attempt),
    literal(row.owner),
    String(row.fencingToken),
    `CASE WHEN octet_length(${outcome}::text) <= 4096 THEN ${outcome} ELSE '{"result_dropped": "too large"}'::jsonb END`,
    `clock_timestamp() + ${row.retainMs} * interval '1 millisecond'`,
    'clock_timestamp()',
    'clock_timestamp()',
  ];
  const insert =
    `INSERT INTO ${table} AS t (${tenant ? 'tenant_id, ' : ''}key_digest, key_text, fingerprint, status, attempt, owner_token, fencing_token, outcome, expires_at, created_at, updated_at) ` +
    `VALUES (${values.join(', ')}) ON CONFLICT ${tenant ? '(tenant_id, key_digest)' : '(key_digest)'} DO UPDATE SET ` +
    'key_text = COALESCE(EXCLUDED.key_text, t.key_text), fingerprint = COALESCE(EXCLUDED.fingerprint, t.fingerprint), status = EXCLUDED.status, ' +
    'attempt = EXCLUDED.attempt, owner_token = EXCLUDED.owner_token, fencing_token = EXCLUDED.fencing_token, outcome = EXCLUDED.outcome, ' +
    'expires_at = EXCLUDED.expires_at, updated_at = greatest(clock_timestamp(), t.created_at) ' +
    "WHERE t.expires_at <= clock_timestamp() OR t.status IN ('failed_retryable', 'failed_permanent') " +
    "RETURNING outcome ? 'result' OR outcome = '{}'::jsonb AS kept";
  return (
    `WITH forgotten AS (DELETE FROM ${schema}.twophase_attempts WHERE scope_digest = ${literal(row.scope)}), done AS (${insert}) ` +
    'SELECT (SELECT bool_and(kept) FROM done) AS kept, 1 / (SELECT count(*)::int FROM done) AS one'
  );
}

/**
 * {@link completeInsert} as one call of `twophase_complete` (migration 7), whose plan PostgreSQL
 * keeps for the session: the same row, the same rules, the same answer (`kept`); a row held live
 * by another claimer raises `division_by_zero` as the inline statement does. Platform inbox only.
 */
export function completeCall(schema: string, row: CompletedRow): string {
  if (row.tenant !== undefined) throw new RangeError('completeCall serves the platform inbox only');
  if (!Number.isInteger(row.attempt) || row.attempt < 1 || !Number.isInteger(row.fencingToken) || !Number.isInteger(row.retainMs)) throw new RangeError('integers expected');
  const args = [
    literal(row.scope),
    literal(row.key),
    `${literal(row.keyText)}::text`,
    `${literal(row.fingerprint)}::bytea`,
    String(row.attempt),
    literal(row.owner),
    String(row.fencingToken),
    `${literal(row.outcomeJson)}::jsonb`,
    String(row.retainMs),
  ];
  return `SELECT kept FROM ${schema}.twophase_complete(${args.join(', ')})`;
}

/**
 * Takes one attempt off the key's count (a shutdown stopped the attempt: the next acquisition
 * repeats its number); a count of 1 is deleted. Parameter: scope digest.
 */
export function uncountAttempt(schema: string): string {
  return (
    `/* twophase:uncount */ WITH gone AS (DELETE FROM ${schema}.twophase_attempts WHERE scope_digest = $1 AND attempts <= 1) ` +
    `UPDATE ${schema}.twophase_attempts SET attempts = attempts - 1, updated_at = clock_timestamp() WHERE scope_digest = $1 AND attempts > 1`
  );
}

/** Parameters: lock id, scope digest, forget (boolean). */
export function endAttempt(schema: string): string {
  return `SELECT ${schema}.twophase_end_attempt($1, $2, $3) AS unlocked`;
}

/**
 * The commit, in one round trip (a simple query of three statements): `completion` (the claim
 * row completed and the attempt count deleted: {@link completeInsert}), COMMIT, the advisory
 * unlock. Answers, in order: `kept` (as settle.commit), COMMIT's command tag, the unlock.
 */
export function completeCommitUnlock(completion: string, lockId: string): string {
  if (!/^-?\d{1,19}$/.test(lockId)) throw new RangeError('lock id must be a decimal bigint');
  return `${completion}; COMMIT; SELECT pg_advisory_unlock(${lockId})`;
}

/**
 * The per-chunk completion of one member (statements/chunk.ts): its claim row, inserted when the
 * chunk began, completed and the key's attempt count deleted, in the open transaction; a missing
 * row aborts the transaction (division by zero).
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
