/**
 * What a stack driver reports after one scenario: what was published, what was injected, what
 * ended in the dead-letter queue, and whether the run drained.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import type { GatedClaimerStats } from '../../../adapters/gated';
import type { FaultKind } from '../schedule';

export interface StackResult {
  /** Messages published, duplicates included. */
  readonly published: number;
  /** Every unique key published. */
  readonly uniqueKeys: readonly string[];
  /** Poison keys (must be dead-lettered, never applied). */
  readonly poison: readonly string[];
  readonly duplicatesInjected: number;
  /** Workers that were killed (SIGKILL or simulated crash). */
  readonly killedWorkers: readonly string[];
  readonly faults: Readonly<Partial<Record<FaultKind, number>>>;
  readonly deadLetters: readonly { readonly key: string; readonly reason: string }[];
  /** False when the queue still held messages at the drain deadline. */
  readonly drained: boolean;
  readonly elapsedMs: number;
  /** The GatedClaimer counters summed over the run's workers (gated stores only). */
  readonly gate?: GatedClaimerStats;
  /** What only an outbox stack finds: phantoms, order at the consumer, rows left (stacks/outbox.ts). */
  readonly outbox?: import('./outbox').OutboxFindings;
}

/** Directory of one run's worker logs: .tmp/chaos/<runId>. */
export function logDir(runId: string): string {
  const dir = join(__dirname, '..', '..', '..', '.tmp', 'chaos', runId);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/**
 * Forks a TypeScript entry point with ts-node (transpile only). Its stderr goes to
 * `<logDir>/<name>.log`; its stdout too, or to this process's stdout with `forwardStdout`.
 */
export function forkTs(entry: string, args: readonly string[], runId: string, name: string, forwardStdout = false): ChildProcess {
  const log = openSync(join(logDir(runId), `${name}.log`), 'a');
  return fork(entry, [...args], {
    execArgv: ['-r', 'ts-node/register/transpile-only'],
    stdio: ['ignore', forwardStdout ? 'inherit' : log, log, 'ipc'],
    env: { ...process.env, TS_NODE_TRANSPILE_ONLY: 'true' },
  });
}

/** Prints one line about a fault, with its time and target. */
export function logFaultLine(elapsedMs: number, kind: string, target: string, detail?: string): void {
  process.stdout.write(`  [${(elapsedMs / 1000).toFixed(1)} s] ${kind} → ${target}${detail ? ` (${detail})` : ''}\n`);
}
