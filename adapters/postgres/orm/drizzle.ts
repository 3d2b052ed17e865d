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
import { sql, type SQL, type SQLChunk } from 'drizzle-orm';
import type { NodePgDatabase } from 'drizzle-orm/node-postgres';
import { ConfigurationError, consoleWarnLogger, type Logger } from '../../../src';
import { checkPeerVersion } from '../../../src/adapter-kit';
import type { SqlRow, TransactionPort } from '../transaction-port';

/**
 * Drizzle's transaction object (`tx`) of a node-postgres database with schema `TSchema`:
 * `ctx.transaction` with this port (`ConsumerBase<Body, DrizzleTransaction<typeof schema>>`).
 */
export type DrizzleTransaction<TSchema extends Record<string, unknown> = Record<string, never>> = Parameters<Parameters<NodePgDatabase<TSchema>['transaction']>[0]>[0];

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
 * @typeParam TSchema - the schema given to `drizzle(…)`
 * @throws ConfigurationError when `db` is not a Drizzle database (no `transaction` / `execute`)
 */
export function drizzleTransactions<TSchema extends Record<string, unknown>>(
  db: NodePgDatabase<TSchema>,
  options: DrizzleTransactionsOptions = {},
): TransactionPort<DrizzleTransaction<TSchema>> {
  if (!db || typeof db.transaction !== 'function' || typeof db.execute !== 'function') {
    throw new ConfigurationError('drizzleTransactions needs a Drizzle database from drizzle-orm/node-postgres (drizzle(pool))');
  }
  for (const name of Object.keys(options)) if (name !== 'logger') throw new ConfigurationError(`unknown drizzleTransactions option "${name}" (known: logger)`);
  checkPeerVersion('drizzle-orm', SUPPORTED_RANGE, options.logger ?? consoleWarnLogger);
  listenForErrors((db as { $client?: unknown }).$client);
  type Tx = DrizzleTransaction<TSchema>;
  return {
    name: 'drizzle',
    transaction: <T>(work: (tx: Tx) => Promise<T>) => db.transaction((tx) => work(tx)),
    async query(tx: Tx, text: string, values: readonly unknown[]): Promise<readonly SqlRow[]> {
      const result = await tx.execute(boundSql(text, values));
      return result.rows as SqlRow[];
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
  const chunks: SQLChunk[] = [];
  let last = 0;
  for (const match of text.matchAll(/"(?:[^"]|"")*"|'(?:[^']|'')*'|\$(\d+)/g)) {
    if (match[1] === undefined) continue;
    const index = Number(match[1]) - 1;
    if (index < 0 || index >= values.length) throw new RangeError(`no value for $${match[1]}`);
    // sql.param: one parameter even for an array (a value in sql`…` would become a list).
    chunks.push(sql.raw(text.slice(last, match.index)), sql.param(values[index]));
    last = match.index + match[0].length;
  }
  chunks.push(sql.raw(text.slice(last)));
  return sql.join(chunks);
}
