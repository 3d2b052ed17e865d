/**
 * Borrowing a client from the caller's Pool under a deadline, and giving it back: healthy, or
 * destroyed when its connection can no longer be trusted (a socket error, a timed-out query still
 * running on the server, a session holding an advisory lock it could not release).
 */
import type { Pool, PoolClient } from 'pg';
import { ClaimerUnavailableError } from '../../src';
import { sqlState, toClaimerError } from './errors';

/** A borrowed client with an `error` listener attached, so a dying connection never crashes the process. */
export class BorrowedClient {
  /** Set when the connection reported an error: the client is destroyed on return. */
  broken: unknown;
  private returned = false;
  private readonly onError = (error: unknown): void => {
    this.broken ??= error;
  };

  constructor(readonly client: PoolClient) {
    client.on('error', this.onError);
  }

  /**
   * Marks the client broken when `error` is not a plain SQL error (no SQLSTATE): a lost connection
   * or a query timeout leaves the connection in an unknown state.
   */
  noteError(error: unknown): void {
    if (sqlState(error) === undefined) this.broken ??= error ?? new Error('unknown client error');
  }

  /** Gives the client back to the pool, or destroys it when broken (or `destroy`). Idempotent. */
  giveBack(destroy = false): void {
    if (this.returned) return;
    this.returned = true;
    this.client.off('error', this.onError);
    const reason = destroy ? (this.broken ?? new Error('destroyed by twophase')) : this.broken;
    this.client.release(reason === undefined ? undefined : reason instanceof Error ? reason : new Error(String(reason)));
  }
}

/**
 * Borrows a client, waiting at most until `deadlineAt` (local clock `now()` ms). A client that
 * arrives after the deadline is returned unused, so nothing is sent late.
 * @throws ClaimerUnavailableError past the deadline or when connecting fails
 */
export function borrow(pool: Pool, what: string, remainingMs: number): Promise<BorrowedClient> {
  return new Promise((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      reject(new ClaimerUnavailableError(`${what}: no PostgreSQL connection within ${remainingMs} ms (pool exhausted or server unreachable)`));
    }, Math.max(0, remainingMs));
    pool.connect().then(
      (client) => {
        if (late) client.release();
        else {
          clearTimeout(timer);
          resolve(new BorrowedClient(client));
        }
      },
      (error: unknown) => {
        if (late) return;
        clearTimeout(timer);
        reject(toClaimerError(error, what));
      },
    );
  });
}
