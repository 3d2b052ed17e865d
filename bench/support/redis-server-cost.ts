/**
 * What a Redis server spent, read from `INFO cpu` and `INFO commandstats` before and after a
 * measured span. Shared by the benchmarks that report Redis server µs per key or per message.
 *
 * - `cpuUs`: the server process's CPU time (`used_cpu_user + used_cpu_sys`), µs: command
 *   execution plus reading, parsing and writing replies; everything the server did in the span.
 * - `commandUs`: time inside the commands the clients sent, µs, without the network I/O: the
 *   `usec` of `EVALSHA` and `EVAL` when the span ran scripts (a script's time includes the
 *   commands it calls, which commandstats also lists on their own lines, so those are left out),
 *   else the sum over every command. `INFO` itself is left out.
 * - `calls`: the commands the clients sent, counted the same way (a script call counts once).
 *
 * `cpuUs` includes the two `INFO` calls that take the samples (a few µs per span). On a server that
 * other processes use at the same time the figures include their work too: run on a private
 * server (bench/report.ts starts one) for a clean figure.
 * https://redis.io/docs/latest/commands/info/
 */
import type { Redis } from 'ioredis';

export interface RedisServerSample {
  readonly cpuUs: number;
  readonly commandUs: number;
  readonly calls: number;
}

/** A raw sample: CPU time and each command's counters. */
export interface RedisServerCounters {
  readonly cpuUs: number;
  readonly commands: ReadonlyMap<string, { readonly calls: number; readonly usec: number }>;
}

const SCRIPT_COMMANDS = new Set(['evalsha', 'eval', 'evalsha_ro', 'eval_ro', 'fcall', 'fcall_ro']);

/** Reads the server's counters now. */
export async function sampleRedisServer(redis: Redis): Promise<RedisServerCounters> {
  const text = await redis.info('all');
  const num = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(text)?.[1] ?? NaN);
  const commands = new Map<string, { calls: number; usec: number }>();
  for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    commands.set(match[1]!.toLowerCase(), { calls: Number(match[2]), usec: Number(match[3]) });
  }
  return { cpuUs: Math.round((num('used_cpu_user') + num('used_cpu_sys')) * 1e6), commands };
}

/** What the server did from `before` to `after` (see the module's docstring). */
export function serverDelta(before: RedisServerCounters, after: RedisServerCounters): RedisServerSample {
  const grown: Array<[string, { calls: number; usec: number }]> = [];
  for (const [name, now] of after.commands) {
    if (name === 'info') continue;
    const then = before.commands.get(name) ?? { calls: 0, usec: 0 };
    if (now.calls > then.calls) grown.push([name, { calls: now.calls - then.calls, usec: now.usec - then.usec }]);
  }
  const scripts = grown.filter(([name]) => SCRIPT_COMMANDS.has(name));
  const counted = scripts.length > 0 ? scripts : grown;
  return {
    cpuUs: after.cpuUs - before.cpuUs,
    commandUs: counted.reduce((sum, [, c]) => sum + c.usec, 0),
    calls: counted.reduce((sum, [, c]) => sum + c.calls, 0),
  };
}
