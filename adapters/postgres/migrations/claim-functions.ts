/**
 * The claim functions of one inbox table, rendered for the platform table (no tenant) or the
 * tenant table (a `p_tenant` parameter first, every lookup by tenant and key).
 */
import type { MigrationContext } from './context';

/** Which inbox table the functions serve. */
export interface InboxTable {
  /** Unquoted table name. */
  readonly table: string;
  /** Suffix of the function names: '' (platform) or '_tenant'. */
  readonly suffix: string;
  /** SQL type of the tenant column; undefined for the platform table. */
  readonly tenantType?: string;
}

export const PLATFORM_TABLE: InboxTable = { table: 'twophase_inbox', suffix: '' };

export function tenantTable(tenantType: string): InboxTable {
  return { table: 'twophase_tenant_inbox', suffix: '_tenant', tenantType };
}

/** `twophase_claim[_tenant]` and `twophase_begin_attempt[_tenant]` for `t`. */
export function claimFunctions(c: MigrationContext, t: InboxTable): string {
  const s = c.schema;
  const table = `${s}.${t.table}`;
  const tenantParam = t.tenantType ? `p_tenant ${t.tenantType}, ` : '';
  const tenantMatch = t.tenantType ? 't.tenant_id = p_tenant AND ' : '';
  const tenantCol = t.tenantType ? 'tenant_id, ' : '';
  const tenantVal = t.tenantType ? 'p_tenant, ' : '';
  const conflictTarget = t.tenantType ? '(tenant_id, key_digest)' : '(key_digest)';
  return `
-- twophase_claim${t.suffix}: one atomic claim of one key on ${t.table}. Never read-then-write: a
-- takeover is an UPDATE whose WHERE re-checks the row read (its fencing token and status) on the
-- latest row version, and the loop retries when a concurrent claim changed the row in between.
-- p_attempt: NULL = count in the row (standalone mode); else the attempt counted outside.
-- Returns one row: state ('acquired' | 'done' | 'busy' | 'conflict'), attempt, fencing_token,
-- outcome (done: the stored outcome), stored_fingerprint (conflict).
CREATE FUNCTION ${s}.twophase_claim${t.suffix}(
  ${tenantParam}p_key bytea, p_key_text text, p_fingerprint bytea, p_owner text, p_lease_ms bigint, p_attempt integer
) RETURNS TABLE (state text, attempt integer, fencing_token bigint, outcome jsonb, stored_fingerprint bytea)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  r ${table}%ROWTYPE;
  now_ts timestamptz;
  fence bigint;
  forgotten boolean;
BEGIN
  LOOP
    now_ts := clock_timestamp();
    fence := nextval('${s}.twophase_fence_seq');
    INSERT INTO ${table} AS t (${tenantCol}key_digest, key_text, fingerprint, status, attempt, owner_token, fencing_token, outcome, expires_at, created_at, updated_at)
    VALUES (${tenantVal}p_key, p_key_text, p_fingerprint, 'processing', COALESCE(p_attempt, 1), p_owner, fence, '{}'::jsonb, now_ts + p_lease_ms * interval '1 millisecond', now_ts, now_ts)
    ON CONFLICT ${conflictTarget} DO NOTHING;
    IF FOUND THEN
      RETURN QUERY SELECT 'acquired'::text, COALESCE(p_attempt, 1), fence, NULL::jsonb, NULL::bytea;
      RETURN;
    END IF;
    SELECT * INTO r FROM ${table} t WHERE ${tenantMatch}t.key_digest = p_key;
    IF NOT FOUND THEN CONTINUE; END IF;
    -- A completed or released row past its retention is forgotten: as if absent.
    forgotten := r.status <> 'processing' AND r.expires_at <= now_ts;
    IF NOT forgotten AND p_fingerprint IS NOT NULL AND r.fingerprint IS NOT NULL AND r.fingerprint <> p_fingerprint THEN
      RETURN QUERY SELECT 'conflict'::text, r.attempt, r.fencing_token, NULL::jsonb, r.fingerprint;
      RETURN;
    END IF;
    IF NOT forgotten AND r.status = 'completed' THEN
      RETURN QUERY SELECT 'done'::text, r.attempt, r.fencing_token, r.outcome, NULL::bytea;
      RETURN;
    END IF;
    IF r.status = 'processing' AND r.expires_at > now_ts THEN
      RETURN QUERY SELECT 'busy'::text, r.attempt, r.fencing_token, NULL::jsonb, NULL::bytea;
      RETURN;
    END IF;
    -- Released, expired lease, or forgotten: take the key over if the row is still as read.
    UPDATE ${table} t SET
      status = 'processing',
      attempt = COALESCE(p_attempt, CASE WHEN forgotten OR t.status = 'failed_permanent' THEN 1 ELSE t.attempt + 1 END),
      fingerprint = CASE WHEN forgotten THEN p_fingerprint ELSE COALESCE(p_fingerprint, t.fingerprint) END,
      key_text = COALESCE(p_key_text, t.key_text),
      owner_token = p_owner,
      fencing_token = fence,
      outcome = '{}'::jsonb,
      expires_at = now_ts + p_lease_ms * interval '1 millisecond',
      updated_at = greatest(now_ts, t.created_at)
    WHERE ${tenantMatch}t.key_digest = p_key AND t.fencing_token = r.fencing_token AND t.status = r.status
    RETURNING t.attempt INTO r.attempt;
    IF FOUND THEN
      RETURN QUERY SELECT 'acquired'::text, r.attempt, fence, NULL::jsonb, NULL::bytea;
      RETURN;
    END IF;
  END LOOP;
END
$fn$;

-- twophase_begin_attempt${t.suffix} (transactional mode, auto-committed, before BEGIN): takes the
-- session-level advisory lock p_lock without waiting. Not taken: another session holds the key
-- ('busy'). Taken and the key completed (and not forgotten): unlocks, returns 'done' with the
-- outcome. A different fingerprint: unlocks, returns 'conflict'. Else counts the attempt in
-- twophase_attempts (auto-committed: no rollback erases it) and returns 'counted' with the count;
-- the caller then claims in its transaction and unlocks with twophase_end_attempt.
CREATE FUNCTION ${s}.twophase_begin_attempt${t.suffix}(
  ${tenantParam}p_lock bigint, p_scope bytea, p_key bytea, p_fingerprint bytea, p_retain_ms bigint
) RETURNS TABLE (state text, attempts integer, outcome jsonb, stored_fingerprint bytea)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  r ${table}%ROWTYPE;
  n integer;
BEGIN
  -- The count is a retry limit, not a correctness record: it need not wait for a WAL flush (a
  -- server crash may forget the last counts, permitting one extra attempt). The handler's own
  -- transaction keeps the server's synchronous_commit.
  PERFORM set_config('synchronous_commit', 'off', true);
  -- Tells twophase_claim_counted of this session whether to claim (cleared unless 'counted').
  PERFORM set_config('twophase.counted_attempt', '', false);
  IF NOT pg_try_advisory_lock(p_lock) THEN
    RETURN QUERY SELECT 'busy'::text, 0, NULL::jsonb, NULL::bytea;
    RETURN;
  END IF;
  SELECT * INTO r FROM ${table} t WHERE ${tenantMatch}t.key_digest = p_key AND t.expires_at > clock_timestamp();
  IF FOUND AND p_fingerprint IS NOT NULL AND r.fingerprint IS NOT NULL AND r.fingerprint <> p_fingerprint THEN
    PERFORM pg_advisory_unlock(p_lock);
    RETURN QUERY SELECT 'conflict'::text, 0, NULL::jsonb, r.fingerprint;
    RETURN;
  END IF;
  IF FOUND AND r.status = 'completed' THEN
    PERFORM pg_advisory_unlock(p_lock);
    RETURN QUERY SELECT 'done'::text, 0, r.outcome, NULL::bytea;
    RETURN;
  END IF;
  INSERT INTO ${s}.twophase_attempts AS a (scope_digest, attempts, expires_at)
  VALUES (p_scope, 1, clock_timestamp() + p_retain_ms * interval '1 millisecond')
  ON CONFLICT (scope_digest) DO UPDATE SET
    attempts = CASE WHEN a.expires_at <= clock_timestamp() THEN 1 ELSE a.attempts + 1 END,
    expires_at = EXCLUDED.expires_at,
    updated_at = clock_timestamp()
  RETURNING a.attempts INTO n;
  PERFORM set_config('twophase.counted_attempt', n::text, false);
  RETURN QUERY SELECT 'counted'::text, n, NULL::jsonb, NULL::bytea;
END
$fn$;

-- twophase_claim_counted${t.suffix} (transactional mode, inside the handler's transaction, sent in
-- the same round trip as twophase_begin_attempt${t.suffix}): claims with the attempt that call
-- counted in this session, or answers 'skipped' (no row) when it did not count one (busy, done,
-- conflict). Consumes the count, so it is used once.
CREATE FUNCTION ${s}.twophase_claim_counted${t.suffix}(
  ${tenantParam}p_key bytea, p_key_text text, p_fingerprint bytea, p_owner text, p_lease_ms bigint
) RETURNS TABLE (state text, attempt integer, fencing_token bigint, outcome jsonb, stored_fingerprint bytea)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  counted text := current_setting('twophase.counted_attempt', true);
BEGIN
  PERFORM set_config('twophase.counted_attempt', '', false);
  IF counted IS NULL OR counted = '' THEN
    RETURN QUERY SELECT 'skipped'::text, 0, 0::bigint, NULL::jsonb, NULL::bytea;
    RETURN;
  END IF;
  RETURN QUERY SELECT * FROM ${s}.twophase_claim${t.suffix}(${t.tenantType ? 'p_tenant, ' : ''}p_key, p_key_text, p_fingerprint, p_owner, p_lease_ms, counted::integer);
END
$fn$;
`;
}
