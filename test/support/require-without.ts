/**
 * `require(entry)` in a child Node process in which the listed packages cannot be found (as in a
 * project that did not install them): test/support/block-modules.js makes them throw Node's own
 * MODULE_NOT_FOUND. `blocked`: package names, comma-separated ('' blocks nothing).
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');

export function requireWithout(entry: string, blocked: string): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, ['-r', join(ROOT, 'test', 'support', 'block-modules.js'), '-r', 'ts-node/register/transpile-only', '-e', `require(${JSON.stringify(join(ROOT, entry))})`], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, TWOPHASE_TEST_BLOCKED_MODULES: blocked },
  });
}
