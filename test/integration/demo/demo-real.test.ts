/**
 * The main job on real input: the demo consuming from the local RabbitMQ with the RedisClaimer,
 * with crashes at every step, reaches the same verdict as on the embedded default.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describeWithServices } from '../../support/services';

const ROOT = join(__dirname, '..', '..', '..');

function runDemo(args: string[]) {
  return spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', join(ROOT, 'examples/demo/main.ts'), '--quiet', ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 240_000,
  });
}

describeWithServices(['rabbitmq', 'redis'], 'demo on RabbitMQ + Redis', () => {
  test('publishes, crashes workers at every step, loses nothing, and attributes every duplicated effect to the documented window', () => {
    const result = runDemo(['--broker', 'rabbitmq', '--claimer', 'redis', '--messages', '3000', '--crash-rate', '0.004', '--seed', '7']);
    expect(result.stderr).not.toMatch(/Error/);
    expect(result.stdout).toMatch(/RabbitMQ \+ RedisClaimer/);
    expect(result.stdout).toMatch(/payments lost \(no effect\)\s+0\n/);
    expect(result.stdout).toMatch(/duplicated effects: any other cause\s+0\n/);
    // crashes really happened at every step
    for (const step of ['before the effect', 'after the effect, before the commit', 'after the commit, before the ack']) {
      expect(result.stdout).toMatch(new RegExp(`crashes: ${step.replace(/[()]/g, '\\$&')}\\s+[1-9]`));
    }
    expect(result.stdout).toMatch(/VERDICT: PASS/);
    expect(result.status).toBe(0);
  });
});

describe('demo on the embedded default', () => {
  test('passes with no services and exits 0', () => {
    const result = runDemo(['--messages', '2000', '--crash-rate', '0.005', '--seed', '3']);
    expect(result.stdout).toMatch(/in-process broker \+ InMemoryClaimer/);
    expect(result.stdout).toMatch(/VERDICT: PASS/);
    expect(result.status).toBe(0);
  });

  test('the verdict fails (exit 1) when duplicates are not explained: a control run where each worker keeps its own claims', () => {
    // As with an in-memory claimer on several replicas: duplicates across workers have no crash to blame.
    const result = runDemo(['--messages', '500', '--crash-rate', '0', '--duplicate-share', '0.3', '--per-worker-claims']);
    expect(result.stdout).toMatch(/duplicated effects: any other cause\s+[1-9]/);
    expect(result.stdout).toMatch(/VERDICT: FAIL/);
    expect(result.status).toBe(1);
  });
});
