/**
 * A consumer process for the crash test: consumes with the Redis claimer and applies each effect
 * as HINCRBY <effects> <key> 1 on the shared Redis, on the client row the parent names. The handler of `slowKey` marks that it
 * started and then hangs (before its effect) until the parent kills this process with SIGKILL.
 * Offsets are never committed before that (commit interval of ten minutes), so the kill lands in
 * the middle of uncommitted batches.
 *
 *   node -r ts-node/register/transpile-only crash-child.ts '<json config>'
 */
import Redis from 'ioredis';
import { ack } from '../../../../src';
import { RedisClaimer } from '../../../../adapters/redis';
import { clients, type ClientRow } from './clients';
import { fastSource, TestConsumer } from './kafka-helpers';

interface ChildConfig {
  readonly topic: string;
  readonly groupId: string;
  readonly prefix: string;
  readonly effects: string;
  readonly slowKey: string;
  readonly leaseTtlMs: number;
  readonly redisPort: number;
  /** The row of support/clients.ts to consume with. */
  readonly client: ClientRow['name'];
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '{}') as ChildConfig;
  const redis = new Redis({ host: '127.0.0.1', port: config.redisPort, maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined);
  const claimer = new RedisClaimer({ redis }, { prefix: config.prefix });
  const row = clients.find((r) => r.name === config.client);
  if (!row) throw new Error(`unknown client row "${config.client}"`);
  const source = fastSource(row.make('twophase-crash-child'), { topics: [config.topic], groupId: config.groupId, commitIntervalMs: 600_000 });
  const consumer = new TestConsumer({ name: config.groupId, claimer, source, leaseTtlMs: config.leaseTtlMs }, async (message) => {
    if (message.body.id === config.slowKey) {
      await redis.set(`${config.effects}:slow-started`, String(process.pid));
      await new Promise(() => undefined); // hangs until SIGKILL
    }
    await redis.hincrby(config.effects, message.key, 1);
    return ack();
  });
  await consumer.start();
  await redis.set(`${config.effects}:child-ready`, String(process.pid));
}

main().catch((error: unknown) => {
  process.stderr.write(`crash-child failed: ${String(error)}\n`);
  process.exit(1);
});
