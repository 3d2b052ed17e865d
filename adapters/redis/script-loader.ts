/**
 * Loads the claimer's Lua scripts (`lua/*.lua`, one per server-side operation) and runs them by
 * SHA, recovering from a lost script cache.
 *
 * Why not ioredis `defineCommand`: it adds methods to the caller's client (which twophase does not
 * own), and its NOSCRIPT fallback has had gaps inside pipelines (ioredis#1438, bullmq#1253). Here
 * every call is one `EVALSHA`; a `NOSCRIPT` reply — after `SCRIPT FLUSH`, a restart or a failover
 * to a node that never saw the script — is answered with one `EVAL` of the full source, which runs
 * the operation and caches the script again (https://redis.io/docs/latest/commands/evalsha/).
 * Each such reload is counted. The same holds when ioredis auto-pipelining batches the calls:
 * every command gets its own reply, and each NOSCRIPT reply is recovered on its own.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Cluster, Redis } from 'ioredis';

/** A script ready to run: its name, full source (includes inlined) and SHA1. */
export interface LoadedScript {
  readonly name: ScriptName;
  readonly source: string;
  readonly sha: string;
}

/** The server-side operations, one `lua/<name>.lua` file each. */
export type ScriptName = 'claim' | 'commit' | 'release' | 'extend' | 'peek';

const LUA_DIR = join(__dirname, 'lua');
const INCLUDE = /^--- @include "([a-z-]+)"$/gm;

/**
 * Reads `lua/<name>.lua` and inlines each `--- @include "<file>"` line with
 * `lua/includes/<file>.lua`.
 */
export function loadScript(name: ScriptName): LoadedScript {
  const raw = readFileSync(join(LUA_DIR, `${name}.lua`), 'utf8');
  const source = raw.replace(INCLUDE, (_line, include: string) => readFileSync(join(LUA_DIR, 'includes', `${include}.lua`), 'utf8'));
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}

/** Every script, loaded once per process. */
export const SCRIPTS: Readonly<Record<ScriptName, LoadedScript>> = {
  claim: loadScript('claim'),
  commit: loadScript('commit'),
  release: loadScript('release'),
  extend: loadScript('extend'),
  peek: loadScript('peek'),
};

/** True for a `NOSCRIPT` reply: the server's script cache does not hold the SHA. */
export function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * Runs `script` with `keys` and `args` on `client` (`EVALSHA`, then `EVAL` once on NOSCRIPT).
 * `onReload` is called once per NOSCRIPT recovery. Rejects with the client's or server's error.
 */
export async function runScript(
  client: Redis | Cluster,
  script: LoadedScript,
  keys: readonly string[],
  args: readonly string[],
  onReload: () => void,
): Promise<unknown> {
  try {
    return await client.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (!isNoScript(error)) throw error;
    onReload();
    return client.eval(script.source, keys.length, ...keys, ...args);
  }
}

/**
 * Loads every script into the cache of every node that runs them (each master of a Cluster), so
 * the first calls need no NOSCRIPT round trip. Not counted as a reload.
 */
export async function preloadScripts(client: Redis | Cluster): Promise<void> {
  const nodes: Redis[] = client.isCluster ? (client as Cluster).nodes('master') : [client as Redis];
  await Promise.all(nodes.flatMap((node) => Object.values(SCRIPTS).map((s) => node.script('LOAD', s.source))));
}
