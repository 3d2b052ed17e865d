/**
 * Statements of the transactional mode's batch form (`transactionBatch: 'per-chunk'`): the keys of
 * one `claimMany` share one transaction on one pool client. In the order they are sent:
 * 1. {@link beginAttempts}: every key's advisory lock, done check and attempt count, in one
 *    auto-committed statement (as `twophase_begin_attempt` per key: the counts are outside the
 *    transaction to come, so a rollback of the chunk never erases them);
 * 2. {@link beginChunk}: BEGIN, the per-transaction limits, and the claim row of every counted key
 *    (`twophase_claim` with the attempt step 1 counted), in one round trip;
 * 3. the handlers' statements, one member after the other;
 * 4. {@link commitChunk} (every member committed: each row completed, the counts deleted, COMMIT,
 *    the unlocks: one round trip) or {@link rollbackChunk} (ROLLBACK, then each key's count kept
 *    or forgotten and its lock released: one round trip).
 * Steps 2 and 4 are simple queries of several statements, so values are written in as literals
 * (see statements/transaction.ts).
 *
 * The platform inbox takes a shorter path, as the per-record mode does (statements/transaction.ts):
 * while a member runs, its advisory lock is its claim, and its row is written once, already
 * completed, by the commit. So:
 * 1–2. {@link attemptsAndBegin}: step 1 with a fencing token per key, COMMIT, BEGIN and the limits, in
 *    ONE round trip (no claim row is written);
 * 3. the handlers' statements;
 * 4. {@link commitChunk} with {@link CompletedRow}s: ONE statement inserts every member's completed
 *    row and deletes their counts, then COMMIT and the unlocks (one round trip), or
 *    {@link rollbackChunk} as above.
 */
import { type CompletedRow, completeStatement, literal } from './transaction';

/** One key of step 1. */
export interface AttemptKey {
  readonly tenant?: string;
  readonly lockId: string;
  readonly scope: Buffer;
  readonly key: Buffer;
  readonly fingerprint: Buffer | null;
}

/**
 * Step 1, a parameterised statement. Parameters: [tenants text[],] lock ids bigint[], scopes
 * bytea[], keys bytea[], fingerprints bytea[], retention ms. Answers `twophase_begin_attempt`'s
 * rows (state, attempts, outcome, stored_fingerprint) in key order.
 */
export function beginAttempts(schema: string, keys: readonly AttemptKey[], retainMs: number): { text: string; values: unknown[] } {
  const tenant = keys.length > 0 && keys[0]!.tenant !== undefined;
  const columns = [keys.map((k) => k.lockId), keys.map((k) => k.scope), keys.map((k) => k.key), keys.map((k) => k.fingerprint)];
  if (tenant) {
    return {
      text: `SELECT b.* FROM unnest($1::text[], $2::bigint[], $3::bytea[], $4::bytea[], $5::bytea[]) WITH ORDINALITY AS r(tenant, lock_id, scope, k, fp, ord)
         CROSS JOIN LATERAL ${schema}.twophase_begin_attempt_tenant(r.tenant, r.lock_id, r.scope, r.k, r.fp, $6::bigint) b ORDER BY r.ord`,
      values: [keys.map((k) => k.tenant), ...columns, retainMs],
    };
  }
  return {
    text: `SELECT b.* FROM unnest($1::bigint[], $2::bytea[], $3::bytea[], $4::bytea[]) WITH ORDINALITY AS r(lock_id, scope, k, fp, ord)
       CROSS JOIN LATERAL ${schema}.twophase_begin_attempt(r.lock_id, r.scope, r.k, r.fp, $5::bigint) b ORDER BY r.ord`,
    values: [...columns, retainMs],
  };
}

/**
 * Steps 1–2 of the platform inbox in one simple query: every key's `twophase_begin_attempt`
 * (auto-committed: the COMMIT that follows ends its implicit transaction, so the counts and the
 * locks outlive a rollback of the chunk), then BEGIN, the limits as {@link beginChunk} sets them
 * (in one statement of three `set_config(…, true)`, which is `SET LOCAL`). Each key's fencing
 * token is drawn from the fence sequence in the first statement, right after its
 * `twophase_begin_attempt` (while its lock is held when counted; drawn for every key, used by the
 * counted ones; a sequence is not transactional, so the COMMIT changes nothing for it).
 * Answers: the begin rows (state, attempts, outcome, stored_fingerprint, fencing_token) in key
 * order first. A caller whose keys were none counted rolls the empty transaction back.
 */
export function attemptsAndBegin(schema: string, keys: readonly AttemptKey[], retainMs: number, leaseMs: number, lockMs: number): string {
  for (const n of [retainMs, leaseMs, lockMs]) if (!Number.isInteger(n) || n < 0) throw new RangeError('integer milliseconds expected');
  if (keys.length === 0 || keys.some((k) => k.tenant !== undefined)) throw new RangeError('attemptsAndBegin serves the platform inbox only, with at least one key');
  const rows = keys.map((k, i) => `(${checkedLockId(k.lockId)}::bigint, ${literal(k.scope)}, ${literal(k.key)}, ${literal(k.fingerprint)}::bytea, ${i + 1})`).join(', ');
  return (
    `SELECT b.*, nextval('${schema}.twophase_fence_seq') AS fencing_token FROM (VALUES ${rows}) AS r(lock_id, scope, k, fp, ord) ` +
    `CROSS JOIN LATERAL ${schema}.twophase_begin_attempt(r.lock_id, r.scope, r.k, r.fp, ${retainMs}) b ORDER BY r.ord; COMMIT; ` +
    // The three limits in one statement: set_config(…, true) is SET LOCAL.
    `BEGIN; SELECT set_config('idle_in_transaction_session_timeout', '${leaseMs}', true), set_config('statement_timeout', '${leaseMs}', true), set_config('lock_timeout', '${lockMs}', true)`
  );
}

/** One claim of step 2. */
export interface ChunkClaim {
  readonly tenant?: string;
  readonly key: Buffer;
  readonly keyText: string | null;
  readonly fingerprint: Buffer | null;
  readonly owner: string;
  /** The attempt step 1 counted. */
  readonly attempt: number;
}

/**
 * Step 2: BEGIN, `SET LOCAL` limits as in the per-record mode (idle and statement limits =
 * `leaseMs`, lock wait = `lockMs`), then one `twophase_claim` per key in order. The last answer
 * holds the claim rows (state, attempt, fencing_token, outcome, stored_fingerprint, ord).
 */
export function beginChunk(schema: string, leaseMs: number, lockMs: number, claims: readonly ChunkClaim[]): string {
  for (const n of [leaseMs, lockMs]) if (!Number.isInteger(n) || n < 0) throw new RangeError('integer milliseconds expected');
  const tenant = claims[0]?.tenant !== undefined;
  const rows = claims
    .map((c, i) => {
      if (!Number.isInteger(c.attempt) || c.attempt < 1) throw new RangeError('attempt must be a positive integer');
      const values = [String(i + 1), `${literal(c.key)}`, `${literal(c.keyText)}::text`, `${literal(c.fingerprint)}::bytea`, `${literal(c.owner)}::text`, String(c.attempt)];
      return `(${tenant ? `${literal(c.tenant)}, ` : ''}${values.join(', ')})`;
    })
    .join(', ');
  const call = tenant
    ? `${schema}.twophase_claim_tenant(r.tenant, r.k, r.kt, r.fp, r.owner, ${leaseMs}, r.attempt)`
    : `${schema}.twophase_claim(r.k, r.kt, r.fp, r.owner, ${leaseMs}, r.attempt)`;
  return (
    `BEGIN; SET LOCAL idle_in_transaction_session_timeout = ${leaseMs}; SET LOCAL statement_timeout = ${leaseMs}; SET LOCAL lock_timeout = ${lockMs}; ` +
    `SELECT c.*, r.ord FROM (VALUES ${rows}) AS r(${tenant ? 'tenant, ' : ''}ord, k, kt, fp, owner, attempt) CROSS JOIN LATERAL ${call} c ORDER BY r.ord`
  );
}

/** One member's completion in step 4: settle.commitUpdate's text and its values, and the key's scope. */
export interface ChunkCompletion {
  readonly commitSql: string;
  readonly values: readonly unknown[];
  readonly scope: Buffer;
}

/**
 * Step 4 after every member committed: each member's row completed and its count deleted (a
 * missing row aborts the transaction, so COMMIT cannot apply the effects without their claims),
 * COMMIT, then every lock the chunk holds released. Answers one row per member (`kept`), COMMIT's
 * command tag, the unlock.
 */
export function commitChunk(schema: string, completions: readonly ChunkCompletion[], lockIds: readonly string[]): string {
  const completes = completions.map((c) => completeStatement(c.commitSql, schema, c.values, c.scope));
  return `${completes.join('; ')}; COMMIT; ${unlockAll(lockIds)}`;
}

/**
 * Step 4 of the platform inbox after every member committed, one round trip: ONE statement
 * inserts every member's claim row `completed` with its outcome (bounded to 4096 bytes, as
 * statements/transaction.ts's completeInsert) and deletes the members' attempt counts; COMMIT;
 * every lock released. An existing row is replaced only when past its retention or released (a
 * row a standalone claimer of the same table holds live is not): when fewer rows were written
 * than members, a division by zero aborts the transaction, so COMMIT cannot apply the effects
 * without their claims. Answers: one row (`dropped`: hex key digests whose result did not fit,
 * or NULL; `one`), COMMIT's command tag, the unlock.
 */
export function commitChunkRows(schema: string, rows: readonly CompletedRow[], lockIds: readonly string[]): string {
  if (rows.length === 0 || rows.some((r) => r.tenant !== undefined)) throw new RangeError('commitChunkRows serves the platform inbox only, with at least one row');
  const values = rows
    .map((row) => {
      if (!Number.isInteger(row.attempt) || row.attempt < 1 || !Number.isInteger(row.fencingToken) || !Number.isInteger(row.retainMs)) throw new RangeError('integers expected');
      const outcome = `${literal(row.outcomeJson)}::jsonb`;
      return (
        `(${literal(row.key)}, ${literal(row.keyText)}::text, ${literal(row.fingerprint)}::bytea, 'completed', ${row.attempt}, ${literal(row.owner)}, ${row.fencingToken}, ` +
        `CASE WHEN octet_length(${outcome}::text) <= 4096 THEN ${outcome} ELSE '{"result_dropped": "too large"}'::jsonb END, ` +
        `clock_timestamp() + ${row.retainMs} * interval '1 millisecond', clock_timestamp(), clock_timestamp())`
      );
    })
    .join(', ');
  const insert =
    `INSERT INTO ${schema}.twophase_inbox AS t (key_digest, key_text, fingerprint, status, attempt, owner_token, fencing_token, outcome, expires_at, created_at, updated_at) ` +
    `VALUES ${values} ON CONFLICT (key_digest) DO UPDATE SET ` +
    'key_text = COALESCE(EXCLUDED.key_text, t.key_text), fingerprint = COALESCE(EXCLUDED.fingerprint, t.fingerprint), status = EXCLUDED.status, ' +
    'attempt = EXCLUDED.attempt, owner_token = EXCLUDED.owner_token, fencing_token = EXCLUDED.fencing_token, outcome = EXCLUDED.outcome, ' +
    'expires_at = EXCLUDED.expires_at, updated_at = greatest(clock_timestamp(), t.created_at) ' +
    "WHERE t.expires_at <= clock_timestamp() OR t.status IN ('failed_retryable', 'failed_permanent') " +
    "RETURNING t.key_digest, outcome ? 'result' OR outcome = '{}'::jsonb AS kept";
  const scopes = rows.map((r) => literal(r.scope)).join(', ');
  return (
    `WITH forgotten AS (DELETE FROM ${schema}.twophase_attempts WHERE scope_digest IN (${scopes})), done AS (${insert}) ` +
    `SELECT (SELECT array_agg(encode(key_digest, 'hex')) FROM done WHERE NOT kept) AS dropped, 1 / (SELECT CASE WHEN count(*) = ${rows.length} THEN 1 ELSE 0 END FROM done) AS one; ` +
    `COMMIT; ${unlockAll(lockIds)}`
  );
}

/**
 * Step 4 when the chunk ends without committing: ROLLBACK, then for each key
 * `twophase_end_attempt(lock, scope, forget)`: its count forgotten when it was dead-lettered,
 * kept otherwise (a rolled-back member's next attempt counts on), and its lock released.
 */
export function rollbackChunk(schema: string, keys: readonly { lockId: string; scope: Buffer; forget: boolean }[]): string {
  if (keys.length === 0) return 'ROLLBACK';
  const rows = keys.map((k) => `(${checkedLockId(k.lockId)}::bigint, ${literal(k.scope)}, ${k.forget ? 'true' : 'false'})`).join(', ');
  return `ROLLBACK; SELECT bool_and(${schema}.twophase_end_attempt(v.l, v.s, v.f)) AS unlocked FROM (VALUES ${rows}) AS v(l, s, f)`;
}

function unlockAll(lockIds: readonly string[]): string {
  if (lockIds.length === 0) return 'SELECT true AS unlocked';
  return `SELECT bool_and(pg_advisory_unlock(v.l)) AS unlocked FROM (VALUES ${lockIds.map((l) => `(${checkedLockId(l)}::bigint)`).join(', ')}) AS v(l)`;
}

function checkedLockId(lockId: string): string {
  if (!/^-?\d{1,19}$/.test(lockId)) throw new RangeError('lock id must be a decimal bigint');
  return lockId;
}
