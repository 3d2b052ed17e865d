/**
 * A consumer process for the SIGKILL tests of the transactional inbox (RabbitMQ + PostgreSQL).
 * Its handler writes the ledger row through `ctx.transaction`. For the target key it then:
 * - `kill-before-commit`: records a marker (auto-committed, outside the transaction) and hangs
 *   until the parent kills this process with SIGKILL: between the effect's INSERT and the COMMIT;
 * - `kill-after-commit`: acks; an observer kills this process with SIGKILL on the `committed`
 *   event, which comes after the COMMIT and before the broker ack.
 *
 *   node -r ts-node/register/transpile-only inbox-child.ts '<json config>'
 */
import { Pool } from 'pg';
import { ack } from '../../../../src';
import { PostgresClaimer } from '../../../../adapters/postgres';
import { RabbitMqSource } from '../../../../adapters/rabbitmq';
import { InboxConsumer, writeLedger } from './inbox-fixture';

interface ChildConfig {
  readonly amqpUrl: string;
  readonly queue: string;
  readonly delayTiersMs: number[];
  readonly schema: string;
  readonly pg: Record<string, unknown>;
  readonly mode: 'kill-before-commit' | 'kill-after-commit';
  readonly targetKey: string;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '{}') as ChildConfig;
  const pool = new Pool(config.pg);
  pool.on('error', () => undefined);
  const ledger = `${config.schema}.ledger`;
  const claimer = new PostgresClaimer({ pool }, { schema: config.schema, mode: 'transactional' });
  const source = new RabbitMqSource({ url: config.amqpUrl, queue: config.queue, delayTiersMs: config.delayTiersMs });
  const consumer = new InboxConsumer(
    {
      name: 'inbox',
      claimer,
      source,
      concurrency: 4,
      leaseTtlMs: 30_000,
      observers: [
        {
          onEvent: (event) => {
            if (config.mode === 'kill-after-commit' && event.type === 'committed' && event.key === config.targetKey) process.kill(process.pid, 'SIGKILL');
          },
        },
      ],
    },
    async (message, ctx) => {
      await writeLedger(ctx.transaction, ledger, message.key);
      if (config.mode === 'kill-before-commit' && message.key === config.targetKey) {
        await pool.query(`INSERT INTO ${config.schema}.markers (name) VALUES ('inserted')`);
        await new Promise(() => undefined); // hangs until SIGKILL
      }
      return ack({ booked: message.key });
    },
  );
  await consumer.start();
  await pool.query(`INSERT INTO ${config.schema}.markers (name) VALUES ('ready')`);
}

main().catch((error: unknown) => {
  process.stderr.write(`inbox-child failed: ${String(error)}\n`);
  process.exit(1);
});
