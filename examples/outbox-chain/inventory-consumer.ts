/**
 * The inventory service: consumes `order.placed` from RabbitMQ with the transactional inbox. In
 * the claim's transaction it records the reservation and stages `stock.reserved` for Kafka
 * (keyed by SKU, so one SKU's events keep their order): the reservation, the event and the claim
 * commit together. A redelivered or republished `order.placed` (same `idempotency-key`, the
 * outbox id) is acked as a duplicate without running the handler again.
 */
import type { PoolClient } from 'pg';
import { ack, ConsumerBase, type ConsumerOptions, type Disposition, type HandlerContext, type Message } from '../../src';
import type { OrderPlaced } from './orders-app';

/** What `stock.reserved` carries. */
export type StockReserved = {
  readonly orderId: string;
  readonly sku: string;
  readonly quantity: number;
};

export class InventoryConsumer extends ConsumerBase<OrderPlaced, PoolClient> {
  constructor(
    options: ConsumerOptions,
    private readonly schema: string,
    private readonly topic: string,
  ) {
    super(options);
  }

  async handle(message: Message<OrderPlaced>, ctx: HandlerContext<PoolClient>): Promise<Disposition> {
    const { orderId, sku, quantity } = message.body;
    await ctx.transaction.query(`INSERT INTO ${this.schema}.reservations (order_id, sku, quantity) VALUES ($1, $2, $3)`, [orderId, sku, quantity]);
    const reserved: StockReserved = { orderId, sku, quantity };
    await ctx.outbox.stage({ to: { topic: this.topic, key: sku }, body: reserved, orderingKey: sku });
    return ack();
  }
}
