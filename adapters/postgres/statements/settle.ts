/**
 * Settle statements of a lease: commit, release and extend. Each compares the owner token and
 * the fencing token in its WHERE, so it acts only while the row is still this owner's. Each
 * answers one row with `outcome`:
 * - `ok`: it acted;
 * - `committed` / `released`: it did not act because this same lease already committed or
 *   released the key (a retry after a reply was lost: the row still holds this owner's tokens);
 * - `lost` (no such row with these tokens): a newer owner took the key, or it expired and was purged.
 * Each statement starts with a `/* twophase:<operation> *\/` comment, so it can be recognised
 * in `pg_stat_statements` and by the tests' fault injection.
 *
 * Parameters, in order: [tenant,] key digest, owner token, fencing token, then per statement:
 * - commit: outcome JSON text (`{"result": …}` or `{}`), retention in ms. Answers `kept`: false
 *   when the outcome did not fit the 4096-byte bound and the key was completed without it.
 *   A row this owner already completed (a retried commit whose reply was lost) answers again.
 * - release: reset (boolean; true = `failed_permanent`, the next acquisition is attempt 1),
 *   retention in ms (the attempt count is remembered that long), uncount (boolean; true = this
 *   attempt does not count: the row's attempt goes back by one, or, at attempt 1, the row is
 *   released as after a reset).
 * - extend: lease in ms from now.
 */

function match(tenant: boolean): { where: string; n: number } {
  return tenant
    ? { where: 'tenant_id = $1 AND key_digest = $2 AND owner_token = $3 AND fencing_token = $4', n: 4 }
    : { where: 'key_digest = $1 AND owner_token = $2 AND fencing_token = $3', n: 3 };
}

function table(schema: string, tenant: boolean): string {
  return `${schema}.${tenant ? 'twophase_tenant_inbox' : 'twophase_inbox'}`;
}

/**
 * One statement: `update` (an UPDATE … RETURNING its extra columns) and, when it matched no row,
 * what this same lease's row says about why.
 */
function settled(operation: string, schema: string, tenant: boolean, update: string, extra = ''): string {
  const { where } = match(tenant);
  return `/* twophase:${operation} */ WITH acted AS (${update})
    SELECT 'ok' AS outcome${extra ? `, ${extra}` : ''} FROM acted
    UNION ALL
    SELECT COALESCE((SELECT CASE WHEN status = 'completed' THEN 'committed' WHEN status IN ('failed_retryable', 'failed_permanent') THEN 'released' ELSE 'lost' END
                     FROM ${table(schema, tenant)} WHERE ${where}), 'lost')${extra ? ', NULL' : ''}
    WHERE NOT EXISTS (SELECT 1 FROM acted)`;
}

/** The bare UPDATE of {@link commit} (answers `kept` for the rows it completed), for a caller's own CTE. */
export function commitUpdate(schema: string, tenant: boolean): string {
  const { where, n } = match(tenant);
  const outcome = `$${n + 1}::jsonb`;
  return `UPDATE ${table(schema, tenant)} SET
      outcome = CASE WHEN status = 'completed' THEN outcome WHEN octet_length(${outcome}::text) <= 4096 THEN ${outcome} ELSE '{"result_dropped": "too large"}'::jsonb END,
      expires_at = CASE WHEN status = 'completed' THEN expires_at ELSE clock_timestamp() + $${n + 2} * interval '1 millisecond' END,
      status = 'completed',
      updated_at = greatest(clock_timestamp(), created_at)
    WHERE ${where} AND status IN ('processing', 'completed')
    RETURNING outcome ? 'result' OR outcome = '{}'::jsonb AS kept`;
}

export function commit(schema: string, tenant: boolean): string {
  return settled('commit', schema, tenant, commitUpdate(schema, tenant), 'kept');
}

export function release(schema: string, tenant: boolean): string {
  const { where, n } = match(tenant);
  return settled('release', schema, tenant, `UPDATE ${table(schema, tenant)} SET
      status = CASE WHEN $${n + 1}::boolean OR ($${n + 3}::boolean AND attempt <= 1) THEN 'failed_permanent' ELSE 'failed_retryable' END,
      outcome = jsonb_build_object('released', CASE WHEN $${n + 1}::boolean THEN 'dead_lettered' ELSE 'retry' END),
      attempt = CASE WHEN $${n + 3}::boolean AND NOT $${n + 1}::boolean AND attempt > 1 THEN attempt - 1 ELSE attempt END,
      expires_at = clock_timestamp() + $${n + 2} * interval '1 millisecond',
      updated_at = greatest(clock_timestamp(), created_at)
    WHERE ${where} AND status = 'processing'
    RETURNING 1`);
}

export function extend(schema: string, tenant: boolean): string {
  const { where, n } = match(tenant);
  return settled('extend', schema, tenant, `UPDATE ${table(schema, tenant)} SET
      expires_at = clock_timestamp() + $${n + 1} * interval '1 millisecond',
      updated_at = greatest(clock_timestamp(), created_at)
    WHERE ${where} AND status = 'processing'
    RETURNING 1`);
}
