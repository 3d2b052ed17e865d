/**
 * Migration 1: the platform inbox (claims without a tenant), the fencing-token sequence, the
 * attempt counts kept outside the claim's transaction, and the claim functions.
 *
 * Rows of `twophase_inbox`:
 * - `key_digest`: SHA-256 of the idempotency key (32 bytes); `key_text` the readable key, only
 *   when the claimer was told to keep it (`keepKeyText`, for diagnosis);
 * - `fingerprint`: SHA-256 of the request fingerprint, or NULL;
 * - `status`: `processing` (leased), `completed` (done, `outcome` holds the stored result),
 *   `failed_retryable` (released; claimable, attempt count kept), `failed_permanent` (released after
 *   a dead-letter; claimable, counting starts again at 1);
 * - `attempt` (> 0), `owner_token` and `fencing_token` of the latest acquisition; fencing tokens
 *   come from one sequence, so they strictly increase per key even after a row was purged;
 * - `outcome`: `{}` while processing, `{"result": …}` (or `{}` without a result) once completed,
 *   `{"released": …}` once released; at most 4096 bytes of JSON text;
 * - `expires_at`: the lease deadline while processing, the retention deadline after;
 * - `created_at` / `updated_at`: `clock_timestamp()` of the server.
 */
import type { MigrationContext } from './context';
import { claimFunctions, PLATFORM_TABLE } from './claim-functions';

export const VERSION = 1;
export const NAME = 'platform inbox, fencing sequence, attempts, claim functions';

export function sql(c: MigrationContext): string {
  const s = c.schema;
  return `
CREATE SEQUENCE ${s}.twophase_fence_seq AS bigint MINVALUE 1 START 1;

CREATE TABLE ${s}.twophase_inbox (
  key_digest    bytea       NOT NULL,
  key_text      text        NULL,
  fingerprint   bytea       NULL,
  status        text        NOT NULL,
  attempt       integer     NOT NULL,
  owner_token   text        NOT NULL,
  fencing_token bigint      NOT NULL,
  outcome       jsonb       NOT NULL DEFAULT '{}'::jsonb,
  expires_at    timestamptz NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT twophase_inbox_pkey PRIMARY KEY (key_digest),
  CONSTRAINT twophase_inbox_key_digest_sha256 CHECK (octet_length(key_digest) = 32),
  CONSTRAINT twophase_inbox_key_text_len CHECK (key_text IS NULL OR octet_length(key_text) BETWEEN 1 AND 512),
  CONSTRAINT twophase_inbox_fingerprint_sha256 CHECK (fingerprint IS NULL OR octet_length(fingerprint) = 32),
  CONSTRAINT twophase_inbox_status CHECK (status IN ('processing', 'completed', 'failed_retryable', 'failed_permanent')),
  CONSTRAINT twophase_inbox_attempt_positive CHECK (attempt > 0),
  CONSTRAINT twophase_inbox_owner_token CHECK (octet_length(owner_token) BETWEEN 1 AND 64),
  CONSTRAINT twophase_inbox_fencing_token_positive CHECK (fencing_token > 0),
  CONSTRAINT twophase_inbox_outcome_object CHECK (jsonb_typeof(outcome) = 'object'),
  CONSTRAINT twophase_inbox_outcome_size CHECK (octet_length(outcome::text) <= 4096),
  CONSTRAINT twophase_inbox_outcome_empty_while_processing CHECK (status <> 'processing' OR outcome = '{}'::jsonb),
  CONSTRAINT twophase_inbox_updated_after_created CHECK (updated_at >= created_at)
);
CREATE INDEX twophase_inbox_expires_at ON ${s}.twophase_inbox (expires_at);

-- Attempt counts of the transactional mode, written in their own (auto-committed) statement
-- before the handler's transaction, so a rollback or a crash never erases them.
-- scope_digest = SHA-256 of the table, tenant and key (see key-digest.ts).
CREATE TABLE ${s}.twophase_attempts (
  scope_digest bytea       NOT NULL,
  attempts     integer     NOT NULL,
  expires_at   timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT twophase_attempts_pkey PRIMARY KEY (scope_digest),
  CONSTRAINT twophase_attempts_scope_sha256 CHECK (octet_length(scope_digest) = 32),
  CONSTRAINT twophase_attempts_positive CHECK (attempts > 0)
);
CREATE INDEX twophase_attempts_expires_at ON ${s}.twophase_attempts (expires_at);

${claimFunctions(c, PLATFORM_TABLE)}
-- twophase_end_attempt (transactional mode, after COMMIT or ROLLBACK): forgets the attempt count
-- when p_forget (the key completed, or was dead-lettered) and releases the advisory lock.
CREATE FUNCTION ${s}.twophase_end_attempt(p_lock bigint, p_scope bytea, p_forget boolean)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  IF p_forget THEN
    DELETE FROM ${s}.twophase_attempts WHERE scope_digest = p_scope;
  END IF;
  RETURN pg_advisory_unlock(p_lock);
END
$fn$;
`;
}
