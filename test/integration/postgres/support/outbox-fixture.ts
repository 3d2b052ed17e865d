/**
 * Outbox test fixture: a fresh migrated schema with an `orders` effect table, a RabbitMQ queue
 * bound to a fresh exchange, and helpers to read the outbox table and the queue.
 */
import type { GetMessage } from 'amqplib';
import type { PoolClient } from 'pg';
import { type OutboxPublisher, OutboxRelay, type OutboxRelayDependencies, type OutboxRelayOptions, type OutboxRecord } from '../../../../src';
import { PostgresOutboxStore } from '../../../../adapters/postgres';
import { RabbitMqOutboxPublisher } from '../../../../adapters/rabbitmq';
import { AMQP_URL, AmqpAdmin, uniqueName } from '../../rabbitmq/support/amqp';
import { CapturingLogger } from '../../rabbitmq/support/harness';
import { freshSchema, type SchemaFixture } from './pg-helpers';

export interface OutboxRow {
  seq: string;
  id: string;
  state: string;
  attempts: number;
  lease_owner: string | null;
  fencing_token: string | null;
  dead_reason: string | null;
  last_error: string | null;
  ordering_key: string | null;
  available_in_ms: number;
}

export class OutboxFixture {
  readonly admin = new AmqpAdmin();
  readonly logger = new CapturingLogger();
  readonly exchange = uniqueName('outbox-x');
  readonly queue = uniqueName('outbox-q');
  private readonly relays: OutboxRelay[] = [];

  private constructor(readonly db: SchemaFixture) {}

  static async create(label: string): Promise<OutboxFixture> {
    const db = await freshSchema(label);
    const f = new OutboxFixture(db);
    await db.pool.query(`CREATE TABLE ${db.schema}.orders (id text PRIMARY KEY)`);
    await f.admin.open();
    f.admin.track(f.queue, { delayTiersMs: [], exchanges: [f.exchange] });
    const ch = await f.admin.ch();
    await ch.assertExchange(f.exchange, 'direct', { durable: true });
    await ch.assertQueue(f.queue, { durable: true });
    await ch.bindQueue(f.queue, f.exchange, 'placed');
    return f;
  }

  get pool() {
    return this.db.pool;
  }

  get schema(): string {
    return this.db.schema;
  }

  store(): PostgresOutboxStore {
    return new PostgresOutboxStore({ pool: this.pool }, { schema: this.schema });
  }

  rabbit(): RabbitMqOutboxPublisher {
    return new RabbitMqOutboxPublisher({ url: AMQP_URL, logger: this.logger, publishTimeoutMs: 5000 });
  }

  relay(dependencies: Partial<OutboxRelayDependencies> = {}, options: OutboxRelayOptions = {}): OutboxRelay {
    const relay = new OutboxRelay(
      { store: this.store(), publisher: this.rabbit(), logger: this.logger, ...dependencies },
      { pollIntervalMs: 50, retryBackoff: { initialDelayMs: 10, maxDelayMs: 20, multiplier: 1, jitter: 0 }, statsIntervalMs: 0, shutdownTimeoutMs: 2000, ...options },
    );
    this.relays.push(relay);
    return relay;
  }

  /** Runs `fn` in a transaction on one client; commits unless `rollback`. */
  async inTransaction<T>(fn: (client: PoolClient) => Promise<T>, rollback = false): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const value = await fn(client);
      await client.query(rollback ? 'ROLLBACK' : 'COMMIT');
      return value;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  async rows(): Promise<OutboxRow[]> {
    const r = await this.pool.query<OutboxRow>(
      `SELECT seq::text, id::text, state, attempts, lease_owner, fencing_token::text, dead_reason, last_error, ordering_key,
              floor(extract(epoch FROM available_at - clock_timestamp()) * 1000)::int AS available_in_ms
         FROM ${this.schema}.twophase_outbox ORDER BY seq`,
    );
    return r.rows;
  }

  async drain(queue = this.queue): Promise<GetMessage[]> {
    return this.admin.drain(queue);
  }

  async cleanup(): Promise<void> {
    for (const r of this.relays) await r.stop().catch(() => undefined);
    await this.admin.cleanup().catch(() => undefined);
    await this.db.cleanup();
  }
}

/** A publisher that holds each publish until the test opens its gate (or fails it). */
export class GatedPublisher implements OutboxPublisher {
  readonly system: 'rabbitmq' | 'kafka';
  readonly waiting: OutboxRecord[] = [];
  private readonly gates: { record: OutboxRecord; open: () => void; fail: (e: unknown) => void }[] = [];

  constructor(private readonly inner: OutboxPublisher) {
    this.system = inner.system;
  }

  start(): Promise<void> {
    return this.inner.start?.() ?? Promise.resolve();
  }

  close(): Promise<void> {
    return this.inner.close?.() ?? Promise.resolve();
  }

  publish(record: OutboxRecord): Promise<void> {
    this.waiting.push(record);
    return new Promise<void>((resolve, reject) => {
      this.gates.push({ record, open: resolve, fail: reject });
    }).then(() => this.inner.publish(record));
  }

  /** Lets every held publish go through to the broker. */
  openAll(): void {
    for (const g of this.gates.splice(0)) g.open();
  }
}
