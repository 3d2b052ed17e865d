/**
 * `twophase dlq replay … --json | head -2` on the real broker: the reader closes the pipe after
 * two lines, and the tool's next write to stdout fails with EPIPE. That is a stop request, as
 * SIGINT: the messages in progress finish (republish confirmed, then the DLQ copy acked), no new
 * ones are taken, the tool exits with code 1 and no stack trace, and every message is in exactly
 * one of the two queues. (Before, the unhandled EPIPE ended the process at once, and the
 * republished messages whose DLQ copies were not acked yet were in both queues.)
 */
import { spawn } from 'node:child_process';
import { HEADERS } from '../../../adapters/rabbitmq';
import { EXIT } from '../../../adapters/cli';
import { cliNodeArgs } from '../../support/cli-process';
import { describeWithServices } from '../../support/services';
import { waitFor } from '../../support/wait';
import { AMQP_URL } from './support/amqp';
import { Harness } from './support/harness';

describeWithServices(['rabbitmq'], 'twophase dlq replay with its stdout closed mid-run (real broker)', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  test('the pipe closes after two lines: the run stops after the messages in progress, exit 1, and each message is in exactly one queue', async () => {
    const queue = h.queue('replay-epipe');
    const dlq = `${queue}.dlq`;
    const target = h.queue('replay-epipe-target');
    const ch = await h.admin.ch();
    await ch.assertQueue(dlq, { durable: true });
    await ch.assertQueue(target, { durable: true });
    const n = 600;
    for (let i = 0; i < n; i++) {
      await h.admin.publish('', dlq, { i }, { messageId: `epipe-${i}`, headers: { [HEADERS.originalExchange]: '', [HEADERS.originalRoutingKey]: target, [HEADERS.reason]: 'retry_exhausted' } });
    }
    await waitFor(async () => (await h.admin.messageCount(dlq)) === n, { what: `${n} dead letters` });

    const { argv, env } = cliNodeArgs(['dlq', 'replay', dlq, '--url', AMQP_URL, '--json', '--to-queue', target]);
    const child = spawn(process.execPath, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    // `head -2`: read two lines, then close the read end of the pipe.
    let lines = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      lines += (chunk.toString().match(/\n/g) ?? []).length;
      if (lines >= 2) child.stdout.destroy();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    const { code, signal } = await exited;
    clearTimeout(timer);

    expect({ code, signal }).toEqual({ code: EXIT.failed, signal: null });
    expect(stderr).toMatch(/^stdout closed \(EPIPE\): stopping after the messages in progress; output dropped\n$/);
    // Nothing taken and not finished is left unacked: both counts are final once the tool exited.
    await waitFor(async () => (await h.admin.messageCount(dlq)) + (await h.admin.messageCount(target)) >= n, { what: 'every message counted' });
    const inDlq = (await h.admin.drain(dlq)).map((m) => String(m.properties.messageId));
    const atTarget = (await h.admin.drain(target)).map((m) => String(m.properties.messageId));
    expect(atTarget.length).toBeGreaterThan(0);
    expect(atTarget.length).toBeLessThan(n); // it really stopped mid-way
    expect(atTarget.filter((id) => inDlq.includes(id))).toEqual([]); // no message in both queues
    expect(inDlq.length + atTarget.length).toBe(n);
    expect(new Set([...inDlq, ...atTarget]).size).toBe(n);
  }, 180_000);
});
