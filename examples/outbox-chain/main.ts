/**
 * The whole outbox chain in one process:
 *
 *   POST /orders ──runOnce: order row + order.placed (outbox)──▶ relay ──▶ RabbitMQ "orders"
 *     ──▶ inventory (inbox: reservation + stock.reserved (outbox)) ──▶ relay ──▶ Kafka "stock.reserved"
 *     ──▶ shipping (inbox: shipment row)
 *
 *   npx ts-node --transpile-only examples/outbox-chain/main.ts           # serve on :3001 until Ctrl-C
 *   npx ts-node --transpile-only examples/outbox-chain/main.ts --check   # place orders, retry one, check, exit
 *
 * PostgreSQL from $TWOPHASE_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres),
 * RabbitMQ from $TWOPHASE_AMQP_URL, Kafka from $TWOPHASE_KAFKA_BROKERS. See README.md.
 */
import type { Server } from 'node:http';
import { Kafka, logLevel } from 'kafkajs';
import { Pool } from 'pg';
import { OutboxRelay, runConsumers } from '../../src';
import { KafkaOutboxPublisher, KafkaSource } from '../../adapters/kafka';
import { migrate, PostgresClaimer, PostgresOutboxNotifier, PostgresOutboxStore } from '../../adapters/postgres';
import { RabbitMqOutboxPublisher, RabbitMqSource } from '../../adapters/rabbitmq';
import { serviceSettings } from '../shared/env';
import { InventoryConsumer, type StockReserved } from './inventory-consumer';
import { createOrdersApp } from './orders-app';
import { ShippingConsumer } from './shipping-consumer';

const SCHEMA = 'outbox_chain_example';
const EXCHANGE = 'outbox-chain.orders';
const QUEUE = 'outbox-chain.inventory';
const TOPIC = 'outbox-chain.stock-reserved';

async function main(): Promise<void> {
  const check = process.argv.includes('--check');
  const services = serviceSettings();
  const pool = new Pool({ connectionString: process.env.TWOPHASE_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres', max: 20 });
  await migrate(pool, { schema: SCHEMA });
  await pool.query(`CREATE TABLE IF NOT EXISTS ${SCHEMA}.orders (id uuid PRIMARY KEY, sku text NOT NULL, quantity int NOT NULL)`);
  await pool.query(`CREATE TABLE IF NOT EXISTS ${SCHEMA}.reservations (order_id uuid NOT NULL, sku text NOT NULL, quantity int NOT NULL)`);
  await pool.query(`CREATE TABLE IF NOT EXISTS ${SCHEMA}.shipments (order_id uuid NOT NULL, sku text NOT NULL)`);

  const kafka = new Kafka({ clientId: 'outbox-chain', brokers: [...services.kafkaBrokers], logLevel: logLevel.ERROR });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic: TOPIC, numPartitions: 3 }, { topic: `${TOPIC}.dlq`, numPartitions: 3 }] });
  await admin.disconnect();

  // One claimer for the three users of the inbox: runOnce, inventory and shipping (each its own namespace).
  const claimer = new PostgresClaimer({ pool }, { schema: SCHEMA, mode: 'transactional' });
  const shipped: { event: StockReserved; messageId: string }[] = [];
  const inventory = new InventoryConsumer(
    {
      name: 'inventory',
      claimer,
      concurrency: 8,
      source: new RabbitMqSource({ url: services.amqpUrl, queue: QUEUE, bindings: [{ exchange: EXCHANGE, routingKey: 'order.placed' }] }),
    },
    SCHEMA,
    TOPIC,
  );
  const shipping = new ShippingConsumer(
    { name: 'shipping', claimer, concurrency: 8, source: new KafkaSource({ kafka }, { topics: [TOPIC], groupId: 'outbox-chain-shipping', fromBeginning: true, claimBatchSize: 1 }) },
    SCHEMA,
    (event, messageId) => {
      shipped.push({ event, messageId });
      process.stdout.write(`shipping: order ${event.orderId} (${event.quantity} × ${event.sku}) reserved, shipment recorded [${messageId}]\n`);
    },
  );
  // One relay for both brokers: rows for RabbitMQ and for Kafka, each to its publisher.
  const relay = new OutboxRelay(
    {
      store: new PostgresOutboxStore({ pool }, { schema: SCHEMA }),
      publisher: [new RabbitMqOutboxPublisher({ url: services.amqpUrl }), new KafkaOutboxPublisher({ kafka })],
      notifier: new PostgresOutboxNotifier({ pool }, { schema: SCHEMA }),
    },
    { name: 'outbox-chain-relay', statsIntervalMs: 0 },
  );
  const port = Number(process.env.PORT ?? 3001);
  const server = await new Promise<Server>((resolve) => {
    const s = createOrdersApp({ claimer, schema: SCHEMA, exchange: EXCHANGE }).listen(port, '127.0.0.1', () => resolve(s));
  });
  // Ctrl-C (served mode): the consumers and the relay stop, then the HTTP server and the pool close.
  const runner = await runConsumers([inventory, shipping, relay], {
    ...(check ? { signals: [], exitProcess: false } : {}),
    onShutdown: [() => new Promise<void>((resolve) => server.close(() => resolve())), () => pool.end()],
  });
  process.stdout.write(`POST http://127.0.0.1:${port}/orders  {"sku": "...", "quantity": n}  with an Idempotency-Key header\n`);
  if (!check) return;
  const ok = await selfCheck(port, shipped);
  await runner.stop();
  process.exitCode = ok ? 0 : 1;
}

/** Places three orders, retries one with the same key, and waits until shipping saw each order once. */
async function selfCheck(port: number, shipped: readonly { event: StockReserved; messageId: string }[]): Promise<boolean> {
  const run = Date.now().toString(36);
  const post = async (key: string, body: object) => {
    const res = await fetch(`http://127.0.0.1:${port}/orders`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': key }, body: JSON.stringify(body) });
    const json = (await res.json()) as { orderId: string; messageIds: string[] };
    process.stdout.write(`POST /orders ${key}: ${res.status}${res.headers.get('idempotent-replayed') === 'true' ? ' (replayed)' : ''} order ${json.orderId}, order.placed ${json.messageIds.join(', ')}\n`);
    return json;
  };
  const first = await post(`${run}-1`, { sku: 'mug', quantity: 2 });
  await post(`${run}-2`, { sku: 'mug', quantity: 1 });
  await post(`${run}-3`, { sku: 'lamp', quantity: 1 });
  const retry = await post(`${run}-1`, { sku: 'mug', quantity: 2 }); // the client retries: same answer, nothing staged
  const orders = new Set([first.orderId, retry.orderId]);
  const deadline = Date.now() + 30_000;
  while (shipped.length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  // A little longer: a duplicate on its way would show up as a fourth shipment.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const perOrder = new Map<string, number>();
  for (const s of shipped) perOrder.set(s.event.orderId, (perOrder.get(s.event.orderId) ?? 0) + 1);
  const ok = orders.size === 1 && shipped.length === 3 && [...perOrder.values()].every((n) => n === 1);
  process.stdout.write(`check: ${shipped.length} shipments for 3 orders (the retry replayed order ${retry.orderId}); ${ok ? 'OK: each order shipped once' : 'FAILED'}\n`);
  return ok;
}

main().catch((error: unknown) => {
  process.stderr.write(`outbox chain failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
