/**
 * The transaction port of node-postgres itself: BEGIN and COMMIT on a client of the caller's
 * Pool. The reference implementation of {@link TransactionPort}, and a plain way to hand
 * `stageOutbox` / the claimer a `pg` transaction through the same interface as an ORM's.
 */
import type { Pool, PoolClient } from 'pg';
import { ConfigurationError } from '../../src';
import { TransactionAbortedError } from './errors';
import { borrow } from './pool-client';
import { guardClient, type GuardedLease } from './transaction-lease';
import type { SqlRow, TransactionLimits, TransactionPort } from './transaction-port';

/**
 * A {@link TransactionPort} over a `pg` Pool: `transaction` borrows a client (waiting at most
 * `limits.maxWaitMs`), sends BEGIN, runs `work` with the client, then COMMIT (or ROLLBACK when
 * `work` rejected) and returns the client. The client `work` gets refuses statements that end
 * the transaction (COMMIT, ROLLBACK…) and every query once the transaction ended; a client whose
 * connection failed is destroyed, never reused.
 *
 * ```ts
 * const claimer = new PostgresClaimer({ pool, transactions: pgTransactions(pool) }, { mode: 'transactional' });
 * ```
 * @throws ConfigurationError when `pool` is not a pg Pool
 */
export function pgTransactions(pool: Pool): TransactionPort<PoolClient> {
  if (!pool || typeof (pool as Partial<Pool>).connect !== 'function') throw new ConfigurationError('pgTransactions needs a pg Pool the application created');
  return {
    name: 'pg',
    async transaction<T>(work: (tx: PoolClient) => Promise<T>, limits: TransactionLimits): Promise<T> {
      const borrowed = await borrow(pool, 'pg transaction', limits.maxWaitMs);
      const state: { finished: boolean } & GuardedLease = { finished: false };
      try {
        await borrowed.client.query('BEGIN');
        let value: T;
        try {
          value = await work(guardClient(borrowed.client, state));
        } catch (error) {
          state.finished = true;
          await borrowed.client.query('ROLLBACK').catch((rollbackError: unknown) => borrowed.noteError(rollbackError ?? new Error('ROLLBACK failed')));
          throw error;
        }
        state.finished = true;
        const reply = await borrowed.client.query('COMMIT');
        // COMMIT of a transaction that an error aborted answers ROLLBACK, not an error.
        if (reply.command !== 'COMMIT') throw new TransactionAbortedError('pg transaction: PostgreSQL rolled the transaction back at COMMIT (a statement in it had failed)');
        return value;
      } catch (error) {
        borrowed.noteError(error);
        throw error;
      } finally {
        state.finished = true;
        borrowed.giveBack();
      }
    },
    async query(tx: PoolClient, text: string, values: readonly unknown[]): Promise<readonly SqlRow[]> {
      return (await tx.query(text, values as unknown[])).rows as SqlRow[];
    },
  };
}
