/**
 * The order endpoint: `POST /orders` with an `Idempotency-Key` header. One `runOnce` call, with
 * the PostgreSQL claimer in transactional mode, writes the order row and stages `order.placed`
 * in the same transaction as the key's claim: the row, the message and the key commit together
 * or not at all. A retry with the same key replays the first answer, the same message id in it,
 * and stages nothing more.
 */
import { createHash, randomUUID } from 'node:crypto';
import express, { type Express, type Request, type Response } from 'express';
import type { PoolClient } from 'pg';
import { type Claimer, InProgressError, KeyConflictError, runOnce } from '../../src';

/** What `order.placed` carries. */
export type OrderPlaced = {
  readonly orderId: string;
  readonly sku: string;
  readonly quantity: number;
};

/** The first answer, replayed to a retry. */
type Placed = {
  readonly orderId: string;
  /** The outbox ids of the messages the request staged (the broker message ids). */
  readonly messageIds: string[];
};

export interface OrdersAppOptions {
  /** `PostgresClaimer` in `mode: 'transactional'` (its transaction carries the order row and the message). */
  readonly claimer: Claimer;
  /** Schema of the orders table. */
  readonly schema: string;
  /** The exchange `order.placed` is published to. */
  readonly exchange: string;
}

export function createOrdersApp(options: OrdersAppOptions): Express {
  const app = express();
  app.use(express.json());
  app.post('/orders', async (req: Request, res: Response) => {
    const key = req.get('Idempotency-Key');
    const { sku, quantity } = (req.body ?? {}) as { sku?: unknown; quantity?: unknown };
    if (!key) return void res.status(400).json({ error: 'missing_idempotency_key' });
    if (typeof sku !== 'string' || typeof quantity !== 'number' || !Number.isInteger(quantity) || quantity <= 0) return void res.status(400).json({ error: 'expected { sku: string, quantity: positive integer }' });
    try {
      const outcome = await runOnce<Placed, PoolClient>(
        {
          claimer: options.claimer,
          scope: { operation: 'POST /orders' },
          key,
          fingerprint: createHash('sha256').update(JSON.stringify(req.body)).digest('hex'),
          leaseTtlMs: 10_000,
          doneTtlMs: 24 * 60 * 60 * 1000,
        },
        async ({ transaction, outbox }) => {
          const orderId = randomUUID();
          await transaction.query(`INSERT INTO ${options.schema}.orders (id, sku, quantity) VALUES ($1, $2, $3)`, [orderId, sku, quantity]);
          const placed: OrderPlaced = { orderId, sku, quantity };
          await outbox.stage({ to: { exchange: options.exchange, routingKey: 'order.placed' }, body: placed, properties: { type: 'order.placed' }, orderingKey: orderId });
          return { orderId, messageIds: [...outbox.stagedIds] };
        },
      );
      res.set('Idempotent-Replayed', outcome.status === 'replayed' ? 'true' : 'false');
      res.status(201).json(outcome.result);
    } catch (error) {
      if (error instanceof InProgressError) return void res.status(409).set('Retry-After', '1').json({ error: 'request_in_progress' });
      if (error instanceof KeyConflictError) return void res.status(422).json({ error: 'idempotency_key_reused_with_another_body' });
      res.status(500).json({ error: 'internal_error' });
    }
  });
  return app;
}
