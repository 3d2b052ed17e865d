/**
 * The transactional-inbox test fixture: a fresh schema with the inbox migrated, a `ledger`
 * effect table WITHOUT a unique key (so a repeated effect shows as a second row), and a consumer
 * whose handler writes its ledger row through `ctx.transaction`.
 */
import type { PoolClient, PoolConfig } from 'pg';
import { ack, ConsumerBase, type ConsumerOptions, type Disposition, type HandlerContext, type Message } from '../../../../src';
import { freshSchema, type SchemaFixture } from './pg-helpers';

export type InboxHandler = (message: Message<Record<string, unknown>>, context: HandlerContext<PoolClient>) => Promise<Disposition>;

/** A consumer whose handler is given per test, receiving the claim's transaction. */
export class InboxConsumer extends ConsumerBase<Record<string, unknown>, PoolClient> {
  constructor(
    options: ConsumerOptions,
    private readonly handler: InboxHandler,
  ) {
    super(options);
  }

  handle(message: Message<Record<string, unknown>>, context: HandlerContext<PoolClient>): Promise<Disposition> {
    return this.handler(message, context);
  }
}

export interface InboxFixture extends SchemaFixture {
  readonly ledger: string;
  /** Rows per key in the ledger. */
  counts(): Promise<Map<string, number>>;
}

export async function inboxFixture(label: string, pool: PoolConfig = {}): Promise<InboxFixture> {
  const f = await freshSchema(label, { pool });
  const ledger = `${f.schema}.ledger`;
  await f.pool.query(`CREATE TABLE ${ledger} (id bigserial PRIMARY KEY, key text NOT NULL, amount integer NOT NULL, pid integer)`);
  return {
    ...f,
    ledger,
    counts: async () => {
      const rows = await f.pool.query<{ key: string; n: number }>(`SELECT key, count(*)::int AS n FROM ${ledger} GROUP BY key`);
      return new Map(rows.rows.map((r) => [r.key, r.n]));
    },
  };
}

/** The effect: one ledger row, written through the claim's transaction. */
export async function writeLedger(tx: PoolClient, ledger: string, key: string, amount = 1): Promise<void> {
  await tx.query(`INSERT INTO ${ledger} (key, amount, pid) VALUES ($1, $2, pg_backend_pid())`, [key, amount]);
}

/** A handler that writes the ledger row and acks with a small result. */
export function ledgerHandler(ledger: string): InboxHandler {
  return async (m, ctx) => {
    await writeLedger(ctx.transaction, ledger, m.key);
    return ack({ booked: m.key });
  };
}
