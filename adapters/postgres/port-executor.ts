/**
 * A {@link SqlExecutor} over a {@link TransactionPort} and one of its open transactions: what
 * outbox staging (`ctx.outbox`, `stageOutbox`) needs, for any library that has a port.
 */
import type { SqlExecutor } from './outbox-staging';
import type { TransactionPort } from './transaction-port';

/**
 * Sends each `query(text, params)` through `port.query(tx, …)` and answers `{ rows }` as `pg` does.
 *
 * ```ts
 * await db.transaction(async (tx) => {
 *   await tx.insert(orders).values({ id: orderId });
 *   await stageOutbox(portExecutor(drizzleTransactions(db), tx), { to: { exchange: 'orders', routingKey: 'order.placed' }, body: { orderId } });
 * });
 * ```
 */
export function portExecutor<Tx>(port: TransactionPort<Tx>, tx: Tx): SqlExecutor {
  return {
    query: async (text: string, params?: unknown[]) => ({ rows: await port.query(tx, text, params ?? []) }),
  };
}
