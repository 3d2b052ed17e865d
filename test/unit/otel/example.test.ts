/**
 * examples/otel runs without services and shows what docs/otel.md promises: every process span a
 * child of the producer span, the duplicate without a handler span, the poison message in ERROR.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

it('examples/otel runs on the in-process broker and prints the expected trace outline', () => {
  const root = join(__dirname, '..', '..', '..');
  const run = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', join('examples', 'otel', 'main.ts')], { cwd: root, encoding: 'utf8', timeout: 50_000 });
  expect(run.status).toBe(0);
  const outline = run.stdout.slice(run.stdout.indexOf('trace outline:'));
  expect(outline).toContain('send orders\n  process orders [committed]\n    claim orders\n    charge card\n    commit orders [committed]\n    ack orders');
  expect(outline).toMatch(/ {2}process orders \[rejected\] ERROR\(dead-lettered \(permanent_error\): order o-3 has no card on file\)/);
  expect(outline).toContain('process orders [done_duplicate]\n  claim orders\n  ack orders');
  expect(outline).toContain('charged: o-1, o-2 (each once); dead-lettered: 1');
}, 60_000);
