/**
 * The @platformatic/kafka binding's pure parts: the Node version gate (an error naming the Node
 * version, before the package is loaded) and the header conversion both ways (repeated names,
 * binary values).
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ConfigurationError } from '../../src';
import { headersFromEntries, headersToMap, checkPlatformaticRuntime, nodeSupportsPlatformatic } from '../../adapters/kafka/platformatic-client';

const ROOT = join(__dirname, '..', '..');

/** Runs `code` in a child Node (ts-node) where the packages in `blocked` cannot be resolved. */
function runWithout(blocked: string[], code: string): { status: number | null; stdout: string; stderr: string } {
  const child = spawnSync(process.execPath, ['-r', join(ROOT, 'test', 'support', 'block-modules.js'), '-r', 'ts-node/register/transpile-only', '-e', code], {
    cwd: ROOT,
    env: { ...process.env, TWOPHASE_TEST_BLOCKED_MODULES: blocked.join(',') },
    encoding: 'utf8',
    timeout: 120_000,
  });
  return { status: child.status, stdout: child.stdout, stderr: child.stderr };
}

/** Runs where @platformatic/kafka can; elsewhere skipped, except under CI when no Node 24 step follows (then it fails). */
const onSupportedNode = nodeSupportsPlatformatic(process.version) || (process.env.CI && process.env.TWOPHASE_PLATFORMATIC_ON_NODE24 !== '1') ? test : test.skip;

describe('@platformatic/kafka binding', () => {
  test('importing twophase/kafka loads neither kafkajs nor @platformatic/kafka (it only checks that one of them is installed)', () => {
    const loaded = "Object.keys(require.cache).filter((f) => /node_modules[\\\\/](kafkajs|@platformatic[\\\\/]kafka)[\\\\/]/.test(f)).length";
    const run = runWithout([], `const k = require('./adapters/kafka'); console.log(typeof k.KafkaSource, typeof k.platformaticClient, typeof k.kafkajsLogCreator(console), ${loaded})`);
    expect(run).toMatchObject({ status: 0, stdout: 'function function function 0\n' });
    // With @platformatic/kafka alone (no kafkajs), the entry point loads.
    expect(runWithout(['kafkajs'], "const k = require('./adapters/kafka'); console.log(typeof k.KafkaSource)")).toMatchObject({ status: 0, stdout: 'function\n' });
  }, 120_000);

  onSupportedNode('platformaticClient() without @platformatic/kafka installed fails with an error naming the package', () => {
    const run = runWithout(['@platformatic/kafka'], "try { require('./adapters/kafka').platformaticClient({ clientId: 'x', bootstrapBrokers: ['127.0.0.1:9092'] }); } catch (e) { console.log(e.name + ': ' + e.message); }");
    expect(run.stdout).toBe('ConfigurationError: @platformatic/kafka is not installed: run `npm install @platformatic/kafka` (an optional peer dependency of twophase/kafka)\n');
  }, 120_000);

  test('the Node gate follows the package engines (>= 22.22.0 || >= 24.6.0)', () => {
    expect(['v20.20.2', 'v22.21.9', 'v24.5.0'].map(nodeSupportsPlatformatic)).toEqual([false, false, false]);
    expect(['v22.22.0', 'v23.1.0', 'v24.6.0', 'v25.0.0'].map(nodeSupportsPlatformatic)).toEqual([true, true, true, true]);
  });

  test('loading on an unsupported Node fails with an error naming the Node version and the package', () => {
    expect(() => checkPlatformaticRuntime('v20.20.2')).toThrow(ConfigurationError);
    expect(() => checkPlatformaticRuntime('v20.20.2')).toThrow(/@platformatic\/kafka needs Node >= 22\.22\.0 \|\| >= 24\.6\.0; this process runs Node v20\.20\.2/);
  });

  test('headers: repeated names become arrays, binary values stay bytes, and go back as one entry per occurrence', () => {
    const binary = Buffer.from([0x00, 0xff, 0x80]);
    const entries: Array<[Buffer, Buffer]> = [
      [Buffer.from('x-repeated'), Buffer.from('first')],
      [Buffer.from('x-binary'), binary],
      [Buffer.from('x-repeated'), Buffer.from('second')],
    ];
    const headers = headersFromEntries(entries);
    expect(Object.keys(headers)).toEqual(['x-repeated', 'x-binary']);
    expect((headers['x-repeated'] as Buffer[]).map((b) => b.toString())).toEqual(['first', 'second']);
    expect((headers['x-binary'] as Buffer).equals(binary)).toBe(true);
    const back = [...headersToMap({ ...headers, 'x-text': 'plain', 'x-none': undefined })!];
    expect(back.map(([k, v]) => [k.toString(), v.toString('hex')])).toEqual([
      ['x-repeated', Buffer.from('first').toString('hex')],
      ['x-repeated', Buffer.from('second').toString('hex')],
      ['x-binary', '00ff80'],
      ['x-text', Buffer.from('plain').toString('hex')],
    ]);
  });
});
