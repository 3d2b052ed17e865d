/**
 * Settle statements of a lease: commit, release and extend. Each compares the owner token and
 * the fencing token in its WHERE, so it acts only while the row is still this owner's, and
 * answers a row when it acted (an empty answer: a newer owner took the key).
 *
 * Parameters, in order: [tenant,] key digest, owner token, fencing token, then per statement:
 * - commit: outcome JSON text (`{"result": …}` or `{}`), retention in ms. Answers `kept`: false
 *   when the outcome did not fit the 4096-byte bound and the key was completed without it.
 *   A row this owner already completed (a retried commit whose reply was lost) answers again.
 * - release: reset (boolean; true = `failed_permanent`, the next acquisition is attempt 1),
 *   retention in ms (the attempt count is remembered that long).
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

export function commit(schema: string, tenant: boolean): string {
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

export function release(schema: string, tenant: boolean): string {
  const { where, n } = match(tenant);
  return `UPDATE ${table(schema, tenant)} SET
      status = CASE WHEN $${n + 1}::boolean THEN 'failed_permanent' ELSE 'failed_retryable' END,
      outcome = jsonb_build_object('released', CASE WHEN $${n + 1}::boolean THEN 'dead_lettered' ELSE 'retry' END),
      expires_at = clock_timestamp() + $${n + 2} * interval '1 millisecond',
      updated_at = greatest(clock_timestamp(), created_at)
    WHERE ${where} AND status = 'processing'
    RETURNING 1 AS ok`;
}

export function extend(schema: string, tenant: boolean): string {
  const { where, n } = match(tenant);
  return `UPDATE ${table(schema, tenant)} SET
      expires_at = clock_timestamp() + $${n + 1} * interval '1 millisecond',
      updated_at = greatest(clock_timestamp(), created_at)
    WHERE ${where} AND status = 'processing'
    RETURNING 1 AS ok`;
}
