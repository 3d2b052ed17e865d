/**
 * The transaction ports the PostgreSQL suites run with: node-postgres's own (`pgTransactions`) and
 * Drizzle's (`drizzleTransactions`), each over a pool, with one way to write an effect through
 * the library's transaction object as an application would. Drizzle runs twice: `drizzle`, over
 * the claimer's own pool, takes the path without a port (`overPoolClient`); `drizzle-callback` is
 * the same port without it, so the claim runs inside `db.transaction` as it does for a `db` built
 * on another pool.
 */
import type { Pool } from 'pg';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { sql } from 'drizzle-orm';
import { pgTransactions, type TransactionPort } from '../../../../adapters/postgres';
import { drizzleTransactions, type DrizzleTransaction } from '../../../../adapters/postgres/orm/drizzle';

export type PortName = 'pg' | 'drizzle' | 'drizzle-callback';

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

export const PORT_NAMES: readonly PortName[] = ['pg', 'drizzle', 'drizzle-callback'];
