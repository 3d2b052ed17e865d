/**
 * Bytes per done key of the Redis claimer, for the retention sizing formula in docs/redis.md.
 *
 * Starts a private redis-server on a free loopback port (so nothing else moves `used_memory`),
 * claims and commits N keys per shape (no result, small and larger results, a fingerprint), and
 * reports for each: the `used_memory` growth per key (what capacity planning needs: the key, its
 * value, the keyspace and expires dictionary entries), and `MEMORY USAGE` of one key (key and value
 * only). Written to bench/results/redis-memory.json.
 *
 *   npx ts-node --transpile-only bench/redis/memory.ts [--keys 50000]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Redis from 'ioredis';
import { RedisClaimer, recordKey } from '../../adapters/redis';
import { RedisServerProcess } from '../../test/integration/redis/support/redis-process';

const silent = { warn: () => undefined, error: () => undefined, info: () => undefined, debug: () => undefined };

interface Shape {
  name: string;
  result?: unknown;
  fingerprint?: string;
}

const shapes: Shape[] = [
  { name: 'no result' },
  { name: '25-byte result', result: { status: 'ok', id: 12345 } },
  { name: '200-byte result', result: { reply: 'x'.repeat(186) } },
  { name: 'no result, 64-char fingerprint', fingerprint: 'f'.repeat(64) },
];

async function usedMemory(client: Redis): Promise<number> {
  const info = await client.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)![1]);
}

async function main(): Promise<void> {
  const i = process.argv.indexOf('--keys');
  const n = i >= 0 ? Number(process.argv[i + 1]) : 50_000;
  const server = await RedisServerProcess.start();
  const client = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true, maxRetriesPerRequest: 1 });
  await client.connect();
  const rows: Array<Record<string, unknown>> = [];
  try {
    for (const [s, shape] of shapes.entries()) {
      await client.flushall();
      const prefix = `twophase`;
      // Typical business key: namespace + message id, 32 bytes.
      const key = (k: number) => `billing:order-${String(k).padStart(10, '0')}-${s}xxxxx`;
      const claimer = new RedisClaimer({ redis: client, logger: silent }, { prefix });
      await claimer.ready();
      const before = await usedMemory(client);
      const options = { leaseTtlMs: 30_000, doneTtlMs: 86_400_000, fingerprint: shape.fingerprint };
      for (let b = 0; b < n; b += 500) {
        const entries = await claimer.claimMany(Array.from({ length: Math.min(500, n - b) }, (_, j) => ({ key: key(b + j), options })));
        await Promise.all(
          entries.map((e) => (e.ok && e.result.state === 'acquired' ? e.result.receipt.commit(shape.result as never) : Promise.reject(new Error('not acquired')))),
        );
      }
      const after = await usedMemory(client);
      const sampleKey = recordKey(prefix, key(0));
      const usage = (await client.memory('USAGE', sampleKey)) as number;
      const value = (await client.get(sampleKey))!;
      rows.push({
        shape: shape.name,
        keys: n,
        redisKeyBytes: Buffer.byteLength(sampleKey),
        valueBytes: Buffer.byteLength(value),
        usedMemoryPerKey: Math.round((after - before) / n),
        memoryUsageOfOneKey: usage,
      });
      await claimer.close();
    }
  } finally {
    client.disconnect();
    await server.destroy();
  }
  console.table(rows);
  const out = join(__dirname, '..', 'results', 'redis-memory.json');
  mkdirSync(join(out, '..'), { recursive: true });
  writeFileSync(out, `${JSON.stringify({ benchmark: 'bench/redis/memory.ts', date: new Date().toISOString(), node: process.version, rows }, null, 2)}\n`);
  console.log(`written to ${out}`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
