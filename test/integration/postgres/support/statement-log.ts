/**
 * Records the statements every client of a `pg` Pool sends, in order, and which client sent each:
 * for tests that count what a path sends and on how many connections.
 */
import type { Pool, PoolClient } from 'pg';

export interface StatementLog {
  /** Each statement's text, trimmed and in lower case, in the order sent. */
  readonly sent: string[];
  /** The client that sent each of `sent`. */
  readonly senders: object[];
  /** Forgets what was recorded so far. */
  clear(): void;
}

/** Starts recording on `pool`: each client is wrapped the first time the pool hands it out. */
export function recordStatements(pool: Pool): StatementLog {
  const log: StatementLog = {
    sent: [],
    senders: [],
    clear() {
      log.sent.length = 0;
      log.senders.length = 0;
    },
  };
  const counted = new WeakSet<object>();
  pool.on('acquire', (client: PoolClient) => {
    if (counted.has(client)) return;
    counted.add(client);
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      log.sent.push(String(typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string }).text).trim().toLowerCase());
      log.senders.push(client);
      return query(...args);
    };
  });
  return log;
}
