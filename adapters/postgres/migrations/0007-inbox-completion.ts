/**
 * Migration 7: the inbox's completion as a function, so PostgreSQL plans it once per session.
 *
 * The transactional mode's commit (per-record transactions, platform inbox) writes the claim row
 * `completed` and forgets the key's attempt count in the open transaction, then COMMITs. Sent as
 * one inline statement (a CTE with an `INSERT … ON CONFLICT … DO UPDATE … WHERE`), PostgreSQL
 * parses and plans it again for every message; inside a PL/pgSQL function the plan is kept for
 * the session. `twophase_complete` does the same work with the same rules:
 * - the attempt count of the key's scope is deleted;
 * - the row is inserted `completed` with its outcome (an outcome over 4096 bytes is stored as
 *   `{"result_dropped": "too large"}`); an existing row is replaced only when it is past its
 *   retention or released (`failed_retryable`, `failed_permanent`);
 * - a row held live by a standalone claimer of the same table is not replaced: the function
 *   raises `division_by_zero` (SQLSTATE 22012), as the inline statement did, so the transaction is
 *   aborted and its COMMIT answers ROLLBACK;
 * - answers one row, `kept`: false when the stored outcome is not the one given (it was dropped).
 *
 * A claimer uses the function when its schema has this migration and the inline statement when
 * not: the migration is optional, and claimers of either version serve the same keys together.
 */
import type { MigrationContext } from './context';

export const VERSION = 7;
export const NAME = 'inbox completion as a function (planned once per session)';

export function sql(c: MigrationContext): string {
  const s = c.schema;
  return `
CREATE FUNCTION ${s}.twophase_complete(
  p_scope bytea, p_key bytea, p_key_text text, p_fingerprint bytea, p_attempt integer, p_owner text, p_fencing_token bigint, p_outcome jsonb, p_retain_ms bigint
) RETURNS TABLE (kept boolean)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  stored jsonb;
BEGIN
  DELETE FROM ${s}.twophase_attempts a WHERE a.scope_digest = p_scope;
  INSERT INTO ${s}.twophase_inbox AS t (key_digest, key_text, fingerprint, status, attempt, owner_token, fencing_token, outcome, expires_at, created_at, updated_at)
  VALUES (p_key, p_key_text, p_fingerprint, 'completed', p_attempt, p_owner, p_fencing_token,
          CASE WHEN octet_length(p_outcome::text) <= 4096 THEN p_outcome ELSE '{"result_dropped": "too large"}'::jsonb END,
          clock_timestamp() + p_retain_ms * interval '1 millisecond', clock_timestamp(), clock_timestamp())
  ON CONFLICT (key_digest) DO UPDATE SET
    key_text = COALESCE(EXCLUDED.key_text, t.key_text), fingerprint = COALESCE(EXCLUDED.fingerprint, t.fingerprint), status = EXCLUDED.status,
    attempt = EXCLUDED.attempt, owner_token = EXCLUDED.owner_token, fencing_token = EXCLUDED.fencing_token, outcome = EXCLUDED.outcome,
    expires_at = EXCLUDED.expires_at, updated_at = greatest(clock_timestamp(), t.created_at)
  WHERE t.expires_at <= clock_timestamp() OR t.status IN ('failed_retryable', 'failed_permanent')
  RETURNING t.outcome INTO stored;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'twophase: the key''s row is held live by another claimer of the same table' USING ERRCODE = 'division_by_zero';
  END IF;
  RETURN QUERY SELECT stored ? 'result' OR stored = '{}'::jsonb;
END
$fn$;
`;
}
