/**
 * A consumer process for the SIGKILL test of the Kafka batch mode (`transactionBatch:
 * 'per-chunk'`): its handler writes the ledger row through `ctx.transaction` (the chunk's shared
 * transaction). For the record whose key ends with `targetSuffix` it then records a marker
 * (auto-committed, outside the chunk) and hangs until the parent kills this process with SIGKILL:
 * the chunk's earlier records have written their effects, none committed.
 *
 *   node -r ts-node/register/transpile-only kafka-chunk-child.ts '<json config>'
 */
import { Pool } from 'pg';
import { ack } from '../../../../src';
import { PostgresClaimer } from '../../../../adapters/postgres';
import { fastSource, makeKafka } from '../../kafka/support/kafka-helpers';
import { InboxConsumer, writeLedger } from './inbox-fixture';

interface ChildConfig {
  readonly topic: string;
  readonly groupId: string;
  readonly schema: string;
  readonly pg: Record<string, unknown>;
  readonly targetSuffix: string;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '{}') as ChildConfig;
  const pool = new Pool(config.pg);
  pool.on('error', () => undefined);
  const ledger = `${config.schema}.ledger`;
  const claimer = new PostgresClaimer({ pool }, { schema: config.schema, mode: 'transactional', transactionBatch: 'per-chunk' });
  const source = fastSource(makeKafka('twophase-pg-chunk-child'), { topics: [config.topic], groupId: config.groupId, claimBatchSize: 16, preclaimMaxAgeMs: 20_000 });
  const consumer = new InboxConsumer({ name: config.groupId, claimer, source, concurrency: 4, leaseTtlMs: 30_000 }, async (message, ctx) => {
    await writeLedger(ctx.transaction, ledger, message.key);
    if (message.key.endsWith(config.targetSuffix)) {
      await pool.query(`INSERT INTO ${config.schema}.markers (name) VALUES ('inserted')`);
      await new Promise(() => undefined); // hangs until SIGKILL
    }
    return ack({ booked: message.key });
  });
  await consumer.start();
}

main().catch((error: unknown) => {
  process.stderr.write(`kafka-chunk-child failed: ${String(error)}\n`);
  process.exit(1);
});
