/**
 * Operations on stored keys: diagnose one key (what a redelivery would meet), and purge expired
 * rows in bounded batches (short transactions, no long locks).
 */
import type { ClientBase, Pool } from 'pg';
import { ConfigurationError, type JsonValue } from '../../src';
import { SchemaMismatchError, toClaimerError } from './errors';
import { DEFAULT_SCHEMA, quoteIdentifier } from './identifiers';
import { keyDigests, sha256 } from './key-digest';
import { storedResult } from './stored-outcome';

/** What `diagnoseKey` found. Stable JSON: new fields may be added, none renamed. */
export type KeyDiagnosis =
  | { readonly state: 'missing'; readonly key: string }
  | { readonly state: 'expired'; readonly key: string; readonly status: string; readonly expiredMsAgo: number }
  | { readonly state: 'in_progress'; readonly key: string; readonly owner: string; readonly fencingToken: string; readonly attempt: number; readonly leaseLeftMs: number }
  | { readonly state: 'lease_expired'; readonly key: string; readonly owner: string; readonly fencingToken: string; readonly attempt: number; readonly expiredMsAgo: number }
  | { readonly state: 'replayable'; readonly key: string; readonly result?: JsonValue; readonly retentionLeftMs: number; readonly completedAt: string }
  | { readonly state: 'fingerprint_conflict'; readonly key: string; readonly storedFingerprint: string; readonly givenFingerprint: string }
  | { readonly state: 'failed'; readonly key: string; readonly retryable: boolean; readonly attempt: number; readonly detail: unknown; readonly retentionLeftMs: number };

export interface DiagnoseOptions {
  readonly schema?: string;
  /** The full key as claimed (with the consumer's namespace, e.g. `payments:order-7`). */
  readonly key: string;
  /** The tenant, for the tenant inbox. */
  readonly tenant?: string;
  /** A fingerprint to compare with the stored one. */
  readonly fingerprint?: string;
}

/** What the key tools accept: a `pg` Pool, or a client (for example inside the caller's transaction). */
export type PostgresQueryable = Pool | ClientBase;

/**
 * Reads one key's row and says what a delivery of it would meet.
 * @throws SchemaMismatchError, ClaimerUnavailableError
 */
export async function diagnoseKey(db: PostgresQueryable, options: DiagnoseOptions): Promise<KeyDiagnosis> {
  const schema = quoteIdentifier('schema', options.schema ?? DEFAULT_SCHEMA);
  const { key } = options;
  const digest = keyDigests(key, options.tenant).key;
  const text =
    options.tenant === undefined
      ? `SELECT *, extract(epoch FROM (expires_at - clock_timestamp())) * 1000 AS left_ms FROM ${schema}.twophase_inbox WHERE key_digest = $1`
      : `SELECT *, extract(epoch FROM (expires_at - clock_timestamp())) * 1000 AS left_ms FROM ${schema}.twophase_tenant_inbox WHERE tenant_id = $2 AND key_digest = $1`;
  let rows: Record<string, unknown>[];
  try {
    rows = (await db.query(text, options.tenant === undefined ? [digest] : [digest, options.tenant])).rows;
  } catch (error) {
    throw toClaimerError(error, `diagnose of "${key}"`);
  }
  const row = rows[0];
  if (!row) return { state: 'missing', key };
  const leftMs = Math.round(Number(row.left_ms));
  const status = String(row.status);
  const fingerprint = row.fingerprint as Buffer | null;
  if (status !== 'processing' && leftMs <= 0) return { state: 'expired', key, status, expiredMsAgo: -leftMs };
  if (options.fingerprint !== undefined && fingerprint && !fingerprint.equals(sha256(options.fingerprint))) {
    return { state: 'fingerprint_conflict', key, storedFingerprint: `sha256:${fingerprint.toString('hex')}`, givenFingerprint: options.fingerprint };
  }
  const fence = String(row.fencing_token);
  const attempt = Number(row.attempt);
  switch (status) {
    case 'processing':
      return leftMs > 0
        ? { state: 'in_progress', key, owner: String(row.owner_token), fencingToken: fence, attempt, leaseLeftMs: leftMs }
        : { state: 'lease_expired', key, owner: String(row.owner_token), fencingToken: fence, attempt, expiredMsAgo: -leftMs };
    case 'completed': {
      const result = storedResult(row.outcome as { result?: unknown });
      return { state: 'replayable', key, ...(result === undefined ? {} : { result }), retentionLeftMs: leftMs, completedAt: (row.updated_at as Date).toISOString() };
    }
    default:
      return { state: 'failed', key, retryable: status === 'failed_retryable', attempt, detail: row.outcome, retentionLeftMs: leftMs };
  }
}

export interface PurgeOptions {
  readonly schema?: string;
  /** Delete rows whose `expires_at` passed at least this long ago, ms. Default 3 600 000 (1 h). */
  readonly olderThanMs?: number;
  /** Rows per DELETE (one short transaction each). Default 1000; range [1, 100000]. */
  readonly batchSize?: number;
  /** Count what would be deleted; delete nothing. */
  readonly dryRun?: boolean;
}

/** Counts per table. Stable JSON. */
export interface PurgeReport {
  readonly dryRun: boolean;
  readonly olderThanMs: number;
  readonly tables: Record<string, { readonly deleted: number; readonly batches: number }>;
}

/**
 * Deletes expired rows of the inbox tables and the attempt counts, in batches of `batchSize`
 * (each its own auto-committed DELETE, skipping rows another transaction holds), until none is
 * left. Processing rows are purged only once their lease ended more than `olderThanMs` ago.
 * @throws SchemaMismatchError when the schema has none of the twophase tables (never migrated)
 * @throws ClaimerUnavailableError when PostgreSQL cannot be reached
 */
export async function purgeExpired(db: PostgresQueryable, options: PurgeOptions = {}): Promise<PurgeReport> {
  const schema = quoteIdentifier('schema', options.schema ?? DEFAULT_SCHEMA);
  const olderThanMs = options.olderThanMs ?? 3_600_000;
  const batchSize = options.batchSize ?? 1000;
  if (!Number.isInteger(olderThanMs) || olderThanMs < 0) throw new ConfigurationError(`olderThanMs must be an integer ≥ 0, got ${String(olderThanMs)}`);
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 100_000) throw new ConfigurationError(`batchSize must be an integer in [1, 100000], got ${String(batchSize)}`);
  const tables: Record<string, { deleted: number; batches: number }> = {};
  try {
    for (const table of ['twophase_inbox', 'twophase_tenant_inbox', 'twophase_attempts']) {
      const exists = (await db.query<{ r: string | null }>('SELECT to_regclass($1) AS r', [`${schema}.${table}`])).rows[0]?.r;
      if (!exists) continue;
      const where = `expires_at < clock_timestamp() - $1 * interval '1 millisecond'`;
      if (options.dryRun) {
        const n = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.${table} WHERE ${where}`, [olderThanMs])).rows[0]!.n;
        tables[table] = { deleted: n, batches: 0 };
        continue;
      }
      const counts = { deleted: 0, batches: 0 };
      for (;;) {
        const result = await db.query(
          `DELETE FROM ${schema}.${table} WHERE ctid = ANY (ARRAY(SELECT ctid FROM ${schema}.${table} WHERE ${where} LIMIT $2 FOR UPDATE SKIP LOCKED))`,
          [olderThanMs, batchSize],
        );
        counts.batches++;
        counts.deleted += result.rowCount ?? 0;
        if ((result.rowCount ?? 0) < batchSize) break;
      }
      tables[table] = counts;
    }
  } catch (error) {
    throw toClaimerError(error, 'purge');
  }
  // No table at all: a schema never migrated (or misspelled), not an empty one.
  if (Object.keys(tables).length === 0) {
    throw new SchemaMismatchError(`purge: schema ${schema} has none of the twophase tables (twophase_inbox, twophase_tenant_inbox, twophase_attempts); run \`twophase postgres migrate\``, [
      `schema ${schema}: never migrated, or not the schema your claimers use`,
    ]);
  }
  return { dryRun: options.dryRun === true, olderThanMs, tables };
}
