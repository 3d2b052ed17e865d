/**
 * `twophase postgres migrate --dry-run | head -0`: the reader has closed the pipe before the first
 * line. A migrate does not stop on it (it has no messages in progress, unlike a replay): it runs
 * to its end, its output dropped, and the one stderr line says so, not the replay's wording.
 */
import { spawn } from 'node:child_process';
import { EXIT } from '../../../adapters/cli';
import { cliNodeArgs } from '../../support/cli-process';
import { describeWithServices } from '../../support/services';
import { pgUrl } from './support/pg-helpers';

describeWithServices(['postgres'], 'twophase postgres migrate with its stdout closed', () => {
  test('the line on stderr says the command runs to its end with its output dropped; exit 1 (the output is incomplete)', async () => {
    const { argv, env } = cliNodeArgs(['postgres', 'migrate', '--dry-run', '--schema', `tp_closed_${process.pid}`, '--url', pgUrl()]);
    const child = spawn(process.execPath, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy(); // closed before the child writes anything: its first write fails with EPIPE
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    clearTimeout(timer);
    expect(stderr).toBe('stdout closed (EPIPE): the command runs to its end; its output is dropped\n');
    expect(code).toBe(EXIT.failed);
  }, 90_000);
});
