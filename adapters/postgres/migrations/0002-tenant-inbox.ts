/**
 * Migration 2: the tenant inbox. Same columns as the platform inbox plus `tenant_id`, a foreign
 * key to the application's own tenants table (name and column configurable, the column's type
 * copied from it), so the database refuses a claim for a tenant that does not exist; keys are
 * unique per (tenant, key), so one tenant's key never deduplicates another's. No sentinel tenant:
 * work above tenants goes to the platform inbox. Needs `tenants` in the migration options.
 */
import { claimFunctions, tenantTable } from './claim-functions';
import type { MigrationContext } from './context';

export const VERSION = 2;
export const NAME = 'tenant inbox (foreign key to the tenants table)';

export function sql(c: MigrationContext): string {
  const s = c.schema;
  const tenants = c.tenants;
  if (!tenants) throw new RangeError('migration 2 needs the tenants table');
  return `
CREATE TABLE ${s}.twophase_tenant_inbox (
  tenant_id     ${tenants.type} NOT NULL,
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
  CONSTRAINT twophase_tenant_inbox_pkey PRIMARY KEY (tenant_id, key_digest),
  CONSTRAINT twophase_tenant_inbox_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES ${tenants.table} (${tenants.column}) ON DELETE CASCADE,
  CONSTRAINT twophase_tenant_inbox_key_digest_sha256 CHECK (octet_length(key_digest) = 32),
  CONSTRAINT twophase_tenant_inbox_key_text_len CHECK (key_text IS NULL OR octet_length(key_text) BETWEEN 1 AND 512),
  CONSTRAINT twophase_tenant_inbox_fingerprint_sha256 CHECK (fingerprint IS NULL OR octet_length(fingerprint) = 32),
  CONSTRAINT twophase_tenant_inbox_status CHECK (status IN ('processing', 'completed', 'failed_retryable', 'failed_permanent')),
  CONSTRAINT twophase_tenant_inbox_attempt_positive CHECK (attempt > 0),
  CONSTRAINT twophase_tenant_inbox_owner_token CHECK (octet_length(owner_token) BETWEEN 1 AND 64),
  CONSTRAINT twophase_tenant_inbox_fencing_token_positive CHECK (fencing_token > 0),
  CONSTRAINT twophase_tenant_inbox_outcome_object CHECK (jsonb_typeof(outcome) = 'object'),
  CONSTRAINT twophase_tenant_inbox_outcome_size CHECK (octet_length(outcome::text) <= 4096),
  CONSTRAINT twophase_tenant_inbox_outcome_empty_while_processing CHECK (status <> 'processing' OR outcome = '{}'::jsonb),
  CONSTRAINT twophase_tenant_inbox_updated_after_created CHECK (updated_at >= created_at)
);
CREATE INDEX twophase_tenant_inbox_expires_at ON ${s}.twophase_tenant_inbox (expires_at);
${claimFunctions(c, tenantTable(tenants.type))}`;
}
