/**
 * The version `twophase --version` prints: the `version` of the twophase package.json found
 * above this file (adapters/cli in the repository, dist/adapters/cli once built).
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The package version, or `unknown` when no twophase package.json is found. */
export function packageVersion(from: string = __dirname): string {
  let dir = from;
  for (;;) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const json = JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown; version?: unknown };
      if (json.name === 'twophase' && typeof json.version === 'string') return json.version;
    }
    const parent = dirname(dir);
    if (parent === dir) return 'unknown';
    dir = parent;
  }
}
