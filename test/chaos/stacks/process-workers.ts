/**
 * Worker processes of a broker stack: spawn, replace after a kill, arm faults, SIGKILL, graceful
 * stop, and the fault executor shared by the RabbitMQ and Kafka stacks (the claim store's faults
 * included: the private redis-server's outages, PostgreSQL sessions ended mid-transaction).
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Pool } from 'pg';
import type { GatedClaimerStats } from '../../../adapters/gated';
import { redisCli } from '../../integration/redis/support/redis-process';
import type { ArmedFault } from '../chaos-consumer';
import { logFault } from '../ledger';
import type { FromWorker, RelayFault, RelayWorkerConfig, ToWorker, WorkerConfig } from '../protocol';
import type { ScheduledFault } from '../schedule';
import type { ClaimStore } from './claim-store';
import { forkTs, logDir, logFaultLine } from './stack';

interface LiveWorker {
  readonly id: string;
  readonly child: ChildProcess;
  ready: boolean;
  inFlight: number;
  consuming: boolean;
  stopping: boolean;
}

const ARMED: ReadonlySet<string> = new Set(['kill_before_effect', 'kill_after_effect', 'kill_after_commit', 'overrun', 'kill_after_claim', 'kill_before_confirm', 'kill_after_confirm']);

export class WorkerPool {
  private readonly workers = new Map<string, LiveWorker>();
  readonly killed: string[] = [];
  /** The last GatedClaimer counters each worker reported, killed and stopped workers included. */
  private readonly gateStats = new Map<string, GatedClaimerStats>();
  private next = 0;
  private closing = false;
  /** Desired number of workers (group_join raises it, group_leave keeps it: a replacement joins). */
  target: number;

  /** @param entry the worker script: a consumer (worker.ts, the default) or an outbox relay (relay-worker.ts) */
  constructor(
    private readonly base: Omit<WorkerConfig, 'workerId'> | Omit<RelayWorkerConfig, 'workerId'>,
    initial: number,
    private readonly restartDelayMs: number,
    private readonly prefix: string,
    private readonly entry = join(__dirname, '..', 'worker.ts'),
  ) {
    this.target = initial;
  }

  get live(): LiveWorker[] {
    return [...this.workers.values()].filter((w) => !w.stopping);
  }

  /** Starts workers up to the target and waits until each reports ready (or gives up). */
  async fill(): Promise<void> {
    const starting: Promise<void>[] = [];
    while (this.live.length < this.target) starting.push(this.spawn());
    await Promise.all(starting);
  }

  private spawn(): Promise<void> {
    const id = `${this.prefix}${++this.next}`;
    const config = { ...this.base, workerId: id };
    const child = forkTs(this.entry, [JSON.stringify(config)], this.base.runId, id);
    const worker: LiveWorker = { id, child, ready: false, inFlight: 0, consuming: false, stopping: false };
    this.workers.set(id, worker);
    const ready = new Promise<void>((resolve) => {
      child.on('message', (m: FromWorker) => {
        if (m.t === 'ready') {
          worker.ready = true;
          resolve();
        } else if (m.t === 'stats') {
          worker.inFlight = m.inFlight;
          worker.consuming = m.consuming;
          if (m.gate) this.gateStats.set(id, m.gate);
        }
      });
      child.on('exit', (code, signal) => {
        resolve();
        this.workers.delete(id);
        if (signal === 'SIGKILL') this.killed.push(id);
        if (!this.closing && !worker.stopping) {
          if (signal !== 'SIGKILL') process.stdout.write(`  worker ${id} exited (${code ?? signal}); replacing it\n`);
          setTimeout(() => void this.fill(), this.restartDelayMs);
        }
      });
    });
    return ready;
  }

  /**
   * The gate counters summed over every worker of the run (up to each one's last report, 250 ms
   * apart), or undefined when no worker had a gate.
   */
  gateTotals(): GatedClaimerStats | undefined {
    if (this.gateStats.size === 0) return undefined;
    const total: GatedClaimerStats = { gateAnswers: 0, truthClaims: 0, repopulated: 0, fallbackClaims: 0, conflictChecks: 0, gateFailures: 0 };
    for (const s of this.gateStats.values()) for (const k of Object.keys(total) as (keyof GatedClaimerStats)[]) total[k] += s[k];
    return total;
  }

  /** Each live worker's state, for a run that did not drain. */
  describe(): string {
    return this.live.map((w) => `${w.id} ready=${w.ready} consuming=${w.consuming} inFlight=${w.inFlight}`).join('; ') || 'none live';
  }

  /**
   * The last `lines` lines of each live worker's log (each cut to 400 characters), for a run that
   * did not drain: CI keeps the harness's output, not the log files.
   */
  logTails(lines: number): string[] {
    const out: string[] = [];
    for (const w of this.live) {
      let text = '';
      try {
        text = readFileSync(join(logDir(this.base.runId), `${w.id}.log`), 'utf8');
      } catch {
        continue;
      }
      for (const line of text.trimEnd().split('\n').slice(-lines)) if (line) out.push(`${w.id}: ${line.slice(0, 400)}`);
    }
    return out;
  }

  /** True when every live worker is ready and idle. */
  idle(): boolean {
    const live = this.live;
    return live.length > 0 && live.every((w) => w.ready && w.inFlight === 0);
  }

  send(worker: LiveWorker, message: ToWorker): void {
    // A worker may die between the check and the write (an outbox relay SIGKILLs itself): the
    // callback takes the EPIPE instead of an unhandled 'error' event.
    if (worker.child.connected) worker.child.send(message, () => undefined);
  }

  /** Picks a live, ready worker by `pick` in [0, 1); busy ones first when `preferBusy`. */
  choose(pick: number, preferBusy = false): LiveWorker | undefined {
    let candidates = this.live.filter((w) => w.ready);
    if (preferBusy && candidates.some((w) => w.inFlight > 0)) candidates = candidates.filter((w) => w.inFlight > 0);
    return candidates.length > 0 ? candidates[Math.floor(pick * candidates.length)] : undefined;
  }

  /** Graceful stop of one worker (a consumer leaving the group). */
  async leave(worker: LiveWorker): Promise<void> {
    worker.stopping = true;
    this.send(worker, { t: 'stop' });
    await this.waitExit(worker, 15_000);
  }

  /** Stops every worker gracefully (SIGKILL after `timeoutMs`). */
  async close(timeoutMs = 15_000): Promise<void> {
    this.closing = true;
    await Promise.all(
      [...this.workers.values()].map(async (w) => {
        w.stopping = true;
        this.send(w, { t: 'stop' });
        await this.waitExit(w, timeoutMs);
      }),
    );
  }

  private async waitExit(worker: LiveWorker, timeoutMs: number): Promise<void> {
    if (worker.child.exitCode !== null || worker.child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        worker.child.kill('SIGKILL');
      }, timeoutMs);
      worker.child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}

/** What the fault executor needs from a stack. */
export interface FaultTargets {
  readonly pool: WorkerPool;
  readonly store: ClaimStore;
  readonly ledger: Pool;
  readonly runId: string;
  readonly startedAt: number;
  /** The broker closes the connections of `workerId` (RabbitMQ). */
  closeConnections?(workerId: string): Promise<string>;
}

/** Injects one scheduled fault and logs it (stdout and `chaos_faults`). */
export async function injectFault(f: ScheduledFault, t: FaultTargets): Promise<void> {
  const elapsed = () => Date.now() - t.startedAt;
  const log = async (kind: string, target: string, detail?: string) => {
    logFaultLine(elapsed(), kind, target, detail);
    await logFault(t.ledger, t.runId, elapsed(), kind, target, detail);
  };
  if (ARMED.has(f.kind)) {
    const w = t.pool.choose(f.pick, true);
    if (!w) return;
    t.pool.send(w, { t: 'arm', fault: f.kind as ArmedFault | RelayFault });
    await log(`arm:${f.kind}`, w.id);
    return;
  }
  switch (f.kind) {
    case 'kill': {
      const w = t.pool.choose(f.pick, true);
      if (!w) return;
      await log('kill', w.id, `SIGKILL with ${w.inFlight} in flight`);
      w.child.kill('SIGKILL');
      return;
    }
    case 'close_connections': {
      const w = t.pool.choose(f.pick);
      if (!w || !t.closeConnections) return;
      const closed = await t.closeConnections(w.id);
      await log('close_connections', w.id, closed);
      return;
    }
    case 'redis_stop': {
      const redis = t.store.redis;
      if (!redis) return;
      await log('redis_stop', `redis-server :${redis.port}`, `down for ${f.durationMs} ms`);
      await redis.stop();
      await new Promise((resolve) => setTimeout(resolve, f.durationMs));
      await redis.startAgain();
      await log('redis_restart', `redis-server :${redis.port}`);
      return;
    }
    case 'redis_pause': {
      const redis = t.store.redis;
      if (!redis) return;
      await log('redis_pause', `redis-server :${redis.port}`, `CLIENT PAUSE ${f.durationMs} ALL`);
      await redisCli(redis.port, 'CLIENT', 'PAUSE', String(f.durationMs), 'ALL').catch(() => undefined);
      return;
    }
    case 'redis_flush': {
      const redis = t.store.redis;
      if (!redis) return;
      // The run's PRIVATE server only (its port comes from the claim store), never the shared one.
      const reply = await redisCli(redis.port, 'FLUSHALL').catch((error: unknown) => `failed: ${String(error)}`);
      await log('redis_flush', `redis-server :${redis.port}`, `FLUSHALL: ${reply.trim()}`);
      return;
    }
    case 'pg_terminate': {
      const w = t.pool.choose(f.pick, true);
      if (!w || !t.store.terminateSession) return;
      const done = await t.store.terminateSession(w.id);
      // Counted as fired only when a session in a transaction was found and ended.
      await log(done.ended ? 'pg_terminate' : 'pg_terminate_missed', w.id, done.detail);
      return;
    }
    case 'group_leave': {
      const w = t.pool.choose(f.pick);
      if (!w || t.pool.live.length < 2) return;
      await log('group_leave', w.id, 'graceful stop; a replacement joins');
      await t.pool.leave(w);
      await t.pool.fill();
      return;
    }
    case 'group_join': {
      t.pool.target++;
      await log('group_join', 'group', `workers → ${t.pool.target}`);
      await t.pool.fill();
      return;
    }
    default:
      return;
  }
}
