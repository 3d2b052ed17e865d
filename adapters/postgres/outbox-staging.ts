/**
 * Staging outbox messages into an open transaction of the application's database client:
 * `ctx.outbox` of a transactional consumer or `runOnce` (through the claim's transaction), and
 * {@link stageOutbox} / {@link transactionOutbox} for any other code (an HTTP handler, a job).
 *
 * Staging goes through {@link SqlExecutor}, the one method every PostgreSQL client has
 * (`query(text, params)`): a `pg` Client or PoolClient as is; an ORM's transaction through a
 * one-line adapter of its raw-query method.
 */
import { ConfigurationError, InvalidOutboxMessageError, type Outbox, OutboxIdConflictError, type OutboxMessage, OutboxTransactionError, type OutboxWriter, ScopedOutbox, TwophaseError } from '../../src';
import { checkKnownOptions, describeType, type OutboxEnvelope } from '../../src/adapter-kit';
import { SchemaMismatchError, sqlState, toClaimerError, TransactionAbortedError } from './errors';
import { DEFAULT_SCHEMA, quoteIdentifier } from './identifiers';

/**
 * What staging needs of a database client: `query(text, params)` on a connection inside the
 * caller's transaction. A `pg` Client or PoolClient fits as is.
 */
export interface SqlExecutor {
  query(text: string, params?: unknown[]): Promise<unknown>;
}

/** Options of {@link stageOutbox} and {@link transactionOutbox}. */
export interface StageOutboxOptions {
  /** Schema of the outbox table, as migrated. Default `twophase`. */
  readonly schema?: string;
  /**
   * Derive the ids from this scope and each message's position (`outboxMessageId(scope, n)`), so a
   * retried unit of work (the same request id, the same job id) stages the same ids. Without it,
   * ids are random. A scope names one unit of work: reusing it for another is an
   * `OutboxIdConflictError` when its ids are still in the table.
   */
  readonly idScope?: string;
  /** Send NOTIFY at commit so a listening relay wakes at once. Default true. */
  readonly notify?: boolean;
}

const OPTION_NAMES = ['schema', 'idScope', 'notify'];

/**
 * An {@link Outbox} staging into `db`'s open transaction (positions count across its calls).
 * Nothing is sent until the first `stage`.
 * @throws ConfigurationError for an unknown option or an invalid schema name
 */
export function transactionOutbox(db: SqlExecutor, options: StageOutboxOptions = {}): Outbox {
  checkKnownOptions('stageOutbox options', options, OPTION_NAMES);
  if (!db || typeof (db as SqlExecutor).query !== 'function') throw new ConfigurationError(`stageOutbox needs a client with query(text, params) inside a transaction, got ${describeType(db)}`);
  if (options.idScope !== undefined && (typeof options.idScope !== 'string' || options.idScope.length === 0)) throw new ConfigurationError(`idScope must be a non-empty string, got ${describeType(options.idScope)}`);
  const schema = quoteIdentifier('schema', options.schema ?? DEFAULT_SCHEMA);
  return new ScopedOutbox(new PostgresOutboxWriter(db, schema, options.notify ?? true, true), options.idScope);
}

/**
 * Stages `messages` in `db`'s open transaction, in order, in one statement; resolves with their
 * ids. They are published by a relay once the transaction commits, never if it rolls back.
 *
 * ```ts
 * await client.query('BEGIN');
 * await client.query('INSERT INTO orders (id) VALUES ($1)', [orderId]);
 * const [id] = await stageOutbox(client, { to: { exchange: 'orders', routingKey: 'order.placed' }, body: { orderId } });
 * await client.query('COMMIT');
 * ```
 * @throws InvalidOutboxMessageError for a malformed message (nothing sent)
 * @throws OutboxTransactionError when `db` is not inside a transaction (auto-commit, or the transaction ended or is aborted)
 * @throws SchemaMismatchError when the outbox migration is missing (`twophase postgres migrate`)
 * @throws OutboxIdConflictError when an id is already in the table (an `idScope` reused)
 * @throws ClaimerUnavailableError when PostgreSQL fails otherwise
 */
export function stageOutbox(db: SqlExecutor, messages: OutboxMessage | readonly OutboxMessage[], options: StageOutboxOptions = {}): Promise<string[]> {
  try {
    const outbox = transactionOutbox(db, options);
    return outbox.stageMany(Array.isArray(messages) ? (messages as readonly OutboxMessage[]) : [messages as OutboxMessage]);
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * Writes envelopes with `twophase_outbox_stage` through `db`, one writer per transaction: only its
 * first staging statement asks for the NOTIFY (one per transaction is all a relay needs). With `probe`, the first call reads
 * the transaction's start time in a statement of its own and every staging statement checks it is
 * still in that transaction: a client in auto-commit (or a Pool, or a transaction that ended)
 * runs each statement in a transaction of its own, so the times differ and nothing is staged.
 * (The first statement cannot check this alone: under the extended query protocol, which `pg`
 * uses for parameters, `statement_timestamp()` moves on between a statement's Parse and its
 * Execute, so it differs from `transaction_timestamp()` in auto-commit too; tried, and refused.)
 */
export class PostgresOutboxWriter implements OutboxWriter {
  private transactionStarted: Promise<string> | undefined;
  /** A staging statement of this transaction already queued the NOTIFY (PostgreSQL sends it once at COMMIT anyway). */
  private notified = false;

  constructor(
    private readonly db: SqlExecutor,
    /** Quoted schema. */
    private readonly schema: string,
    private readonly notify: boolean,
    /** Check for an open transaction (off for the inbox's own transaction, which is one by construction). */
    private readonly probe: boolean,
  ) {}

  private started(): Promise<string> {
    this.transactionStarted ??= this.db.query('SELECT transaction_timestamp()::text AS t', []).then((r) => {
      const rows = (r as { rows?: { t?: unknown }[] } | null)?.rows;
      const t = rows?.[0]?.t;
      if (typeof t !== 'string') throw new ConfigurationError("stageOutbox: the client's query() did not return { rows } as pg does; pass a pg client or an adapter returning pg-shaped results");
      return t;
    });
    return this.transactionStarted;
  }

  async stage(envelopes: readonly OutboxEnvelope[]): Promise<void> {
    if (envelopes.length === 0) return;
    // One message (the common call) goes as plain values, wrapped in arrays by the server: the
    // body travels as bytes instead of hex text inside an array literal, which the client would
    // build and the server parse.
    const one = envelopes.length === 1 ? envelopes[0]! : undefined;
    const params: unknown[] = one
      ? [one.id, one.system, JSON.stringify(one.destination), JSON.stringify(one.headers), JSON.stringify(one.properties), one.body, one.orderingKey]
      : [
          envelopes.map((e) => e.id),
          envelopes.map((e) => e.system),
          envelopes.map((e) => JSON.stringify(e.destination)),
          envelopes.map((e) => JSON.stringify(e.headers)),
          envelopes.map((e) => JSON.stringify(e.properties)),
          envelopes.map((e) => e.body),
          envelopes.map((e) => e.orderingKey),
        ];
    params.push(this.notify && !this.notified);
    try {
      params.push(this.probe ? await this.started() : null);
      await this.db.query(stageStatement(this.schema, one !== undefined), params);
      if (this.notify) this.notified = true;
    } catch (error) {
      throw stagingError(error);
    }
  }
}

/**
 * The staging statement. Parameters: $1 ids, $2 systems, $3 destinations, $4 headers,
 * $5 properties (JSON text), $6 bodies, $7 ordering keys (each a plain value when `one`, else an
 * array, in order), $8 notify, $9 the transaction's start time (NULL: not checked).
 */
function stageStatement(schema: string, one: boolean): string {
  const args = one
    ? 'ARRAY[$1::uuid], ARRAY[$2::text], ARRAY[$3::jsonb], ARRAY[$4::jsonb], ARRAY[$5::jsonb], ARRAY[$6::bytea], ARRAY[$7::text]'
    : '$1::uuid[], $2::text[], $3::jsonb[], $4::jsonb[], $5::jsonb[], $6::bytea[], $7::text[]';
  return `SELECT ${schema}.twophase_outbox_stage(${args}, $8::boolean, $9::timestamptz)`;
}

/** The typed error of a failed staging statement, naming the fix. */
export function stagingError(error: unknown): TwophaseError {
  if (error instanceof TransactionAbortedError) {
    return new OutboxTransactionError('outbox staging after the transaction ended (the claim was already settled): stage before the handler returns; nothing was staged', { cause: error });
  }
  if (error instanceof InvalidOutboxMessageError || error instanceof TwophaseError) return error;
  const state = sqlState(error);
  const text = error instanceof Error ? error.message : String(error);
  if (state === '25P01') return new OutboxTransactionError('outbox staging needs an open transaction: call it between BEGIN and COMMIT on the same client (the message would otherwise be published without its effect); nothing was staged', { cause: error });
  if (state === '25P02') return new OutboxTransactionError(`outbox staging into an aborted transaction (an earlier statement failed; PostgreSQL said: ${text}): roll it back and run the unit of work again; nothing was staged`, { cause: error });
  if (state === '23505') return new OutboxIdConflictError(`an outbox id is already staged (PostgreSQL said: ${text}): an idScope names one unit of work; nothing was staged`, { cause: error });
  if (state === '42P01' || state === '42883' || state === '3F000') {
    return new SchemaMismatchError(`the outbox table or its functions are missing (PostgreSQL said: ${text}): run \`twophase postgres migrate\` (migration 3, the outbox)`);
  }
  return toClaimerError(error, 'outbox staging');
}
