/**
 * The relay's store on PostgreSQL: `<schema>.twophase_outbox` (migration 3) through the
 * application's `pg` Pool. A claim is one call of `twophase_outbox_claim` (`FOR UPDATE SKIP
 * LOCKED` on the heads of the ordering keys; no global lock); every later statement matches the
 * claim's fencing token.
 */
import type { Pool } from 'pg';
import { ConfigurationError, type OutboxDestination, type OutboxProperties, type OutboxStats, type OutboxSystem } from '../../src';
import { checkKnownOptions, describeType, type OutboxClaim, type OutboxClaimRequest, type OutboxFailure, type OutboxLease, type OutboxRecord, type OutboxStore } from '../../src/adapter-kit';
import { SchemaMismatchError, toClaimerError } from './errors';
import { DEFAULT_SCHEMA, quoteIdentifier } from './identifiers';
import { MIGRATIONS, REQUIRED_OUTBOX_VERSION } from './migrations';
import * as sql from './statements/outbox';

/** What the store uses and does not own. */
export interface PostgresOutboxStoreDependencies {
  /** The application's pool; the store never ends it. Each statement borrows a client briefly. */
  readonly pool: Pool;
}

/** Options of a {@link PostgresOutboxStore}. */
export interface PostgresOutboxStoreOptions {
  /** Schema of the outbox table, as migrated. Default `twophase`. */
  readonly schema?: string;
  /** Deadline of each statement, ms (`query_timeout`). Default 10 000. [10, 600 000]. */
  readonly operationTimeoutMs?: number;
}

/** A claimed row as `twophase_outbox_claim` returns it. */
interface ClaimedRow {
  seq: string;
  id: string;
  system: OutboxSystem;
  destination: OutboxDestination;
  headers: Record<string, string>;
  properties: OutboxProperties;
  body: Buffer;
  ordering_key: string | null;
  attempts: number;
  created_at: Date;
  fencing_token: string;
}

/** The outbox table, seen by a relay. */
export class PostgresOutboxStore implements OutboxStore {
  readonly schemaName: string;
  /** Quoted. */
  readonly schema: string;
  private readonly pool: Pool;
  private readonly operationTimeoutMs: number;

  /** @throws ConfigurationError for a missing pool, an unknown option or an invalid value */
  constructor(dependencies: PostgresOutboxStoreDependencies, options: PostgresOutboxStoreOptions = {}) {
    if (!dependencies?.pool || typeof dependencies.pool.query !== 'function') throw new ConfigurationError(`PostgresOutboxStore needs { pool } (a pg Pool), got ${describeType(dependencies)}`);
    const second = 'an option, which goes in the second argument: new PostgresOutboxStore({ pool }, { … })';
    checkKnownOptions('PostgresOutboxStore dependencies', dependencies, ['pool'], { schema: second, operationTimeoutMs: second });
    checkKnownOptions('PostgresOutboxStore options', options, ['schema', 'operationTimeoutMs']);
    this.pool = dependencies.pool;
    this.schemaName = options.schema ?? DEFAULT_SCHEMA;
    this.schema = quoteIdentifier('schema', this.schemaName);
    const timeout = options.operationTimeoutMs ?? 10_000;
    if (!Number.isInteger(timeout) || timeout < 10 || timeout > 600_000) throw new ConfigurationError(`operationTimeoutMs must be an integer in [10, 600000], got ${describeType(timeout)}`);
    this.operationTimeoutMs = timeout;
  }

  /** The outbox table the relay reads, for its start line: `{ store: 'postgresql', schema, table }` (see {@link OutboxStore.describe}). */
  describe(): Readonly<Record<string, string>> {
    return { store: 'postgresql', schema: this.schemaName, table: `${this.schemaName}.twophase_outbox` };
  }

  /**
   * Checks that migration 3 (the outbox) was applied and that no migration newer than this
   * version of twophase knows was: a relay older than its table is refused.
   * @throws SchemaMismatchError naming the fix
   */
  async ready(): Promise<void> {
    const hint = `run \`twophase postgres migrate --schema ${this.schemaName}\``;
    const exists = (await this.query<{ r: string | null }>('ready', 'SELECT to_regclass($1) AS r', [`${this.schema}.twophase_migrations`])).rows[0]?.r;
    if (!exists) throw new SchemaMismatchError(`the outbox schema "${this.schemaName}" has no migrations table: ${hint}`);
    const versions = (await this.query<{ version: number }>('ready', `SELECT version FROM ${this.schema}.twophase_migrations ORDER BY version`, [])).rows.map((r) => r.version);
    if (!versions.includes(REQUIRED_OUTBOX_VERSION)) throw new SchemaMismatchError(`the schema "${this.schemaName}" lacks migration ${REQUIRED_OUTBOX_VERSION} (the outbox; applied: ${versions.join(', ') || 'none'}): ${hint}`);
    const newest = Math.max(...MIGRATIONS.map((m) => m.version));
    const newer = versions.filter((v) => v > newest);
    if (newer.length > 0) {
      throw new SchemaMismatchError(`the schema "${this.schemaName}" was migrated by a newer twophase (migration ${newer.join(', ')}; this version knows up to ${newest}): upgrade this relay`);
    }
  }

  async claim(request: OutboxClaimRequest): Promise<OutboxClaim> {
    const rows = (await this.query<ClaimedRow>('outbox claim', sql.claim(this.schema), [request.owner, request.limit, request.leaseMs, request.systems, request.deadKeyPolicy === 'hold'])).rows;
    const fencingToken = rows.length > 0 ? Number(rows[0]!.fencing_token) : 0;
    return {
      lease: { owner: request.owner, fencingToken },
      records: rows.map(toRecord),
    };
  }

  async extend(lease: OutboxLease, sequences: readonly string[], leaseMs: number): Promise<readonly string[]> {
    if (sequences.length === 0) return [];
    const rows = (await this.query<{ seq: string }>('outbox lease extend', sql.extend(this.schema), [sequences, lease.fencingToken, lease.owner, leaseMs])).rows;
    return rows.map((r) => r.seq);
  }

  async complete(lease: OutboxLease, sequences: readonly string[]): Promise<number> {
    if (sequences.length === 0) return 0;
    return (await this.query('outbox complete', sql.complete(this.schema), [sequences, lease.fencingToken])).rowCount ?? 0;
  }

  async fail(lease: OutboxLease, failures: readonly OutboxFailure[]): Promise<number> {
    if (failures.length === 0) return 0;
    const params = [failures.map((f) => f.sequence), failures.map((f) => (f.retryInMs === undefined ? null : Math.round(f.retryInMs))), failures.map((f) => f.reason), failures.map((f) => f.error), lease.fencingToken, lease.owner];
    return (await this.query('outbox fail', sql.fail(this.schema), params)).rowCount ?? 0;
  }

  async release(lease: OutboxLease, sequences: readonly string[]): Promise<number> {
    if (sequences.length === 0) return 0;
    return (await this.query('outbox release', sql.release(this.schema), [sequences, lease.fencingToken, lease.owner])).rowCount ?? 0;
  }

  async stats(): Promise<OutboxStats> {
    const row = (await this.query<{ pending: string; oldest_ms: string; leased: string; dead: Record<string, number> }>('outbox stats', sql.stats(this.schema), [])).rows[0]!;
    return { pending: Number(row.pending), oldestPendingAgeMs: Number(row.oldest_ms), leased: Number(row.leased), dead: row.dead };
  }

  private async query<R extends object = Record<string, unknown>>(what: string, text: string, values: unknown[]): Promise<{ rows: R[]; rowCount: number | null }> {
    try {
      return await this.pool.query<R & import('pg').QueryResultRow>({ text, values, query_timeout: this.operationTimeoutMs } as never);
    } catch (error) {
      throw toClaimerError(error, what);
    }
  }
}

function toRecord(r: ClaimedRow): OutboxRecord {
  return {
    id: r.id,
    sequence: String(r.seq),
    system: r.system,
    destination: r.destination,
    headers: r.headers,
    properties: r.properties,
    body: r.body,
    orderingKey: r.ordering_key,
    attempts: r.attempts,
    createdAt: r.created_at,
  };
}
