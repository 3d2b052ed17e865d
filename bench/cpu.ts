/**
 * CPU counters read from Linux's /proc, for benchmarks that report where the CPU of a message
 * went besides this process: the PostgreSQL server's and the whole machine's.
 *
 * - `postgresServerCpuUs(port)`: user + system CPU, µs, of a local PostgreSQL server's postmaster
 *   and every process whose parent it is (backends, WAL writer, checkpointer, …). The server is
 *   found by its data directory (`-D` in the postmaster's command line) whose `postmaster.pid`
 *   names `port` on its fourth line. A backend that exits between two readings takes its CPU with
 *   it, so read it around work done on pooled connections that stay open. `undefined` when no
 *   local server listens on `port` (a remote server, or not Linux).
 * - `machineCpuUs()`: non-idle CPU of every core since boot, µs (`/proc/stat`'s first line, all
 *   fields but idle and iowait), so a difference over a run counts this process, the servers,
 *   the brokers and anything else on the machine.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Kernel clock ticks per second of /proc's CPU fields (USER_HZ; 100 on Linux's common builds). */
const TICK_US = 1_000_000 / 100;

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** `[ppid, utime + stime in ticks]` of one process, from /proc/<pid>/stat. */
function stat(pid: number): [number, number] | undefined {
  const text = read(`/proc/${pid}/stat`);
  if (text === undefined) return undefined;
  // The command name (field 2) may hold spaces: the fields after its closing parenthesis.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return [Number(fields[1]), Number(fields[11]) + Number(fields[12])];
}

function postmasterOf(port: number): number | undefined {
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const cmdline = read(`/proc/${pid}/cmdline`)?.split('\0');
    if (!cmdline || !cmdline[0]?.endsWith('/postgres')) continue;
    const d = cmdline.indexOf('-D');
    if (d < 0) continue;
    const lines = read(`${cmdline[d + 1]}/postmaster.pid`)?.split('\n');
    if (lines && Number(lines[0]) === pid && Number(lines[3]) === port) return pid;
  }
  return undefined;
}

const postmasters = new Map<number, number | undefined>();

export function postgresServerCpuUs(port: number): number | undefined {
  if (!postmasters.has(port)) postmasters.set(port, postmasterOf(port));
  const postmaster = postmasters.get(port);
  if (postmaster === undefined) return undefined;
  let ticks = 0;
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const s = stat(pid);
    if (s && (pid === postmaster || s[0] === postmaster)) ticks += s[1];
  }
  return ticks * TICK_US;
}

export function machineCpuUs(): number {
  const fields = (read('/proc/stat') ?? '').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal: all but idle (3) and iowait (4).
  const busy = fields.slice(0, 8).reduce((sum, x, i) => (i === 3 || i === 4 ? sum : sum + x), 0);
  return busy * TICK_US;
}
