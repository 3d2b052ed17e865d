/**
 * Serves the payments route on http://127.0.0.1:3000 until SIGINT/SIGTERM.
 *
 *   npx ts-node --transpile-only examples/http-idempotency/main.ts            # PostgreSQL inbox (transactional)
 *   CLAIMS=redis npx ts-node --transpile-only examples/http-idempotency/main.ts
 *
 * PostgreSQL from $TWOPHASE_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres),
 * Redis from $TWOPHASE_REDIS_URL. See README.md beside this file.
 */
import { Redis } from 'ioredis';
import { Pool } from 'pg';
import type { Claimer } from '../../src';
import { migrate, PostgresClaimer } from '../../adapters/postgres';
import { RedisClaimer } from '../../adapters/redis';
import { serviceSettings } from '../shared/env';
import { createPaymentsApp, createPaymentsTable } from './app';

async function main(): Promise<void> {
  const pool = new Pool({ connectionString: process.env.TWOPHASE_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' });
  const table = 'public.http_example_payments';
  await createPaymentsTable(pool, table);
  let redis: Redis | undefined;
  let claimer: Claimer;
  if (process.env.CLAIMS === 'redis') {
    redis = new Redis(serviceSettings().redisUrl);
    claimer = new RedisClaimer({ redis }, { prefix: 'http-example' });
  } else {
    await migrate(pool);
    claimer = new PostgresClaimer({ pool }, { mode: 'transactional' });
  }
  await claimer.ready?.();
  const server = createPaymentsApp({ claimer, pool, table }).listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
    process.stdout.write(`POST http://127.0.0.1:${process.env.PORT ?? 3000}/payments (claims in ${process.env.CLAIMS === 'redis' ? 'Redis' : 'PostgreSQL'}); Ctrl-C to stop\n`);
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      server.close(() => {
        void Promise.all([pool.end(), redis?.quit()]).then(() => process.stdout.write('stopped\n'));
      });
    });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`payments API failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1); // not exitCode: a client opened before the failure would keep the process alive
});
