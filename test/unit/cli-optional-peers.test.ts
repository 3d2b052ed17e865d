/**
 * The CLI in a service that installed only some optional peers (README: "A RabbitMQ-only service
 * installs no kafkajs"): the entry point loads no broker or store client until a command uses
 * it, so `--version` and `--help` work with none installed, and a command whose client is missing
 * exits with code 2 and one line naming the package to install and the command that needs it
 * (no stack trace). Run as a child process with the missing packages made unresolvable
 * (test/support/block-modules.js). The Redis command without kafkajs and pg is in
 * test/integration/redis/cli-without-other-peers.test.ts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { EXIT } from '../../adapters/cli';
import { importPeer, MissingPeerError, missingModuleName } from '../../adapters/cli/peer';
import { runCliProcess } from '../support/cli-process';

const ALL_PEERS = ['amqplib', 'kafkajs', '@platformatic/kafka', 'ioredis', 'pg', '@opentelemetry/api'];
/** Each case starts ts-node in a child process: a few seconds of CPU each on the shared 2-core machine. */
const CHILD_PROCESS_TEST_MS = 240_000;
const VERSION = (JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }).version;

/** One line `error: <command> needs the package "<peer>" … npm install <peer>` and no stack frame. */
function expectMissingPeer(stderr: string, command: string, peer: string): void {
  expect(stderr).toBe(
    `error: ${command} needs the package "${peer}", which is not installed (twophase declares it as an optional peer dependency). Install it in your project: npm install ${peer}\n`,
  );
}

test('--version and --help run with no broker or store client installed', async () => {
  const version = await runCliProcess(['--version'], { blocked: ALL_PEERS });
  expect(version).toMatchObject({ code: EXIT.ok, stdout: `${VERSION}\n`, stderr: '' });
  const help = await runCliProcess(['--help'], { blocked: ALL_PEERS });
  expect(help.code).toBe(EXIT.ok);
  expect(help.stdout).toMatch(/Commands:\n\s+dlq .*\n\s+postgres .*\n\s+keys /);
  expect(help.stderr).toBe('');
  const replayHelp = await runCliProcess(['dlq', 'replay', '--help'], { blocked: ALL_PEERS });
  expect(replayHelp.code).toBe(EXIT.ok);
  expect(replayHelp.stdout).toMatch(/--broker <name> +broker backend \(rabbitmq, kafka\)/);
}, CHILD_PROCESS_TEST_MS);

test('a command whose client is not installed exits 2 naming the package and the command, without a stack trace', async () => {
  const cases: [string[], string, string][] = [
    [['dlq', 'replay', 'orders.dlq', '--broker', 'kafka'], 'twophase dlq replay --broker kafka', 'kafkajs'],
    [['dlq', 'replay', 'orders.dlq'], 'twophase dlq replay --broker rabbitmq', 'amqplib'],
    [['postgres', 'migrate', '--url', 'postgres://nobody@127.0.0.1:1/none'], 'twophase postgres migrate', 'pg'],
    [['keys', 'purge', '--store', 'postgres', '--url', 'postgres://nobody@127.0.0.1:1/none'], 'twophase keys purge --store postgres', 'pg'],
    [['keys', 'diagnose', '--store', 'redis', '--key', 'k', '--url', 'redis://127.0.0.1:1'], 'twophase keys diagnose --store redis', 'ioredis'],
  ];
  for (const [args, command, peer] of cases) {
    const result = await runCliProcess(args, { blocked: ALL_PEERS });
    expect({ args, code: result.code }).toEqual({ args, code: EXIT.usage });
    expectMissingPeer(result.stderr, command, peer);
    expect(result.stdout).toBe('');
  }
}, CHILD_PROCESS_TEST_MS);

test('importPeer turns only the missing peer itself into a MissingPeerError', async () => {
  const notFound = (name: string) => Object.assign(new Error(`Cannot find module '${name}'\nRequire stack:\n- /x.js`), { code: 'MODULE_NOT_FOUND' });
  expect(missingModuleName(notFound('pg'))).toBe('pg');
  expect(missingModuleName(new Error("Cannot find module 'pg'"))).toBeUndefined();
  await expect(importPeer('pg', 'twophase postgres migrate', () => Promise.reject(notFound('pg')))).rejects.toBeInstanceOf(MissingPeerError);
  await expect(importPeer('pg', 'twophase postgres migrate', () => Promise.reject(notFound('pg/lib/client')))).rejects.toBeInstanceOf(MissingPeerError);
  // Another module missing (a broken install, a bug) is not reported as the peer.
  const other = notFound('pg-protocol');
  await expect(importPeer('pg', 'twophase postgres migrate', () => Promise.reject(other))).rejects.toBe(other);
  await expect(importPeer('pg', 'twophase postgres migrate', () => Promise.resolve(42))).resolves.toBe(42);
});
