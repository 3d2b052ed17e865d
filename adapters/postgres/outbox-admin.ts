/**
 * Operator functions on the outbox table, behind `twophase outbox status | list | show | requeue
 * | purge`: counts, listings, one message in full, dead messages back to pending (same id), and
 * dead messages deleted. Each is one statement; results are plain JSON-ready objects.
 */
import { ConfigurationError, type OutboxStats } from '../../src';
import { describeType } from '../../src/adapter-kit';
import { toClaimerError } from './errors';
import { DEFAULT_SCHEMA, quoteIdentifier } from './identifiers';
import type { PostgresQueryable } from './keys';
import * as sql from './statements/outbox';

/** Which messages a listing or an operation selects. */
export interface OutboxSelection {
  /** Schema of the outbox table. Default `twophase`. */
  readonly schema?: string;
}

/** One message in a listing (no body). */
export interface OutboxListEntry {
  readonly id: string;
  readonly sequence: string;
  readonly system: string;
  readonly destination: Record<string, unknown>;
  readonly orderingKey: string | null;
  readonly state: 'pending' | 'dead';
  readonly attempts: number;
  readonly deadReason: string | null;
  readonly lastError: string | null;
  /** Staging time, ISO 8601. */
  readonly createdAt: string;
  /** Not claimed before (retry backoff), ISO 8601. */
  readonly availableAt: string;
  /** The relay holding it, when its lease is live. */
  readonly leasedBy: string | null;
  readonly bodyBytes: number;
}

/** One message in full. */
export interface OutboxMessageDetails extends OutboxListEntry {
  readonly headers: Record<string, string>;
  readonly properties: Record<string, unknown>;
  /** The body, base64. */
  readonly bodyBase64: string;
  /** The body as UTF-8 text when it decodes cleanly; null otherwise. */
  readonly bodyText: string | null;
}

const ENTRY_COLUMNS = `id::text AS id, seq::text AS sequence, system, destination, ordering_key, state, attempts, dead_reason, last_error,
  created_at, available_at, CASE WHEN lease_owner IS NOT NULL AND lease_expires_at > clock_timestamp() THEN lease_owner END AS leased_by, octet_length(body) AS body_bytes`;

interface EntryRow {
  id: string;
  sequence: string;
  system: string;
  destination: Record<string, unknown>;
  ordering_key: string | null;
  state: 'pending' | 'dead';
  attempts: number;
  dead_reason: string | null;
  last_error: string | null;
  created_at: Date;
  available_at: Date;
  leased_by: string | null;
  body_bytes: number;
}

function toEntry(r: EntryRow): OutboxListEntry {
  return {
    id: r.id,
    sequence: r.sequence,
    system: r.system,
    destination: r.destination,
    orderingKey: r.ordering_key,
    state: r.state,
    attempts: r.attempts,
    deadReason: r.dead_reason,
    lastError: r.last_error,
    createdAt: r.created_at.toISOString(),
    availableAt: r.available_at.toISOString(),
    leasedBy: r.leased_by,
    bodyBytes: r.body_bytes,
  };
}

async function run<R extends object>(db: PostgresQueryable, what: string, text: string, values: unknown[]): Promise<{ rows: R[]; rowCount: number | null }> {
  try {
    return (await db.query(text, values)) as unknown as { rows: R[]; rowCount: number | null };
  } catch (error) {
    throw toClaimerError(error, what);
  }
}

function schemaOf(options: OutboxSelection): string {
  return quoteIdentifier('schema', options.schema ?? DEFAULT_SCHEMA);
}

/** Counts: pending, the oldest pending message's age (ms), leased, dead by reason. */
export async function outboxStatus(db: PostgresQueryable, options: OutboxSelection = {}): Promise<OutboxStats> {
  const row = (await run<{ pending: string; oldest_ms: string; leased: string; dead: Record<string, number> }>(db, 'outbox status', sql.stats(schemaOf(options)), [])).rows[0]!;
  return { pending: Number(row.pending), oldestPendingAgeMs: Number(row.oldest_ms), leased: Number(row.leased), dead: row.dead };
}

/** Options of {@link listOutbox}. */
export interface ListOutboxOptions extends OutboxSelection {
  /** `pending`, `dead` or `all`. Default `all`. */
  readonly state?: 'pending' | 'dead' | 'all';
  /** Most entries, oldest first. Default 100. [1, 10 000]. */
  readonly limit?: number;
}

/** Messages in staging order (oldest first), without their bodies. */
export async function listOutbox(db: PostgresQueryable, options: ListOutboxOptions = {}): Promise<OutboxListEntry[]> {
  const state = options.state ?? 'all';
  if (!['pending', 'dead', 'all'].includes(state)) throw new ConfigurationError(`state must be pending, dead or all, got ${describeType(state)}`);
  const limit = options.limit ?? 100;
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new ConfigurationError(`limit must be an integer in [1, 10000], got ${describeType(limit)}`);
  const rows = await run<EntryRow>(db, 'outbox list', `SELECT ${ENTRY_COLUMNS} FROM ${schemaOf(options)}.twophase_outbox WHERE ($1 = 'all' OR state = $1) ORDER BY seq LIMIT $2`, [state, limit]);
  return rows.rows.map(toEntry);
}

/** One message with its headers, properties and body; undefined when no message has this id (published, purged, or never staged). */
export async function showOutbox(db: PostgresQueryable, id: string, options: OutboxSelection = {}): Promise<OutboxMessageDetails | undefined> {
  checkId(id);
  const rows = await run<EntryRow & { headers: Record<string, string>; properties: Record<string, unknown>; body: Buffer }>(
    db,
    'outbox show',
    `SELECT ${ENTRY_COLUMNS}, headers, properties, body FROM ${schemaOf(options)}.twophase_outbox WHERE id = $1::uuid`,
    [id],
  );
  const r = rows.rows[0];
  if (!r) return undefined;
  const text = r.body.toString('utf8');
  return { ...toEntry(r), headers: r.headers, properties: r.properties, bodyBase64: r.body.toString('base64'), bodyText: Buffer.from(text, 'utf8').equals(r.body) ? text : null };
}

/** Which dead messages `requeue` and `purge` act on: the given ids, or every dead one (optionally of one reason). */
export interface DeadSelection extends OutboxSelection {
  readonly ids?: readonly string[];
  /** Every dead message (of `reason`, when given). Exclusive with `ids`. */
  readonly allDead?: boolean;
  readonly reason?: string;
}

/** What `requeue` or `purge` did. */
export interface DeadOperationReport {
  /** Ids acted on. */
  readonly ids: readonly string[];
  /** Ids asked for that are not dead messages in the table (pending, published or unknown). */
  readonly notDead: readonly string[];
}

function where(selection: DeadSelection): { clause: string; values: unknown[] } {
  const hasIds = selection.ids !== undefined && selection.ids.length > 0;
  if (hasIds === (selection.allDead === true)) throw new ConfigurationError('select the dead messages by ids, or all of them (allDead: true / --all-dead), not both and not neither');
  if (hasIds) {
    selection.ids!.forEach(checkId);
    return { clause: `state = 'dead' AND id = ANY ($1::uuid[])`, values: [selection.ids] };
  }
  return selection.reason === undefined ? { clause: `state = 'dead'`, values: [] } : { clause: `state = 'dead' AND dead_reason = $1`, values: [selection.reason] };
}

/**
 * Puts dead messages back to pending under the same id (attempts 0, publishable now; the last
 * error is kept). Under `deadKeyPolicy: 'hold'` this also frees the messages queued behind them.
 */
export async function requeueOutbox(db: PostgresQueryable, selection: DeadSelection): Promise<DeadOperationReport> {
  const { clause, values } = where(selection);
  const rows = await run<{ id: string }>(
    db,
    'outbox requeue',
    `UPDATE ${schemaOf(selection)}.twophase_outbox SET state = 'pending', dead_reason = NULL, attempts = 0, available_at = clock_timestamp(), lease_owner = NULL, lease_expires_at = NULL
      WHERE ${clause} RETURNING id::text AS id`,
    values,
  );
  return report(selection, rows.rows.map((r) => r.id));
}

/** Deletes dead messages (never pending ones): they will not be published. */
export async function purgeOutbox(db: PostgresQueryable, selection: DeadSelection): Promise<DeadOperationReport> {
  const { clause, values } = where(selection);
  const rows = await run<{ id: string }>(db, 'outbox purge', `DELETE FROM ${schemaOf(selection)}.twophase_outbox WHERE ${clause} RETURNING id::text AS id`, values);
  return report(selection, rows.rows.map((r) => r.id));
}

function report(selection: DeadSelection, ids: string[]): DeadOperationReport {
  const done = new Set(ids);
  return { ids, notDead: (selection.ids ?? []).filter((id) => !done.has(id.toLowerCase())) };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function checkId(id: unknown): void {
  if (typeof id !== 'string' || !UUID.test(id)) throw new ConfigurationError(`an outbox id is a UUID (8-4-4-4-12 hex digits), got ${describeType(id)}`);
}
