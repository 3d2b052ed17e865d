/**
 * A user's first run, in a child process with every default: one info line per consumer at start
 * (source, queue, claimer kind, concurrency) on stderr, and health() counting what the consumer
 * did (commits, duplicates skipped, retries, busy requeues) without an OTel SDK.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');

test('with the default logger a consumer logs one start line, and health() counts commits, duplicates and retries', () => {
  const run = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, 'fixtures', 'start-line-consumer.ts')], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  expect(run.status).toBe(0);
  const lines = run.stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  const started = lines.filter((l) => l.msg === 'twophase: consumer started');
  expect(started).toHaveLength(1);
  expect(started[0]).toMatchObject({ level: 'info', consumer: 'orders', source: 'memory', destination: 'orders.q', claimer: 'in_memory', concurrency: 3 });
  const health = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
  expect(health).toMatchObject({ commits: 2, duplicatesSkipped: 1, retries: 1, busyRequeues: 0 });
});
