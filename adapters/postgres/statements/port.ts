/**
 * Statements of the transactional mode inside a database library's own transaction (a
 * {@link TransactionPort}), in the order one delivery sends them:
 * 1. {@link portClaim}, in the library's transaction: limits, advisory lock, done check, fencing
 *    token (`twophase_port_claim`, migration 4);
 * 2. {@link countAttempt}, on the claimer's own pool, auto-committed, while the transaction holds
 *    the key's lock;
 * 3. the handler's own statements, through the library's transaction object;
 * 4. commit: {@link portCompletion} in the library's transaction, then the library's COMMIT;
 *    release: the library's ROLLBACK ({@link forgetAttempts} first, on the pool, after a
 *    dead-letter).
 * Statements sent through the port bind every value as a `$n` parameter of type text or integer
 * (digests as hex text) and read every column as text, so any library's driver encodes and
 * decodes them the same way.
 */

/** Each statement's text per schema, built once (a claimer keeps one schema; few exist per process). */
function memo(build: (schema: string) => string): (schema: string) => string {
  const texts = new Map<string, string>();
  return (schema) => {
    let text = texts.get(schema);
    if (text === undefined) texts.set(schema, (text = build(schema)));
    return text;
  };
}

/** Parameters: lock id (decimal text), key digest (hex), fingerprint digest (hex or null), lease ms, lock-wait ms. */
export const portClaim = memo((schema) => {
  return (
    'SELECT state, outcome, stored_fingerprint, fencing_token, started ' +
    `FROM ${schema}.twophase_port_claim($1::text::bigint, decode($2::text, 'hex'), decode($3::text, 'hex'), $4::integer, $5::integer)`
  );
});

/** The row of {@link portClaim}: every column text. */
export interface PortClaimRow {
  readonly state: 'busy' | 'done' | 'conflict' | 'acquired';
  /** done: the stored outcome, JSON text. */
  readonly outcome: string | null;
  /** conflict: the stored fingerprint digest, hex. */
  readonly stored_fingerprint: string | null;
  /** acquired: the fencing token, decimal text. */
  readonly fencing_token: string | null;
  /** acquired: `transaction_timestamp()` as text, which the completion compares. */
  readonly started: string | null;
}

/** On the claimer's pool (a `pg` query). Parameters: scope digest (bytea), retention ms. Answers `attempts`. */
export const countAttempt = memo((schema) => `SELECT ${schema}.twophase_count_attempt($1, $2) AS attempts`);

/** On the claimer's pool. Parameter: scope digest (bytea). */
export const forgetAttempts = memo((schema) => `DELETE FROM ${schema}.twophase_attempts WHERE scope_digest = $1`);

/**
 * The completion, in the library's transaction: the claim row written `completed` with its
 * outcome (bounded to 4096 bytes as the native mode does), the key's attempt count deleted. An
 * existing row is replaced only past its retention or once released. Parameters: key digest
 * (hex), key text, fingerprint (hex), attempt, owner, fencing token (text), outcome JSON text,
 * retention ms, scope digest (hex), the claim's `started`.
 * When no row was written (a live row of a standalone claimer of the same table), or the
 * statement does not run in the claim's own transaction (the handler ended it through the
 * library's object), it divides by zero: the statement fails, and so the transaction.
 * Answers `kept` ('true' | 'false': the result fitted) and `one`.
 */
export const portCompletion = memo((schema) => {
  const outcome = `(CASE WHEN octet_length($7::text::jsonb::text) <= 4096 THEN $7::text::jsonb ELSE '{"result_dropped": "too large"}'::jsonb END)`;
  const insert =
    `INSERT INTO ${schema}.twophase_inbox AS t (key_digest, key_text, fingerprint, status, attempt, owner_token, fencing_token, outcome, expires_at, created_at, updated_at) ` +
    `VALUES (decode($1::text, 'hex'), $2::text, decode($3::text, 'hex'), 'completed', $4::integer, $5::text, $6::text::bigint, ${outcome}, ` +
    "clock_timestamp() + $8::integer * interval '1 millisecond', clock_timestamp(), clock_timestamp()) " +
    'ON CONFLICT (key_digest) DO UPDATE SET ' +
    'key_text = COALESCE(EXCLUDED.key_text, t.key_text), fingerprint = COALESCE(EXCLUDED.fingerprint, t.fingerprint), status = EXCLUDED.status, ' +
    'attempt = EXCLUDED.attempt, owner_token = EXCLUDED.owner_token, fencing_token = EXCLUDED.fencing_token, outcome = EXCLUDED.outcome, ' +
    'expires_at = EXCLUDED.expires_at, updated_at = greatest(clock_timestamp(), t.created_at) ' +
    "WHERE t.expires_at <= clock_timestamp() OR t.status IN ('failed_retryable', 'failed_permanent') " +
    // `?` is a placeholder to some libraries: test the key with ->.
    "RETURNING (t.outcome -> 'result') IS NOT NULL OR t.outcome = '{}'::jsonb AS kept";
  return (
    `WITH forgotten AS (DELETE FROM ${schema}.twophase_attempts WHERE scope_digest = decode($9::text, 'hex')), done AS (${insert}) ` +
    'SELECT (SELECT bool_and(kept) FROM done)::text AS kept, ' +
    '(1 / (CASE WHEN transaction_timestamp()::text = $10::text THEN (SELECT count(*)::int FROM done) ELSE 0 END))::text AS one'
  );
});
