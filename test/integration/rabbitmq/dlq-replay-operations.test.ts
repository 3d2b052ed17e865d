/**
 * `twophase dlq replay` as an operations tool, on the real broker: pipelined republishes (each
 * DLQ copy acked only after its own confirm) and progress for large runs; a destination that
 * refuses the republish (a full queue with `x-overflow: reject-publish(-dlx)`) leaves exactly one
 * copy in the DLQ and names the cause; `--version`; a dry run shows each message's error text; a
 * queue that is not a dead-letter queue gets a warning; an unreachable broker is named with its
 * cause.
 */
import { readFileSync } from 'node:fs';
import amqp from 'amqplib';
import { join } from 'node:path';
import { HEADERS } from '../../../adapters/rabbitmq';
import { EXIT, RabbitMqReplayBackend, replayDeadLetters, runCli, type ReplayEvent } from '../../../adapters/cli';
import { describeWithServices } from '../../support/services';
import { AMQP_URL } from './support/amqp';
import { Harness } from './support/harness';
import { waitFor } from '../../support/wait';

function capture(): { io: { stdout: (t: string) => void; stderr: (t: string) => void }; out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { stdout: (t) => out.push(t), stderr: (t) => err.push(t) }, out, err };
}

describeWithServices(['rabbitmq'], 'twophase dlq replay: speed, refusals, operator output (real broker)', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  /** A DLQ fed by a dead-letter exchange (as twophase declares it), holding `n` dead letters routed to `target`. */
  async function deadLetters(n: number, target: string, extra: Record<string, unknown> = {}) {
    const queue = h.queue('replay-ops');
    const dlq = `${queue}.dlq`;
    const dlx = `${queue}.dlx`;
    const ch = await h.admin.ch();
    await ch.assertExchange(dlx, 'direct', { durable: true });
    await ch.assertQueue(dlq, { durable: true });
    await ch.bindQueue(dlq, dlx, queue);
    for (let i = 0; i < n; i++) {
      await h.admin.publish(dlx, queue, { i }, {
        messageId: `m-${i}`,
        headers: { 'idempotency-key': `k-${i}`, [HEADERS.originalExchange]: '', [HEADERS.originalRoutingKey]: target, [HEADERS.reason]: 'permanent_error', [HEADERS.errorMessage]: `bug ${i}: currency missing`, ...extra },
      });
    }
    await waitFor(async () => (await h.admin.messageCount(dlq)) === n, { what: `${n} dead letters` });
    return { queue, dlq, dlx };
  }

  test('many messages are replayed through a window of unconfirmed republishes: every one arrives, none stays, progress is reported', async () => {
    const target = h.queue('replay-ops-target');
    await (await h.admin.ch()).assertQueue(target, { durable: true });
    const n = 1500;
    const { dlq } = await deadLetters(n, target);
    const events: ReplayEvent[] = [];
    const summary = await replayDeadLetters(new RabbitMqReplayBackend({ url: AMQP_URL, workQueue: target }), { source: dlq, dryRun: false, window: 64, progressEveryMs: 1 }, (e) => events.push(e));
    expect(summary).toMatchObject({ replayed: n, skipped: 0, failed: 0, interrupted: false });
    expect(events.some((e) => e.type === 'progress')).toBe(true);
    expect(await h.admin.messageCount(dlq)).toBe(0);
    const ids = new Set((await h.admin.drain(target)).map((m) => String(m.properties.messageId)));
    expect(ids.size).toBe(n);

    // The human output of a large run: progress lines instead of one line per replayed message.
    const { dlq: dlq2 } = await deadLetters(1200, target);
    const { io, err } = capture();
    expect(await runCli(['dlq', 'replay', dlq2, '--url', AMQP_URL, '--window', '32', '--queue', target], { io })).toBe(EXIT.ok);
    expect(err.join('')).toMatch(/examining 1200 \(progress every 2 s; skipped and failed messages listed\)/);
    expect(err.join('')).not.toMatch(/\] replayed /);
  });

  test('a full destination queue (x-overflow reject-publish-dlx) refuses the republish: the run stops naming the cause, and the DLQ keeps exactly one copy per message, run after run', async () => {
    const { queue, dlq, dlx } = await deadLetters(3, 'placeholder');
    // The work queue, full: one message, at most one, refused publishes dead-lettered to the DLQ.
    const target = queue;
    const ch = await h.admin.ch();
    await ch.assertQueue(target, { durable: true, arguments: { 'x-max-length': 1, 'x-overflow': 'reject-publish-dlx', 'x-dead-letter-exchange': dlx, 'x-dead-letter-routing-key': queue } });
    await h.admin.publish('', target, { filler: true });
    await h.admin.drain(dlq);
    for (let i = 0; i < 3; i++) {
      await h.admin.publish(dlx, queue, { i }, { messageId: `m-${i}`, headers: { [HEADERS.originalExchange]: '', [HEADERS.originalRoutingKey]: target, [HEADERS.reason]: 'retry_exhausted' } });
    }
    await waitFor(async () => (await h.admin.messageCount(dlq)) === 3, { what: 'three dead letters' });
    for (let run = 1; run <= 2; run++) {
      const { io, err } = capture();
      expect(await runCli(['dlq', 'replay', dlq, '--url', AMQP_URL], { io })).toBe(EXIT.failed);
      expect(err.join('')).toMatch(/FAILED m-\d.*nacked by the broker: queue ".*" \(default exchange\) refused the message \(queue full/);
      expect(err.join('')).toMatch(/reject-publish-dlx\); the broker dead-lettered the refused copy back to ".*", so the original was removed and one copy remains there\. Stopped; re-run once the queue has room/);
      // Give a stray dead-lettered copy time to arrive, then count.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await h.admin.messageCount(dlq)).toBe(3);
      expect(await h.admin.messageCount(target)).toBe(1);
    }
    const left = await h.admin.drain(dlq);
    expect(left.map((m) => String(m.properties.messageId)).sort()).toEqual(['m-0', 'm-1', 'm-2']);
    // The copies the broker dead-lettered carry only the headers of what was replayed: no internal twophase-* header.
    const known: string[] = [HEADERS.originalExchange, HEADERS.originalRoutingKey, HEADERS.reason, HEADERS.replayCount, HEADERS.replayedAt];
    for (const m of left) expect(Object.keys(m.properties.headers ?? {}).filter((name) => name.startsWith('twophase-') && !known.includes(name))).toEqual([]);
  });

  test('a full destination queue (x-overflow reject-publish, no dead-lettering) refuses the republish: the original stays, one copy', async () => {
    const target = h.queue('replay-ops-full');
    const ch = await h.admin.ch();
    await ch.assertQueue(target, { durable: true, arguments: { 'x-max-length': 1, 'x-overflow': 'reject-publish' } });
    await h.admin.publish('', target, { filler: true });
    const { dlq } = await deadLetters(2, target);
    const backend = new RabbitMqReplayBackend({ url: AMQP_URL, workQueue: target, refusedCopyWaitMs: 300 });
    const events: ReplayEvent[] = [];
    await expect(replayDeadLetters(backend, { source: dlq, dryRun: false, window: 1 }, (e) => events.push(e))).rejects.toThrow(/nacked by the broker.*queue full.*left in the DLQ/);
    const done = events.find((e) => e.type === 'done');
    expect(done).toMatchObject({ summary: { replayed: 0, failed: 1, interrupted: true } });
    await waitFor(async () => (await h.admin.messageCount(dlq)) === 2, { what: 'both still in the DLQ' });
    expect(await h.admin.messageCount(target)).toBe(1);
  });

  test('--version prints the package version', async () => {
    const { io, out } = capture();
    expect(await runCli(['--version'], { io })).toBe(EXIT.ok);
    const version = (JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'package.json'), 'utf8')) as { version: string }).version;
    expect(out.join('').trim()).toBe(version);
  });

  test('a dry run shows each message\'s recorded error text (twophase header, or the broker\'s x-death reason)', async () => {
    const target = h.queue('replay-ops-dry');
    const { dlq } = await deadLetters(2, target);
    // A message the broker dead-lettered by itself (TTL): no twophase headers, an x-death entry.
    const expiring = h.queue('replay-ops-ttl');
    const ch = await h.admin.ch();
    const dlxOfDlq = `${dlq.slice(0, -'.dlq'.length)}.dlx`;
    await ch.assertQueue(expiring, { durable: true, arguments: { 'x-message-ttl': 1, 'x-dead-letter-exchange': dlxOfDlq, 'x-dead-letter-routing-key': dlq.slice(0, -'.dlq'.length) } });
    await h.admin.publish('', expiring, { late: true }, { messageId: 'late' });
    await waitFor(async () => (await h.admin.messageCount(dlq)) === 3, { what: 'the expired message dead-lettered too' });
    const { io, err } = capture();
    await ch.assertQueue(target, { durable: true });
    expect(await runCli(['dlq', 'replay', dlq, '--url', AMQP_URL, '--dry-run', '--queue', target], { io })).toBe(EXIT.ok);
    const text = err.join('');
    expect(text).toMatch(/would replay k-0 \(permanent_error\) → queue ".*" \(default exchange\) — error: bug 0: currency missing/);
    expect(text).toMatch(/would replay k-1 .* — error: bug 1: currency missing/);
    // Dead-lettered by the broker from another queue than the one given: it goes to --queue all the same, and says so.
    expect(text).toMatch(
      /would replay late \(broker:expired\) → queue ".*replay-ops-dry.*" \(default exchange\) — recorded route refused: queue ".*replay-ops-ttl.*" \(default exchange\): it was dead-lettered from queue ".*replay-ops-ttl.*", not from ".*replay-ops-dry.*" — error: dead-lettered by the broker from queue ".*replay-ops-ttl.*": message TTL expired/,
    );
    const json = capture();
    expect(await runCli(['dlq', 'replay', dlq, '--url', AMQP_URL, '--dry-run', '--json', '--queue', target], { io: json.io })).toBe(EXIT.ok);
    const messages = json.out.join('').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.type === 'message');
    expect(messages.map((m) => m.errorMessage)).toContain('bug 0: currency missing');
  });

  test('replaying from a queue that is not a dead-letter queue warns (no dead-letter headers; consumers attached)', async () => {
    const work = h.queue('replay-ops-work');
    const ch = await h.admin.ch();
    await ch.assertQueue(work, { durable: true });
    await h.admin.publish('', work, { plain: true }, { messageId: 'plain' });
    const { io, err } = capture();
    expect(await runCli(['dlq', 'replay', work, '--url', AMQP_URL, '--dry-run', '--queue', work], { io })).toBe(EXIT.ok);
    expect(err.join('')).toMatch(new RegExp(`warning: the first message of "${work.replace(/\./g, '\\.')}" carries no dead-letter headers \\(twophase-reason, x-death\\): .* does not look like a dead-letter queue`));

    const other = await amqp.connect(AMQP_URL);
    const consumerChannel = await other.createChannel();
    try {
      await consumerChannel.prefetch(1);
      await consumerChannel.consume(work, () => undefined);
      const second = capture();
      expect(await runCli(['dlq', 'replay', work, '--url', AMQP_URL, '--dry-run', '--queue', work], { io: second.io })).toBe(EXIT.ok);
      expect(second.err.join('')).toMatch(/warning: queue ".*" has 1 consumer\(s\): a dead-letter queue usually has none/);
    } finally {
      await other.close().catch(() => undefined);
    }
  });

  test('an unreachable broker ends the run with an error naming host, port and cause', async () => {
    const refused = capture();
    expect(await runCli(['dlq', 'replay', 'x.dlq', '--url', 'amqp://guest:guest@127.0.0.1:1'], { io: refused.io })).toBe(EXIT.failed);
    expect(refused.err.join('')).toMatch(/error: could not connect to RabbitMQ at 127\.0\.0\.1:1 vhost "\/": ECONNREFUSED/);
    const vhost = capture();
    expect(await runCli(['dlq', 'replay', 'x.dlq', '--url', `${AMQP_URL}/no-such-vhost`], { io: vhost.io })).toBe(EXIT.failed);
    expect(vhost.err.join('')).toMatch(/vhost "no-such-vhost": vhost not found/);
    const password = capture();
    expect(await runCli(['dlq', 'replay', 'x.dlq', '--url', AMQP_URL.replace('guest:guest', 'guest:wrong')], { io: password.io })).toBe(EXIT.failed);
    expect(password.err.join('')).toMatch(/ACCESS-REFUSED: the broker refused the user name or password/);
  });
});
