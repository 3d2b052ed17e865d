/**
 * `twophase dlq replay` against the real broker: replay after a fix processes once, dry run,
 * limit, JSON output, a message that fails again returns to the DLQ, and a run killed with
 * SIGKILL loses nothing.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ack, PermanentError } from '../../../src';
import { BROKER_DEATH_HEADERS, HEADERS } from '../../../adapters/rabbitmq';
import { EXIT, runCli } from '../../../adapters/cli';
import { describeWithServices } from '../../support/services';
import { AMQP_URL } from './support/amqp';
import { EffectLog, Harness } from './support/harness';
import { waitFor } from '../../support/wait';

function capture(): { io: { stdout: (t: string) => void; stderr: (t: string) => void }; out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { stdout: (t) => out.push(t), stderr: (t) => err.push(t) }, out, err };
}

describeWithServices(['rabbitmq'], 'twophase dlq replay (real broker)', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  /** A queue bound to an exchange, a consumer that fails until `fixed`, and `n` messages dead-lettered. */
  async function poisonFixture(n: number, options: { maxAttempts?: number; permanent?: boolean } = {}) {
    const exchange = `${h.queue('replay-x')}.ex`;
    const queue = h.queue('replay', [exchange]);
    const state = { fixed: false, runs: 0 };
    const effects = new EffectLog();
    const source = h.source({ queue, bindings: [{ exchange, routingKey: 'payment.requested' }] });
    const consumer = h.consumer({ source, claimer: h.claimer('memory'), maxAttempts: options.maxAttempts ?? 2, retryBackoff: { initialDelayMs: 100, maxDelayMs: 100, jitter: 0 } }, async (m) => {
      state.runs++;
      if (!state.fixed) {
        if (options.permanent) throw new PermanentError('bug: currency missing');
        throw new Error('bug: currency missing');
      }
      effects.apply(m.key);
      return ack();
    });
    await consumer.start();
    for (let i = 0; i < n; i++) await h.admin.publish(exchange, 'payment.requested', { i }, { messageId: `pay-${i}` });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === n, { what: `${n} messages dead-lettered` });
    return { exchange, queue, dlq: `${queue}.dlq`, state, effects, source, consumer };
  }

  test('after the fix, a replayed message is processed once (permanent error → DLQ → replay)', async () => {
    const f = await poisonFixture(1, { permanent: true });
    f.state.fixed = true;
    const { io, out, err } = capture();
    const code = await runCli(['dlq', 'replay', f.dlq, '--url', AMQP_URL], { io });
    expect(code).toBe(EXIT.ok);
    // Straight back to the work queue the DLQ belongs to, not through the exchange it was published to.
    expect(err.join('')).toMatch(new RegExp(`\\[1/1\\] replayed pay-0 \\(permanent_error, 1 attempt\\(s\\)\\) → queue "${f.queue.replace(/\./g, '\\.')}" \\(default exchange\\)\n`));
    expect(out.join('')).toMatch(/^1 replayed, 0 skipped, 0 failed, of 1 examined/);
    await waitFor(() => f.effects.count('test:pay-0') === 1, { what: 'replayed message processed' });
    await waitFor(() => f.consumer.health().inFlight === 0, { what: 'settled' });
    expect(await h.admin.messageCount(f.dlq)).toBe(0);
    expect(f.effects.total).toBe(1);
  });

  test('a replayed message carries the DLQ copy\'s headers less the dead-letter ones, plus the replay count and time: no internal twophase-* header leaks', async () => {
    const f = await poisonFixture(1, { permanent: true });
    const target = h.queue('replay-headers-target');
    const ch = await h.admin.ch();
    await ch.assertQueue(target, { durable: true });
    // The DLQ copy as the tool will take it (looked at, then put back).
    const dead = await ch.get(f.dlq, { noAck: false });
    expect(dead).not.toBe(false);
    if (dead === false) return;
    const deadHeaders = { ...(dead.properties.headers ?? {}) };
    ch.nack(dead, false, true);
    await waitFor(async () => (await h.admin.messageCount(f.dlq)) === 1, { what: 'the DLQ copy back in the DLQ' });

    const { io } = capture();
    expect(await runCli(['dlq', 'replay', f.dlq, '--url', AMQP_URL, '--to-queue', target], { io })).toBe(EXIT.ok);
    await waitFor(async () => (await h.admin.messageCount(target)) === 1, { what: 'replayed copy at the target' });
    const [replayed] = await h.admin.drain(target);
    const headers = replayed!.properties.headers ?? {};

    // No twophase-* header that the DLQ copy did not have, except the two documented replay headers.
    const replayHeaders: string[] = [HEADERS.replayCount, HEADERS.replayedAt];
    const added = Object.keys(headers).filter((name) => name.startsWith('twophase-') && !(name in deadHeaders) && !replayHeaders.includes(name));
    expect(added).toEqual([]);
    // Exactly the DLQ copy's headers, less the dead-letter ones (docs/rabbitmq.md), with their values.
    const expected: Record<string, unknown> = { ...deadHeaders };
    for (const name of [HEADERS.reason, HEADERS.errorMessage, HEADERS.errorType, HEADERS.rejectedAt, HEADERS.originalQueue, HEADERS.attempts, HEADERS.requeueCause, ...BROKER_DEATH_HEADERS]) delete expected[name];
    expect(Object.keys(headers).sort()).toEqual([...Object.keys(expected), ...replayHeaders].sort());
    for (const [name, value] of Object.entries(expected)) expect([name, headers[name]]).toEqual([name, value]);
    expect(headers[HEADERS.replayCount]).toBe(1);
    expect(replayed!.properties.messageId).toBe('pay-0');
  });

  // The release before a dead-letter resets the key's attempt count, so the replay starts at attempt 1.
  test('after the fix, a replayed retry_exhausted message is processed once', async () => {
    const f = await poisonFixture(1, { maxAttempts: 2 });
    f.state.fixed = true;
    const { io } = capture();
    expect(await runCli(['dlq', 'replay', f.dlq, '--url', AMQP_URL], { io })).toBe(EXIT.ok);
    // Today: dead-lettered again as retry_exhausted without running the handler.
    await waitFor(async () => f.effects.total > 0 || (await h.admin.messageCount(f.dlq)) > 0, { what: 'processed, or dead-lettered again' });
    expect(f.effects.count('test:pay-0')).toBe(1);
  });

  test('a replayed message that fails again goes back to the DLQ, with fresh attempts', async () => {
    const f = await poisonFixture(1, { permanent: true });
    const runsBefore = f.state.runs;
    const { io } = capture();
    expect(await runCli(['dlq', 'replay', f.dlq, '--url', AMQP_URL], { io })).toBe(EXIT.ok);
    await waitFor(() => f.state.runs === runsBefore + 1, { what: 'handler ran again' });
    await waitFor(async () => (await h.admin.messageCount(f.dlq)) === 1, { what: 'back in the DLQ' });
    const [dead] = await h.admin.drain(f.dlq);
    expect(dead!.properties.headers?.[HEADERS.reason]).toBe('permanent_error');
    expect(dead!.properties.headers?.[HEADERS.replayCount]).toBe(1);
    expect(f.effects.total).toBe(0);
  });

  test('--dry-run: a message twophase dead-lettered with no error text is not described by the x-death entry of a delay queue it passed through', async () => {
    const work = h.queue('via-delay');
    const dlq = `${work}.dlq`;
    const ch = await h.admin.ch();
    await ch.assertQueue(work, { durable: false });
    await ch.assertQueue(dlq, { durable: false });
    const delayDeath = [{ queue: `${work}.delay.1000ms`, reason: 'expired', count: 1, exchange: '', 'routing-keys': [`${work}.delay.1000ms`] }];
    await h.admin.publish('', dlq, { n: 1 }, { messageId: 'via-delay-1', headers: { 'idempotency-key': 'via-delay-1', [HEADERS.reason]: 'retry_exhausted', [HEADERS.attempts]: 5, 'x-death': delayDeath } });
    const dry = capture();
    expect(await runCli(['dlq', 'replay', dlq, '--url', AMQP_URL, '--dry-run', '--json'], { io: dry.io })).toBe(EXIT.ok);
    const message = dry.out.join('').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.type === 'message');
    expect(message).toMatchObject({ reason: 'retry_exhausted' });
    expect(message?.errorMessage).toBeUndefined();
  });

  test('--dry-run --json lists the messages and changes nothing; --limit bounds a real run', async () => {
    const f = await poisonFixture(5, { permanent: true });
    const dry = capture();
    expect(await runCli(['dlq', 'replay', f.dlq, '--url', AMQP_URL, '--dry-run', '--json'], { io: dry.io })).toBe(EXIT.ok);
    const lines = dry.out.join('').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toMatchObject({ type: 'start', available: 5, planned: 5, dryRun: true });
    const messages = lines.filter((l) => l.type === 'message');
    expect(messages).toHaveLength(5);
    expect(new Set(messages.map((m) => m.messageId))).toEqual(new Set(['pay-0', 'pay-1', 'pay-2', 'pay-3', 'pay-4']));
    expect(messages.every((m) => m.outcome === 'would_replay' && m.reason === 'permanent_error')).toBe(true);
    expect(lines.at(-1)).toMatchObject({ type: 'done', summary: { wouldReplay: 5, replayed: 0, examined: 5 } });
    await waitFor(async () => (await h.admin.messageCount(f.dlq)) === 5, { what: 'all five still in the DLQ' });
    expect(f.state.runs).toBe(5);

    f.state.fixed = true;
    const real = capture();
    expect(await runCli(['dlq', 'replay', f.dlq, '--url', AMQP_URL, '--limit', '2'], { io: real.io })).toBe(EXIT.ok);
    expect(real.out.join('')).toMatch(/^2 replayed/);
    await waitFor(() => f.effects.keys === 2, { what: 'two replayed messages processed' });
    expect(await h.admin.messageCount(f.dlq)).toBe(3);
  });

  test('--trust-recorded-route: a message with no route and an unroutable one are skipped and stay in the DLQ', async () => {
    const queue = h.queue('replay-skip');
    const dlq = `${queue}.dlq`;
    const ch = await h.admin.ch();
    await ch.assertQueue(dlq, { durable: true });
    await h.admin.publish('', dlq, { a: 1 }, { messageId: 'no-route' });
    await h.admin.publish('', dlq, { a: 2 }, { messageId: 'unroutable', headers: { [HEADERS.originalExchange]: 'amq.direct', [HEADERS.originalRoutingKey]: `nobody-${queue}` } });
    const { io, err } = capture();
    expect(await runCli(['dlq', 'replay', dlq, '--url', AMQP_URL, '--trust-recorded-route'], { io })).toBe(EXIT.ok);
    expect(err.join('')).toMatch(/skipped no-route: the message records no original exchange/);
    expect(err.join('')).toMatch(/skipped unroutable: unroutable: no queue is bound/);
    await waitFor(async () => (await h.admin.messageCount(dlq)) === 2, { what: 'both still in the DLQ' });
  });

  test('a message whose replay copy would not fit amqplib\'s header limit is skipped and stays in the DLQ; the next one is replayed', async () => {
    const queue = h.queue('replay-big');
    const dlq = `${queue}.dlq`;
    const ch = await h.admin.ch();
    await ch.assertQueue(dlq, { durable: true });
    await ch.assertQueue(queue, { durable: false });
    const route = { [HEADERS.originalExchange]: '', [HEADERS.originalRoutingKey]: queue };
    // Fits as it is (about 65 500 bytes of headers); the replay headers push it over 65 536.
    await h.admin.publish('', dlq, { a: 1 }, { messageId: 'big', headers: { ...route, 'idempotency-key': 'k'.repeat(65_400) } });
    await h.admin.publish('', dlq, { a: 2 }, { messageId: 'small', headers: { ...route, 'idempotency-key': 'small' } });
    const { io, err, out } = capture();
    expect(await runCli(['dlq', 'replay', dlq, '--url', AMQP_URL], { io })).toBe(EXIT.ok);
    expect(err.join('')).toMatch(/skipped k{80}… \(65400 characters\): the replay to queue ".*" \(default exchange\) was not sent: its headers encode to \d+ bytes, more than amqplib's 65536-byte limit/);
    expect(out.join('')).toMatch(/^1 replayed, 1 skipped/);
    const [replayed] = await h.admin.drain(queue);
    expect(replayed!.properties.messageId).toBe('small');
    await waitFor(async () => (await h.admin.messageCount(dlq)) === 1, { what: 'the big one still in the DLQ' });
  });

  test('usage errors exit with 2', async () => {
    const { io } = capture();
    expect(await runCli(['dlq', 'replay'], { io })).toBe(EXIT.usage);
    expect(await runCli(['dlq', 'replay', 'q', '--limit', '0'], { io })).toBe(EXIT.usage);
    expect(await runCli(['dlq', 'replay', 'q', '--broker', 'nats'], { io })).toBe(EXIT.usage);
  });

  test('killing the tool mid-way (SIGKILL) loses nothing: every message is in the DLQ or at its destination', async () => {
    const queue = h.queue('replay-kill');
    const dlq = `${queue}.dlq`;
    const target = h.queue('replay-kill-target');
    const ch = await h.admin.ch();
    await ch.assertQueue(dlq, { durable: true });
    await ch.assertQueue(target, { durable: true });
    const n = 400;
    for (let i = 0; i < n; i++) {
      await h.admin.publish('', dlq, { i }, { messageId: `kill-${i}`, headers: { [HEADERS.originalExchange]: '', [HEADERS.originalRoutingKey]: target, [HEADERS.reason]: 'retry_exhausted' } });
    }
    const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, '..', '..', '..', 'adapters', 'cli', 'bin.ts'), 'dlq', 'replay', dlq, '--url', AMQP_URL, '--to-queue', target], {
      env: { ...process.env, TS_NODE_PROJECT: join(__dirname, '..', '..', '..', 'tsconfig.json') },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let progress = 0;
    child.stderr!.on('data', (chunk: Buffer) => {
      progress += (chunk.toString().match(/\] replayed/g) ?? []).length;
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_c, signal) => resolve(signal)));
    await waitFor(() => progress >= 20 || child.exitCode !== null, { what: 'replay in progress', timeoutMs: 30_000 });
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    await waitFor(async () => (await h.admin.messageCount(dlq)) + (await h.admin.messageCount(target)) >= n, { what: 'unacked messages returned to the DLQ' });
    const ids = new Set<string>();
    for (const m of [...(await h.admin.drain(dlq)), ...(await h.admin.drain(target))]) ids.add(String(m.properties.messageId));
    expect(ids.size).toBe(n);
    expect(progress).toBeLessThan(n); // it really was killed mid-way
  });
});
