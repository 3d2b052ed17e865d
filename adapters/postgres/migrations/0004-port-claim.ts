/**
 * Migration 4: the claim functions of the transactional mode inside a database library's own
 * transaction (a {@link TransactionPort}: Drizzle's, Prisma's… `transaction`), for the platform
 * inbox. Nothing else changes: the same inbox table, attempt counts, fencing sequence and
 * advisory-lock ids, so a claimer with a port and one without serve the same keys together.
 *
 * - `twophase_port_claim`: the first statement of the library's transaction. Sets the
 *   transaction's limits, takes the key's advisory lock at transaction level without waiting,
 *   then reads the completed row and draws the fencing token. Every column it answers is text,
 *   so no library's value decoding reaches twophase.
 * - `twophase_count_attempt`: the attempt count, sent on the claimer's own pool in its own
 *   auto-committed statement while the library's transaction holds the key's lock, so neither a
 *   rollback nor a crash erases it.
 */
import type { MigrationContext } from './context';

export const VERSION = 4;
export const NAME = 'claim functions of the transactional mode inside a database library transaction';

export function sql(c: MigrationContext): string {
  const s = c.schema;
  return `
-- twophase_port_claim: in the caller's open transaction. Sets idle_in_transaction_session_timeout
-- and statement_timeout to p_lease_ms and lock_timeout to p_lock_ms, local to the transaction (a
-- transaction idle past its lease has its session ended by the server, which rolls it back). Takes
-- pg_try_advisory_xact_lock(p_lock) without waiting: not available = 'busy' (another delivery of
-- the key is in flight, in either transactional mode). With the lock held, a new statement (a new
-- snapshot under READ COMMITTED) reads the key's row: a live completed row = 'done' (outcome as
-- text), a different stored fingerprint = 'conflict' (hex). Else 'acquired' with a fencing token.
-- started = transaction_timestamp() as text: the completion checks it runs in this transaction.
-- The lock ends with the transaction (COMMIT or ROLLBACK): nothing to unlock.
CREATE FUNCTION ${s}.twophase_port_claim(p_lock bigint, p_key bytea, p_fingerprint bytea, p_lease_ms integer, p_lock_ms integer)
RETURNS TABLE (state text, outcome text, stored_fingerprint text, fencing_token text, started text)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  r ${s}.twophase_inbox%ROWTYPE;
BEGIN
  PERFORM set_config('idle_in_transaction_session_timeout', p_lease_ms::text, true);
  PERFORM set_config('statement_timeout', p_lease_ms::text, true);
  PERFORM set_config('lock_timeout', p_lock_ms::text, true);
  IF NOT pg_try_advisory_xact_lock(p_lock) THEN
    RETURN QUERY SELECT 'busy'::text, NULL::text, NULL::text, NULL::text, NULL::text;
    RETURN;
  END IF;
  SELECT * INTO r FROM ${s}.twophase_inbox t WHERE t.key_digest = p_key AND t.expires_at > clock_timestamp();
  IF FOUND AND p_fingerprint IS NOT NULL AND r.fingerprint IS NOT NULL AND r.fingerprint <> p_fingerprint THEN
    RETURN QUERY SELECT 'conflict'::text, NULL::text, encode(r.fingerprint, 'hex'), NULL::text, NULL::text;
    RETURN;
  END IF;
  IF FOUND AND r.status = 'completed' THEN
    RETURN QUERY SELECT 'done'::text, r.outcome::text, NULL::text, NULL::text, NULL::text;
    RETURN;
  END IF;
  RETURN QUERY SELECT 'acquired'::text, NULL::text, NULL::text, nextval('${s}.twophase_fence_seq')::text, transaction_timestamp()::text;
END
$fn$;

-- twophase_count_attempt: counts one attempt of the key's scope, auto-committed (see
-- twophase_begin_attempt: the same table and expiry rule). Returns the count.
CREATE FUNCTION ${s}.twophase_count_attempt(p_scope bytea, p_retain_ms bigint)
RETURNS integer LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  n integer;
BEGIN
  -- A retry limit, not a correctness record: no wait for a WAL flush (as twophase_begin_attempt).
  PERFORM set_config('synchronous_commit', 'off', true);
  INSERT INTO ${s}.twophase_attempts AS a (scope_digest, attempts, expires_at)
  VALUES (p_scope, 1, clock_timestamp() + p_retain_ms * interval '1 millisecond')
  ON CONFLICT (scope_digest) DO UPDATE SET
    attempts = CASE WHEN a.expires_at <= clock_timestamp() THEN 1 ELSE a.attempts + 1 END,
    expires_at = EXCLUDED.expires_at,
    updated_at = clock_timestamp()
  RETURNING a.attempts INTO n;
  RETURN n;
END
$fn$;
`;
}
