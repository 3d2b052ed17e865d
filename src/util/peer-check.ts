/**
 * The client libraries twophase's adapters use are the application's optional peer dependencies
 * (package.json `peerDependencies`, all optional). npm does not install an optional peer, and
 * refuses (ERESOLVE) one outside the range unless forced (`--legacy-peer-deps`, `--force`), so
 * an adapter checks for itself: a missing client fails its entry point with an error naming the
 * package, and one outside the supported range gets a warning naming the range, once per process.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { MissingPeerDependencyError } from './errors';
import type { Logger } from './logger';

/**
 * Throws when `peer` (or any of `peers`) cannot be resolved from twophase's own location; every
 * missing one is named in the one error.
 * @param entry the entry point that needs it, for the message (`twophase/kafka`)
 * @throws MissingPeerDependencyError naming the packages and `npm install <peers>`
 */
export function requirePeer(peers: string | readonly string[], entry: string): void {
  const missing: string[] = [];
  let cause: unknown;
  for (const peer of typeof peers === 'string' ? [peers] : peers) {
    try {
      require.resolve(peer);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'MODULE_NOT_FOUND') throw error;
      missing.push(peer);
      cause ??= error;
    }
  }
  if (missing.length > 0) throw new MissingPeerDependencyError(missing, entry, { cause });
}

/** The installed version of `peer` (its package.json, found above its main file), or undefined. */
export function installedVersion(peer: string): string | undefined {
  let dir: string;
  try {
    dir = dirname(require.resolve(peer));
  } catch {
    return undefined;
  }
  for (; dir !== dirname(dir); dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === peer) return pkg.version;
    } catch {
      // no package.json here: look higher
    }
  }
  return undefined;
}

/**
 * Whether `version` satisfies `range`: caret ranges (`^2.3.1`) joined by `||`, the only forms
 * twophase's `peerDependencies` use. A pre-release or unparsable version does not satisfy.
 */
export function satisfiesRange(version: string, range: string): boolean {
  const v = parse(version);
  if (!v) return false;
  return range.split('||').some((part) => {
    const min = parse(part.trim().replace(/^\^/, ''));
    if (!min) return false;
    if (v[0] !== min[0]) return false;
    if (min[0] === 0 && v[1] !== min[1]) return false;
    return compare(v, min) >= 0;
  });
}

const warned = new Set<string>();

/**
 * Warns once per process when the installed `peer` is outside `range` (twophase was tested
 * with the lowest and highest version of each range only).
 */
export function checkPeerVersion(peer: string, range: string, logger: Pick<Logger, 'warn'>): void {
  if (warned.has(peer)) return;
  const version = installedVersion(peer);
  if (version === undefined || satisfiesRange(version, range)) return;
  warned.add(peer);
  logger.warn({ peer, installed: version, supported: range }, `twophase: ${peer} ${version} is installed, outside the supported range ${range}; install a supported version (npm install ${peer}@"${range}")`);
}

function parse(version: string): [number, number, number] | undefined {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(version);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}

function compare(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
}
