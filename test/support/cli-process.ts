/**
 * Runs the `twophase` CLI (adapters/cli/bin.ts through ts-node) in a child process, the way a
 * user's shell runs it, optionally with some packages made unresolvable
 * (test/support/block-modules.js), as in a project that did not install those optional peers.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');

/** The CLI's entry point, and the node arguments that run it from source. */
export const CLI_BIN = join(ROOT, 'adapters', 'cli', 'bin.ts');

/** How {@link runCliProcess} runs the CLI. */
export interface CliProcessOptions {
  /** Packages that fail to resolve in the child (`require('kafkajs')` throws MODULE_NOT_FOUND). */
  readonly blocked?: readonly string[];
  /** Extra environment variables. */
  readonly env?: Readonly<Record<string, string>>;
  /** Kills the child (SIGKILL) after this many ms. Default 60 000. */
  readonly timeoutMs?: number;
}

/** What the child did. `code` is null when it was killed by a signal. */
export interface CliProcessResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The node arguments that run the CLI from source with `blocked` packages unresolvable. */
export function cliNodeArgs(args: readonly string[], blocked: readonly string[] = []): { argv: string[]; env: NodeJS.ProcessEnv } {
  return {
    argv: ['-r', join(__dirname, 'block-modules.js'), '-r', 'ts-node/register/transpile-only', CLI_BIN, ...args],
    env: { ...process.env, TS_NODE_PROJECT: join(ROOT, 'tsconfig.json'), TWOPHASE_TEST_BLOCKED_MODULES: blocked.join(',') },
  };
}

/** Runs `twophase <args>` to its end and resolves with its exit code and output. */
export function runCliProcess(args: readonly string[], options: CliProcessOptions = {}): Promise<CliProcessResult> {
  const { argv, env } = cliNodeArgs(args, options.blocked);
  const child = spawn(process.execPath, argv, { cwd: ROOT, env: { ...env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}
