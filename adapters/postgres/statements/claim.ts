/**
 * Claim statements: one key, or many in one round trip. Both call the migration's
 * `twophase_claim[_tenant]` function, which claims atomically (see migrations/claim-functions.ts).
 *
 * Parameters of one claim, in order (the tenant first for the tenant inbox):
 *   key digest (bytea, 32 bytes), readable key or NULL, fingerprint digest or NULL, owner token,
 *   lease in ms, attempt counted outside the row or NULL.
 * Each answers rows (state, attempt, fencing_token, outcome, stored_fingerprint).
 */

/** A row of the claim function. */
export interface ClaimRow {
  readonly state: 'acquired' | 'done' | 'busy' | 'conflict';
  readonly attempt: number;
  /** bigint: `pg` returns it as text. */
  readonly fencing_token: string;
  readonly outcome: { result?: unknown } | null;
  readonly stored_fingerprint: Buffer | null;
}

/** `SELECT * FROM twophase_claim(…)` for one key. */
export function claimOne(schema: string, tenant: boolean): string {
  return tenant
    ? `SELECT * FROM ${schema}.twophase_claim_tenant($1, $2, $3, $4, $5, $6, $7)`
    : `SELECT * FROM ${schema}.twophase_claim($1, $2, $3, $4, $5, $6)`;
}

/**
 * Many claims in one statement, in request order (`ord`): each call of the volatile claim function
 * sees what the calls before it wrote, so a key repeated in the batch is `busy` the second time.
 * Parameters are arrays, one element per request: [tenants,] keys, key texts, fingerprints,
 * owners, leases.
 */
export function claimMany(schema: string, tenant: boolean): string {
  return tenant
    ? `SELECT c.*, r.ord FROM unnest($1::text[], $2::bytea[], $3::text[], $4::bytea[], $5::text[], $6::bigint[]) WITH ORDINALITY AS r(tenant, k, kt, fp, owner, lease_ms, ord)
         CROSS JOIN LATERAL ${schema}.twophase_claim_tenant(r.tenant, r.k, r.kt, r.fp, r.owner, r.lease_ms, NULL) c ORDER BY r.ord`
    : `SELECT c.*, r.ord FROM unnest($1::bytea[], $2::text[], $3::bytea[], $4::text[], $5::bigint[]) WITH ORDINALITY AS r(k, kt, fp, owner, lease_ms, ord)
         CROSS JOIN LATERAL ${schema}.twophase_claim(r.k, r.kt, r.fp, r.owner, r.lease_ms, NULL) c ORDER BY r.ord`;
}
