/**
 * `twophase dlq replay` prints keys, reasons and error texts that came from messages. In the
 * human output, control characters, ESC and bidirectional-override characters in them are shown
 * escaped: a message cannot forge lines, hide text or retitle the operator's terminal (real broker).
 */
import { HEADERS } from '../../../adapters/rabbitmq';
import { EXIT, runCli } from '../../../adapters/cli';
import { describeWithServices } from '../../support/services';
import { AMQP_URL } from './support/amqp';
import { Harness } from './support/harness';
import { waitFor } from '../../support/wait';

/** ESC, BEL, CR, LF, DEL, a C1 control (CSI), bidi overrides and isolates, the line separator. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNSAFE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

describeWithServices(['rabbitmq'], 'twophase dlq replay: message text in the human output is escaped (real broker)', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  test('keys, reasons and error texts with ESC sequences, CR/LF and bidi overrides print as visible escapes, one line per message, dry run and real run', async () => {
    const queue = h.queue('replay-tty');
    const dlq = `${queue}.dlq`;
    const target = h.queue('replay-tty-target');
    const ch = await h.admin.ch();
    await ch.assertQueue(dlq, { durable: true });
    await ch.assertQueue(target, { durable: true });
    const key = 'k\u001b]0;owned\u0007\u202eevil\rFORGED\n[9/9] replayed fake';
    await h.admin.publish('', dlq, { a: 1 }, {
      messageId: 'm\u009b2J',
      headers: { 'idempotency-key': key, [HEADERS.reason]: 'permanent_error\u001b[8m', [HEADERS.errorMessage]: 'boom\u001b[2J\u001b[H\u2066hidden\u2069\u2028next' },
    });
    await waitFor(async () => (await h.admin.messageCount(dlq)) === 1, { what: 'the dead letter' });
    for (const extra of [['--dry-run'], []]) {
      const out: string[] = [];
      const err: string[] = [];
      expect(await runCli(['dlq', 'replay', dlq, '--url', AMQP_URL, '--to-queue', target, ...extra], { io: { stdout: (t) => void out.push(t), stderr: (t) => void err.push(t) } })).toBe(EXIT.ok);
      const text = err.join('') + out.join('');
      expect(text).not.toMatch(UNSAFE);
      const line = err.join('').split('\n').find((l) => l.startsWith('[1/1]'))!;
      expect(line).toContain('k\\x1b]0;owned\\x07\\u202eevil\\rFORGED\\n[9/9] replayed fake');
      expect(line).toContain('(permanent_error\\x1b[8m)');
      if (extra.length > 0) expect(line).toContain('error: boom\\x1b[2J\\x1b[H\\u2066hidden\\u2069\\u2028next');
      // Exactly the lines the tool writes: start, the message, (stdout) the summary.
      expect(err.join('').split('\n').filter((l) => l !== '')).toHaveLength(2);
    }
    await waitFor(async () => (await h.admin.messageCount(target)) === 1, { what: 'replayed' });
  });
});
