/**
 * A transaction PostgreSQL ends on the server (idle past the claim's lease, or
 * `pg_terminate_backend`) makes node-postgres emit `error` on the client that holds it. An
 * `EventEmitter` with no `error` listener throws, which ends the process; the pool listens only
 * while a client is idle, and a library that borrows a client for a transaction (Kysely) adds no
 * listener of its own. The failure still reaches the transaction: its next statement or COMMIT
 * rejects.
 */

/** Clients that already carry the listener. */
const listening = new WeakSet<object>();
const ignore = (): void => undefined;

interface PoolEvents {
  on(event: 'acquire', listener: (client: { on(event: 'error', listener: () => void): unknown }) => void): unknown;
}

/**
 * Adds a listener that ignores `error` to each client `pool` hands out (its `acquire` event),
 * once per client. Safe to call again on the same pool: a client gets one listener.
 * @param pool a `pg` Pool
 */
export function ignoreClientErrors(pool: PoolEvents): void {
  pool.on('acquire', (client) => {
    if (listening.has(client)) return;
    listening.add(client);
    client.on('error', ignore);
  });
}
