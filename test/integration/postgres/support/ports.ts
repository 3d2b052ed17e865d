/**
 * The transaction ports the PostgreSQL suites run with: node-postgres's own (`pgTransactions`) and
 * Drizzle's (`drizzleTransactions`), each over a pool, with one way to write an effect through
 * the library's transaction object as an application would. Drizzle runs twice: `drizzle`, over
 * the claimer's own pool, takes the path without a port (`overPoolClient`); `drizzle-callback` is
 * the same port without it, so the claim runs inside `db.transaction` as it does for a `db` built
 * on another pool. `kysely` is Kysely's port (`kyselyTransactions`) over the claimer's own pool,
 * which takes the path without a port too; its writer refuses a transaction object that the port's
 * `overPoolClient` did not build, so a suite run with it fails when the claim went the other way.
 */
import type { Pool } from 'pg';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { sql } from 'drizzle-orm';
import { pgTransactions, type TransactionPort } from '../../../../adapters/postgres';
import { Kysely, PostgresDialect, type Transaction } from 'kysely';
import { drizzleTransactions, type DrizzleTransaction } from '../../../../adapters/postgres/orm/drizzle';
import { kyselyTransactions } from '../../../../adapters/postgres/orm/kysely';
import { silentLogger } from '../../redis/support/redis-helpers';

export type PortName = 'pg' | 'drizzle' | 'drizzle-callback' | 'kysely';

/** Any table `schema.table (key, fence)`, as Kysely's query builder sees it. */
type EffectTables = Record<string, { key: string; fence: number }>;

/** A port and an effect writer: `write(tx, table, key, fence)` inserts (key, fence) through `tx`. */
export interface PortUnderTest {
  readonly name: PortName;
  readonly port: TransactionPort<unknown>;
  write(tx: unknown, table: string, key: string, fence: number): Promise<void>;
}

export function portUnderTest(name: PortName, pool: Pool): PortUnderTest {
  if (name === 'pg') {
    return {
      name,
      port: pgTransactions(pool) as TransactionPort<unknown>,
      write: async (tx, table, key, fence) => {
        await (tx as import('pg').PoolClient).query(`INSERT INTO ${table} (key, fence) VALUES ($1, $2)`, [key, fence]);
      },
    };
  }
  if (name === 'kysely') return kyselyOverClaimerPool(pool);
  const db = drizzle(pool);
  const port = drizzleTransactions(db) as TransactionPort<unknown>;
  return {
    name,
    port: name === 'drizzle' ? port : { name: port.name, transaction: port.transaction, query: port.query },
    write: async (tx, table, key, fence) => {
      await (tx as DrizzleTransaction<NodePgDatabase>).execute(sql`INSERT INTO ${sql.raw(table)} (key, fence) VALUES (${key}, ${fence})`);
    },
  };
}

/** Every transaction object a `kysely` port's `overPoolClient.wrap` built (any instance of this module). */
const builtOverClient = new WeakSet<object>();

/**
 * Kysely on the claimer's own pool. The port's `overPoolClient.wrap` is spied on: `write` throws
 * when handed a transaction object it did not build (the claim ran inside `db.transaction()`).
 */
function kyselyOverClaimerPool(pool: Pool): PortUnderTest {
  const db = new Kysely<EffectTables>({ dialect: new PostgresDialect({ pool }) });
  const port = kyselyTransactions(db, { pool, logger: silentLogger });
  const over = port.overPoolClient;
  if (over === undefined || !('wrap' in over)) throw new Error('kyselyTransactions offered no overPoolClient.wrap');
  const spied = {
    ...over,
    wrap: (client: import('pg').PoolClient) => {
      const trx = over.wrap(client);
      builtOverClient.add(trx);
      return trx;
    },
  };
  return {
    name: 'kysely',
    port: { name: port.name, transaction: port.transaction.bind(port), query: port.query.bind(port), overPoolClient: spied } as TransactionPort<unknown>,
    write: async (tx, table, key, fence) => {
      if (!builtOverClient.has(tx as object)) throw new Error("kysely: ctx.transaction was not built over the claimer's client (the claim did not take overPoolClient)");
      await (tx as Transaction<EffectTables>).insertInto(table).values({ key, fence }).execute();
    },
  };
}

export const PORT_NAMES: readonly PortName[] = ['pg', 'drizzle', 'drizzle-callback', 'kysely'];
