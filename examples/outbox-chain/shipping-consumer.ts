/**
 * The end of the chain: a shipping service consuming `stock.reserved` from Kafka with the
 * transactional inbox, one shipment row per reservation. It reports each event it applied.
 */
import type { PoolClient } from 'pg';
import { ack, ConsumerBase, type ConsumerOptions, type Disposition, type HandlerContext, type Message } from '../../src';
import type { StockReserved } from './inventory-consumer';

export class ShippingConsumer extends ConsumerBase<StockReserved, PoolClient> {
  constructor(
    options: ConsumerOptions,
    private readonly schema: string,
    private readonly onShipped: (event: StockReserved, messageId: string) => void,
  ) {
    super(options);
  }

  async handle(message: Message<StockReserved>, ctx: HandlerContext<PoolClient>): Promise<Disposition> {
    await ctx.transaction.query(`INSERT INTO ${this.schema}.shipments (order_id, sku) VALUES ($1, $2)`, [message.body.orderId, message.body.sku]);
    this.onShipped(message.body, message.key.slice(`${this.name}:`.length));
    return ack();
  }
}
