/**
 * Runs a per-minute "send invoices" job on a 2-second timer until SIGINT/SIGTERM. Start it in
 * two terminals: each minute's run happens in one of them only.
 *
 *   npx ts-node --transpile-only examples/job-runner/main.ts
 *
 * Claims in Redis ($TWOPHASE_REDIS_URL, default redis://127.0.0.1:6379). See README.md beside this file.
 */
import { Redis } from 'ioredis';
import { consoleInfoLogger } from '../../src';
import { RedisClaimer } from '../../adapters/redis';
import { serviceSettings } from '../shared/env';
import { type Job, JobRunner } from './job-runner';

const sendInvoices: Job<{ invoices: number }> = {
  name: 'send-invoices',
  periodOf: (now) => now.toISOString().slice(0, 16), // one run per UTC minute: 2026-12-01T18:05
  leaseTtlMs: 30_000,
  doneTtlMs: 24 * 60 * 60 * 1000,
  run: async ({ key, fencingToken }) => {
    process.stdout.write(`sending invoices (${key}, fencing token ${fencingToken})\n`);
    return { invoices: 3 };
  },
};

const redis = new Redis(serviceSettings().redisUrl);
const runner = new JobRunner(new RedisClaimer({ redis }, { prefix: 'job-runner-example' }), consoleInfoLogger);
const timer = setInterval(() => {
  void runner.tick(sendInvoices).then((t) => process.stdout.write(`${t.runId}: ${t.outcome}\n`));
}, 2000);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    clearInterval(timer);
    void redis.quit();
  });
}
