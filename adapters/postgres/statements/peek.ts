/**
 * `peek` statements: read a key's state without writing or locking anything (runOnce asks before
 * it claims, so a call it refuses never holds the key). One statement each, answering one row.
 *
 * Standalone mode: the inbox row, as the claim function would judge it. Parameters: [tenant,] key
 * digest. Answers (status, attempt, live): `live` = expires_at still ahead (server clock); no row
 * when the key was never claimed.
 *
 * Transactional mode: the claim row exists only once committed, and an attempt is counted in
 * `twophase_attempts` before its transaction opens, so the state is: completed row (done), the
 * key's advisory lock held by a session (busy: a run is in flight), else the live attempt count.
 * Parameters: [tenant,] key digest, scope digest, lock id's high and low 32 bits (a bigint
 * advisory lock shows in pg_locks as classid = high, objid = low, objsubid = 1:
 * https://www.postgresql.org/docs/current/view-pg-locks.html). Answers (done, locked, attempts).
 * pg_locks is read live while the rest uses the statement's snapshot, and a run commits before it
 * releases its lock: the claimer asks once more when the answer looks failed (postgres-claimer.ts).
 */

function table(schema: string, tenant: boolean): string {
  return `${schema}.${tenant ? 'twophase_tenant_inbox' : 'twophase_inbox'}`;
}

export function peekStandalone(schema: string, tenant: boolean): string {
  const where = tenant ? 'tenant_id = $1 AND key_digest = $2' : 'key_digest = $1';
  return `/* twophase:peek */ SELECT status, attempt, expires_at > clock_timestamp() AS live FROM ${table(schema, tenant)} WHERE ${where}`;
}

export function peekTransactional(schema: string, tenant: boolean): string {
  const n = tenant ? 2 : 1;
  const where = tenant ? 'tenant_id = $1 AND key_digest = $2' : 'key_digest = $1';
  return `/* twophase:peek */ SELECT
      EXISTS (SELECT 1 FROM ${table(schema, tenant)} WHERE ${where} AND status = 'completed' AND expires_at > clock_timestamp()) AS done,
      EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND classid = $${n + 2}::bigint::oid AND objid = $${n + 3}::bigint::oid AND objsubid = 1) AS locked,
      COALESCE((SELECT attempts FROM ${schema}.twophase_attempts WHERE scope_digest = $${n + 1} AND expires_at > clock_timestamp()), 0) AS attempts`;
}

/** The two 32-bit halves of a signed 64-bit lock id, as pg_locks shows them (unsigned). */
export function lockHalves(lockId: string): [string, string] {
  const id = BigInt.asUintN(64, BigInt(lockId));
  return [(id >> 32n).toString(), (id & 0xffffffffn).toString()];
}
