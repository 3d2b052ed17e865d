/**
 * The memory stack: one child process hosting the in-process broker, InMemoryClaimer, the
 * producer and the workers (test/chaos/memory-host.ts), since an in-process broker cannot be
 * shared between processes.
 */
import { join } from 'node:path';
import type { MemoryHostConfig, MemoryHostResult } from '../memory-host';
import type { ScenarioProfile } from '../profiles';
import { forkTs, logDir, type StackResult } from './stack';

export async function runMemoryStack(runId: string, seed: number, scenario: ScenarioProfile): Promise<StackResult> {
  const config: MemoryHostConfig = { runId, seed, scenario, runStartedAt: Date.now() };
  const child = forkTs(join(__dirname, '..', 'memory-host.ts'), [JSON.stringify(config)], runId, 'memory-host', true);
  const result = await new Promise<MemoryHostResult>((resolve, reject) => {
    let got: MemoryHostResult | undefined;
    child.on('message', (m: MemoryHostResult) => {
      if (m.t === 'result') got = m;
    });
    child.on('exit', (code, signal) => (got ? resolve(got) : reject(new Error(`memory host exited (${code ?? signal}) without a result; see ${logDir(runId)}/memory-host.log`))));
  });
  return result;
}
