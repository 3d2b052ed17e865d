/**
 * The demo's outbox mode (`npm run demo -- --outbox`), on the local PostgreSQL and RabbitMQ:
 *
 * - a producer places orders: each one transaction with the order row and `order.placed` staged
 *   in the outbox; a share rolls back on purpose (the order failed after staging), and a share
 *   crashes before COMMIT (its connection is destroyed: the server aborts the transaction);
 * - several relays publish at once; relays crash at every step (after their claim, after a
 *   publish was sent and before its confirm, after the confirm and before the DELETE). A crashed
 *   relay is frozen as a dead process would be: none of its calls ever returns, its leases run
 *   out, and a new relay starts;
 * - a twophase consumer with the transactional inbox applies each `order.placed` (a shipment
 *   row in the claim's transaction).
 *
 * Verdict: every committed order shipped exactly once (no duplicate effect, none lost), and no
 * event from an order that did not commit was published (no phantom). The broker-level copies a
 * crashed relay published again are counted: the inbox absorbed them.
 */
import { randomBytes } from 'node:crypto';
import amqplib from 'amqplib';
import { Pool } from 'pg';
import { ack, ConsumerBase, type Disposition, type HandlerContext, type Message, OutboxRelay, silentLogger } from '../../src';
import { sleep as pause, type OutboxNotifier, type OutboxPublisher, type OutboxStore, type OutboxSubscription } from '../../src/adapter-kit';
import { migrate, PostgresClaimer, PostgresOutboxNotifier, PostgresOutboxStore, stageOutbox } from '../../adapters/postgres';
import { delayQueueName, RabbitMqOutboxPublisher, RabbitMqSource } from '../../adapters/rabbitmq';
import { serviceSettings } from '../shared/env';
import { Rng } from './rng';

/** This loop is the process's main work: its pauses keep the process alive (twophase's own are unref'd). */
const sleep = (ms: number): Promise<void> => pause(ms, undefined, { keepProcessAlive: true });
/** The source's one delay tier (ms): a requeue waits this long in `<queue>.delay.200ms`. */
const DELAY_TIER_MS = 200;

export interface OutboxDemoOptions {
  readonly messages: number;
  readonly consumers: number;
  readonly crashRate: number;
  readonly seed: number;
  readonly timeoutS: number;
  readonly quiet: boolean;
}

type Placed = { readonly orderId: string };
type CrashPoint = 'after_claim' | 'after_publish_before_confirm' | 'after_confirm_before_delete';

/** Never settles: what a call into a dead process looks like from the outside. */
const never = <T>(): Promise<T> => new Promise<T>(() => undefined);

/**
 * A relay that can die at a step: from then on, none of its store or broker calls returns, and
 * its LISTEN session ends, as a dead process's sessions do (a frozen one would keep a connection
 * of the demo's pool for good).
 */
class CrashableRelay {
  dead = false;
  readonly relay: OutboxRelay;
  private readonly subscriptions: OutboxSubscription[] = [];

  constructor(
    name: string,
    store: OutboxStore,
    publisher: OutboxPublisher,
    notifier: OutboxNotifier,
    private readonly roll: () => CrashPoint | undefined,
    private readonly onCrash: (point: CrashPoint) => void,
  ) {
    const endingNotifier: OutboxNotifier = {
      listen: async (onNotify, onError) => {
        const subscription = await notifier.listen(onNotify, onError);
        this.subscriptions.push(subscription);
        return subscription;
      },
    };
    const deadStore: OutboxStore = {
      ready: () => store.ready?.() ?? Promise.resolve(),
      claim: async (request) => {
        if (this.dead) return never();
        const claim = await store.claim(request);
        if (claim.records.length > 0 && this.maybeCrash('after_claim')) return never();
        return claim;
      },
      extend: (lease, sequences, leaseMs) => (this.dead ? never() : store.extend(lease, sequences, leaseMs)),
      complete: (lease, sequences) => (this.dead || this.maybeCrash('after_confirm_before_delete') ? never() : store.complete(lease, sequences)),
      fail: (lease, failures) => (this.dead ? never() : store.fail(lease, failures)),
      release: (lease, sequences) => (this.dead ? never() : store.release(lease, sequences)),
      stats: () => store.stats(),
    };
    const deadPublisher: OutboxPublisher = {
      system: publisher.system,
      start: () => publisher.start?.() ?? Promise.resolve(),
      close: () => publisher.close?.() ?? Promise.resolve(),
      publish: (record) => {
        if (this.dead) return never();
        const sent = publisher.publish(record);
        if (this.maybeCrash('after_publish_before_confirm')) {
          sent.catch(() => undefined);
          return never();
        }
        return sent;
      },
      ...(publisher.classify ? { classify: (error: unknown) => publisher.classify!(error) } : {}),
    };
    this.relay = new OutboxRelay(
      { store: deadStore, publisher: deadPublisher, notifier: endingNotifier, logger: silentLogger },
      { name, batchSize: 50, leaseMs: 1000, pollIntervalMs: 200, retryBackoff: { initialDelayMs: 50, maxDelayMs: 500, multiplier: 2, jitter: 0.2 }, shutdownTimeoutMs: 1000, statsIntervalMs: 0 },
    );
  }

  private maybeCrash(point: CrashPoint): boolean {
    if (this.dead || this.roll() !== point) return false;
    this.dead = true;
    for (const subscription of this.subscriptions) void subscription.close().catch(() => undefined);
    this.onCrash(point);
    return true;
  }
}

class ShippingConsumer extends ConsumerBase<Placed, { query(text: string, values: unknown[]): Promise<unknown> }> {
  constructor(
    options: ConstructorParameters<typeof ConsumerBase<Placed>>[0],
    private readonly schema: string,
  ) {
    super(options);
  }

  async handle(message: Message<Placed>, ctx: HandlerContext<{ query(text: string, values: unknown[]): Promise<unknown> }>): Promise<Disposition> {
    await ctx.transaction.query(`INSERT INTO ${this.schema}.shipments (order_id, message_id) VALUES ($1, $2)`, [message.body.orderId, message.key]);
    return ack();
  }
}

/** The run's RabbitMQ entities (the source declared them): the queue, its dead-letter queue and exchange, its delay queue. */
async function removeQueues(url: string, queue: string): Promise<void> {
  const connection = await amqplib.connect(url);
  try {
    const channel = await connection.createChannel();
    for (const q of [queue, `${queue}.dlq`, delayQueueName(queue, DELAY_TIER_MS)]) await channel.deleteQueue(q);
    await channel.deleteExchange(`${queue}.dlx`);
  } finally {
    await connection.close();
  }
}

export async function runOutboxDemo(o: OutboxDemoOptions): Promise<number> {
  const services = serviceSettings();
  const pool = new Pool({ connectionString: process.env.TWOPHASE_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres', max: 24, connectionTimeoutMillis: 30_000 });
  pool.on('error', () => undefined); // the producer's crashed sessions
  const schema = `demo_outbox_${randomBytes(3).toString('hex')}`;
  const queue = `demo.outbox.${schema}`;
  await migrate(pool, { schema });
  await pool.query(`CREATE TABLE ${schema}.orders (id text PRIMARY KEY); CREATE TABLE ${schema}.shipments (order_id text NOT NULL, message_id text NOT NULL)`);
  const started = Date.now();
  const say = (line: string) => o.quiet || process.stdout.write(`${line}\n`);

  let deliveries = 0;
  const shipping = new ShippingConsumer(
    {
      name: 'shipping',
      claimer: new PostgresClaimer({ pool, logger: silentLogger }, { schema, mode: 'transactional' }),
      source: new RabbitMqSource({ url: services.amqpUrl, queue, delayTiersMs: [DELAY_TIER_MS], logger: silentLogger }),
      concurrency: 8,
      logger: silentLogger,
      observers: [{ onEvent: (e) => void (e.type === 'acquired' || e.type === 'done_duplicate' ? deliveries++ : undefined) }],
    },
    schema,
  );
  await shipping.start();

  const crashes: Record<CrashPoint, number> = { after_claim: 0, after_publish_before_confirm: 0, after_confirm_before_delete: 0 };
  const relays: CrashableRelay[] = [];
  const crashRng = new Rng(o.seed + 1);
  // A relay crash is rolled per step; at least ten times the consumer crash rate, so a short
  // run still sees every point.
  const relayCrashRate = Math.min(0.2, o.crashRate * 10);
  const roll = (): CrashPoint | undefined => {
    const r = crashRng.next();
    if (r < relayCrashRate / 3) return 'after_claim';
    if (r < (2 * relayCrashRate) / 3) return 'after_publish_before_confirm';
    if (r < relayCrashRate) return 'after_confirm_before_delete';
    return undefined;
  };
  let relayNumber = 0;
  let stopping = false;
  const startRelay = async (): Promise<void> => {
    const store = new PostgresOutboxStore({ pool }, { schema });
    const relay: CrashableRelay = new CrashableRelay(
      `demo-relay-${++relayNumber}`,
      store,
      new RabbitMqOutboxPublisher({ url: services.amqpUrl, logger: silentLogger, connectionName: `demo-relay-${relayNumber}` }),
      new PostgresOutboxNotifier({ pool, logger: silentLogger }, { schema }),
      roll,
      (point) => {
        crashes[point]++;
        if (!stopping) setTimeout(() => void startRelay(), 100);
      },
    );
    relays.push(relay);
    await relay.relay.start();
  };
  for (let i = 0; i < Math.max(2, o.consumers); i++) await startRelay();

  // The producer: one transaction per order, a few lanes at once.
  const committed = new Set<string>();
  const notCommitted = new Set<string>();
  const fates = { committed: 0, rolledBack: 0, crashedBeforeCommit: 0 };
  const producerRng = new Rng(o.seed + 2);
  let next = 0;
  const lane = async () => {
    while (next < o.messages) {
      const i = next++;
      const orderId = `order-${o.seed}-${i}`;
      const r = producerRng.next();
      const fate = r < 0.08 ? 'rollback' : r < 0.1 ? 'crash' : 'commit';
      const client = await pool.connect();
      let destroy = false;
      try {
        await client.query('BEGIN');
        await client.query(`INSERT INTO ${schema}.orders (id) VALUES ($1)`, [orderId]);
        const [id] = await stageOutbox(client, { to: { exchange: '', routingKey: queue }, body: { orderId }, orderingKey: `customer-${i % 20}` }, { schema, idScope: orderId });
        if (fate === 'commit') {
          await client.query('COMMIT');
          committed.add(id!);
          fates.committed++;
        } else if (fate === 'rollback') {
          await client.query('ROLLBACK');
          notCommitted.add(id!);
          fates.rolledBack++;
        } else {
          destroy = true; // the producer dies before COMMIT: the server aborts its transaction
          notCommitted.add(id!);
          fates.crashedBeforeCommit++;
        }
      } finally {
        client.release(destroy);
      }
    }
  };
  await Promise.all(Array.from({ length: 4 }, lane));
  say(`  staged ${o.messages} orders: ${fates.committed} committed, ${fates.rolledBack} rolled back, ${fates.crashedBeforeCommit} producer crashes before COMMIT`);

  // Drain: the outbox empty and every committed order shipped, three checks in a row.
  let quiet = 0;
  let lastProgress = 0;
  while (Date.now() - started < o.timeoutS * 1000) {
    const r = await pool.query<{ left: string; shipped: string }>(`SELECT (SELECT count(*) FROM ${schema}.twophase_outbox) AS left, (SELECT count(DISTINCT order_id) FROM ${schema}.shipments) AS shipped`);
    const done = Number(r.rows[0]!.left) === 0 && Number(r.rows[0]!.shipped) >= committed.size && shipping.health().inFlight === 0;
    quiet = done ? quiet + 1 : 0;
    if (quiet >= 3) break;
    if (Date.now() - lastProgress > 1000) {
      lastProgress = Date.now();
      say(`  outbox ${r.rows[0]!.left} rows, shipped ${r.rows[0]!.shipped}/${committed.size}, relay crashes ${Object.values(crashes).reduce((a, b) => a + b, 0)}`);
    }
    await sleep(300);
  }
  stopping = true;
  const elapsedMs = Date.now() - started;
  for (const r of relays) if (!r.dead) await r.relay.stop().catch(() => undefined);
  await shipping.stop();

  const rows = await pool.query<{ message_id: string; n: string }>(`SELECT message_id, count(*) AS n FROM ${schema}.shipments GROUP BY message_id`);
  const applied = new Map(rows.rows.map((r) => [r.message_id.slice('shipping:'.length), Number(r.n)]));
  const duplicates = [...applied.values()].filter((n) => n > 1).length;
  const phantoms = [...applied.keys()].filter((id) => notCommitted.has(id)).length;
  const lost = [...committed].filter((id) => !applied.has(id)).length;
  const republished = deliveries - applied.size;
  await removeQueues(services.amqpUrl, queue);
  // The frozen relays' calls never return: the pool is not waited for (the demo exits).
  await pool.query(`SET lock_timeout = '5s'; DROP SCHEMA ${schema} CASCADE`).catch(() => undefined);
  void pool.end().catch(() => undefined);
  const ok = duplicates === 0 && phantoms === 0 && lost === 0 && quiet >= 3;
  const crashLine = Object.entries(crashes)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  process.stdout.write(
    [
      '',
      `twophase demo, outbox mode: PostgreSQL outbox → relays → RabbitMQ → inbox consumer (seed ${o.seed}, ${(elapsedMs / 1000).toFixed(1)} s)`,
      `  orders placed           ${o.messages}: ${fates.committed} committed, ${fates.rolledBack} rolled back, ${fates.crashedBeforeCommit} producer crashes before COMMIT`,
      `  relay crashes           ${crashLine} (relays started: ${relayNumber})`,
      `  RabbitMQ queue          ${queue} (with its .dlq, delay queue and .dlx exchange: removed at the end)`,
      `  deliveries downstream   ${deliveries} (${Math.max(0, republished)} copies published again by crashed relays, absorbed by the inbox)`,
      `  shipped                 ${applied.size} of ${committed.size} committed orders`,
      `  phantom events          ${phantoms}   (an event of an order that never committed)`,
      `  duplicate effects       ${duplicates}`,
      `  lost                    ${lost}`,
      `verdict: ${ok ? 'OK' : 'FAILED'}${quiet >= 3 ? '' : ' (did not drain in time)'}`,
      '',
    ].join('\n'),
  );
  return ok ? 0 : 1;
}
