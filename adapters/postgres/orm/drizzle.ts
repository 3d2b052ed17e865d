/**
 * `twophase/drizzle`: the transaction port of Drizzle ORM on node-postgres
 * (`drizzle-orm/node-postgres`), so that the PostgreSQL claimer's transactional mode runs each
 * claim inside `db.transaction(…)` and the handler writes its effect through Drizzle's `tx`.
 *
 * ```ts
 * import { drizzle } from 'drizzle-orm/node-postgres';
 * import { PostgresClaimer } from 'twophase/postgres';
 * import { drizzleTransactions } from 'twophase/drizzle';
 * const db = drizzle(pool);
 * const claimer = new PostgresClaimer({ pool, transactions: drizzleTransactions(db) }, { mode: 'transactional' });
 * ```
 */
// First: a missing client library is named before any module that needs it loads.
import { SUPPORTED_RANGE } from './drizzle-peer';
import { is, sql, type SQL, type SQLChunk } from 'drizzle-orm';
import { type NodePgDatabase, NodePgSession, NodePgTransaction } from 'drizzle-orm/node-postgres';
import type { PoolClient } from 'pg';
import { ConfigurationError, consoleWarnLogger, type Logger } from '../../../src';
import { checkPeerVersion } from '../../../src/adapter-kit';
import type { WrappedPoolClient, SqlRow, TransactionPort } from '../transaction-port';

/**
 * What `drizzleTransactions` needs of a Drizzle database: its `transaction` method. Structural, so
 * the database type is the application's own (whichever of Drizzle's CommonJS or ESM declarations
 * its project resolves).
 */
export interface DrizzleDatabase {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the transaction object's type is read from the application's database type
  transaction(work: (tx: any) => Promise<any>, config?: any): Promise<any>;
}

/**
 * Drizzle's transaction object (`tx`) of a database type `DB`: `ctx.transaction` with this port.
 * ```ts
 * type Tx = DrizzleTransaction<NodePgDatabase<typeof schema>>; // ConsumerBase<Body, Tx>
 * ```
 */
export type DrizzleTransaction<DB extends DrizzleDatabase> = Parameters<Parameters<DB['transaction']>[0]>[0];

/** Options of {@link drizzleTransactions}. */
export interface DrizzleTransactionsOptions {
  /** Where a version warning goes (`drizzle-orm` outside ^0.45). Default: the core's `consoleWarnLogger`. */
  readonly logger?: Pick<Logger, 'warn'>;
}

/** Clients that already carry the no-crash error listener. */
const listening = new WeakSet<object>();
const ignore = (): void => undefined;

/**
 * The {@link TransactionPort} of a Drizzle database on node-postgres.
 * - `transaction(work)` is `db.transaction((tx) => work(tx))`: Drizzle sends BEGIN, COMMIT when
 *   `work` resolves, ROLLBACK when it rejects, on one client of the pool.
 * - `query(tx, text, values)` is `tx.execute(…)` of an `sql` object built from `text` with each
 *   `$n` bound as one parameter (`sql.param`, never spliced into the text; an array stays one
 *   array parameter).
 * - A transaction PostgreSQL ends on the server (idle past the claim's lease, or
 *   `pg_terminate_backend`) makes node-postgres emit `error` on its client, which crashes the
 *   process when nothing listens; Drizzle attaches no listener to the client it borrows. So this
 *   port attaches a listener that ignores the event to each client the pool hands out (its
 *   `acquire` event); the failure still reaches the transaction, whose next statement or COMMIT
 *   rejects.
 * - `overPoolClient`: Drizzle's transaction object (`NodePgTransaction`, with the database's schema,
 *   logger and casing) over a client twophase borrowed and began. A claimer whose `pool` is the one
 *   `db` was built on (`drizzle(pool)`) uses it: the claim then runs as without a port, in three
 *   round trips a message instead of six (docs/performance.md), and Drizzle sends neither BEGIN
 *   nor COMMIT. A `db` over another pool, or over a single client, goes through
 *   `db.transaction` as above.
 * @typeParam DB - the database type (`NodePgDatabase<typeof schema>`), from which `ctx.transaction`'s type is read
 * @throws ConfigurationError when `db` is not a Drizzle database (no `transaction` / `execute`)
 */
export function drizzleTransactions<DB extends DrizzleDatabase>(db: DB, options: DrizzleTransactionsOptions = {}): TransactionPort<DrizzleTransaction<DB>> {
  if (!db || typeof db.transaction !== 'function' || typeof (db as { execute?: unknown }).execute !== 'function') {
    throw new ConfigurationError('drizzleTransactions needs a Drizzle database from drizzle-orm/node-postgres (drizzle(pool))');
  }
  for (const name of Object.keys(options)) if (name !== 'logger') throw new ConfigurationError(`unknown drizzleTransactions option "${name}" (known: logger)`);
  checkPeerVersion('drizzle-orm', SUPPORTED_RANGE, options.logger ?? consoleWarnLogger);
  listenForErrors((db as { $client?: unknown }).$client);
  type Tx = DrizzleTransaction<DB>;
  return {
    name: 'drizzle',
    transaction: <T>(work: (tx: Tx) => Promise<T>) => db.transaction((tx: Tx) => work(tx)) as Promise<T>,
    async query(tx: Tx, text: string, values: readonly unknown[]): Promise<readonly SqlRow[]> {
      const result = await (tx as unknown as NodePgDatabase).execute(boundSql(text, values));
      return result.rows as SqlRow[];
    },
    ...overPoolClient<Tx>(db),
  };
}

/** Drizzle's node-postgres session as it is at run time (its fields are private in the typings). */
interface SessionInternals {
  readonly client: unknown;
  readonly dialect: ConstructorParameters<typeof NodePgSession>[1];
  readonly schema: ConstructorParameters<typeof NodePgSession>[2];
  readonly options: ConstructorParameters<typeof NodePgSession>[3];
}

/**
 * `{ overPoolClient }` when `db` is a node-postgres database over a pg Pool, else `{}`. The
 * transaction object is built as Drizzle's own `db.transaction` builds it, on a session over the
 * given client instead of a client Drizzle borrows. `is` (not `instanceof`) recognises a session
 * of either of Drizzle's CommonJS and ESM copies.
 */
function overPoolClient<Tx>(db: DrizzleDatabase): { overPoolClient?: WrappedPoolClient<Tx> } {
  const session = (db as { session?: unknown }).session;
  if (!is(session, NodePgSession)) return {};
  const internals = session as unknown as SessionInternals;
  const pool = internals.client as { totalCount?: unknown; connect?: unknown } | undefined;
  if (!pool || typeof pool.connect !== 'function' || typeof pool.totalCount !== 'number') return {};
  return {
    overPoolClient: {
      pool,
      wrap: (client: PoolClient) => {
        const onClient = new NodePgSession(client, internals.dialect, internals.schema, internals.options);
        return new NodePgTransaction(internals.dialect, onClient, internals.schema) as unknown as Tx;
      },
    },
  };
}

/** Attaches the ignoring `error` listener to the pool's clients (or to a single client). */
function listenForErrors(client: unknown): void {
  const emitter = client as { on?: (event: string, listener: (...args: unknown[]) => void) => unknown; connect?: unknown; totalCount?: unknown } | undefined;
  if (!emitter || typeof emitter.on !== 'function' || listening.has(emitter)) return;
  listening.add(emitter);
  if (typeof emitter.totalCount === 'number') {
    emitter.on('acquire', (pooled: unknown) => {
      const c = pooled as { on(event: string, listener: () => void): unknown };
      if (listening.has(c)) return;
      listening.add(c);
      c.on('error', ignore);
    });
  } else emitter.on('error', ignore);
}

/**
 * `text` as a Drizzle `sql` object: the text between placeholders raw, each `$n` as `values[n-1]`
 * bound by the driver. A `$` inside a quoted identifier or string literal is left as it is.
 */
export function boundSql(text: string, values: readonly unknown[]): SQL {
  const { raws, indexes } = splitAtPlaceholders(text);
  const chunks: SQLChunk[] = [];
  for (let i = 0; i < indexes.length; i++) {
    const index = indexes[i]!;
    if (index >= values.length) throw new RangeError(`no value for $${index + 1}`);
    // sql.param: one parameter even for an array (a value in sql`…` would become a list).
    chunks.push(raws[i]!, sql.param(values[index]));
  }
  chunks.push(raws[indexes.length]!);
  return sql.join(chunks);
}

/** `text` split at its `$n` placeholders: `raws[i]` precedes placeholder `i` (value index `indexes[i]`); one more raw ends it. */
interface SplitText {
  readonly raws: readonly SQL[];
  readonly indexes: readonly number[];
}

/** Splits of the texts seen last (twophase sends a handful of fixed texts; bounded for any other caller). */
const splits = new Map<string, SplitText>();
const MAX_SPLITS = 64;

function splitAtPlaceholders(text: string): SplitText {
  const known = splits.get(text);
  if (known !== undefined) return known;
  const raws: SQL[] = [];
  const indexes: number[] = [];
  let last = 0;
  for (const match of text.matchAll(/"(?:[^"]|"")*"|'(?:[^']|'')*'|\$(\d+)/g)) {
    if (match[1] === undefined) continue;
    const index = Number(match[1]) - 1;
    if (index < 0) throw new RangeError(`no value for $${match[1]}`);
    raws.push(sql.raw(text.slice(last, match.index)));
    indexes.push(index);
    last = match.index + match[0].length;
  }
  raws.push(sql.raw(text.slice(last)));
  const split = { raws, indexes };
  if (splits.size >= MAX_SPLITS) splits.delete(splits.keys().next().value as string);
  splits.set(text, split);
  return split;
}
