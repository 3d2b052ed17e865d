/**
 * Issue #12 item 4: the README's `await runConsumers([consumer])` pattern ends the process after
 * SIGTERM, within the documented bound, on the real RabbitMQ and Redis; "shutting down" and
 * "stopped" are logged by the default logger; a second signal exits at once; a shutdown that
 * cannot finish exits with code 1 at the exit deadline. Each test runs the consumer in a child
 * process (test/integration/rabbitmq/fixtures/runner-child.ts).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import Redis from 'ioredis';
import { describeWithServices } from '../../support/services';
import { AMQP_URL, AmqpAdmin, uniqueName } from './support/amqp';
import { waitFor } from '../../support/wait';

interface Child {
  readonly process: ChildProcess;
  readonly stderr: () => string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  readonly ready: Promise<void>;
}

function startChild(env: Record<string, string>): Child {
  const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, 'fixtures', 'runner-child.ts')], {
    env: { ...process.env, AMQP_URL, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (stdout.includes('ready')) resolve();
    });
    child.once('exit', () => reject(new Error(`child exited before it was ready; stderr:\n${stderr}`)));
  });
  ready.catch(() => undefined);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })),
  );
  return { process: child, stderr: () => stderr, exited, ready };
}

/** The JSON lines of the child's stderr. */
function lines(stderr: string): Array<Record<string, unknown>> {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describeWithServices(['rabbitmq', 'redis'], 'runConsumers exit policy (child process, RabbitMQ + Redis)', () => {
  const admin = new AmqpAdmin();
  const redis = new Redis({ host: '127.0.0.1', port: Number(process.env.REDIS_PORT ?? 6379), lazyConnect: true });
  let child: Child | undefined;

  beforeAll(async () => {
    await admin.open();
    await redis.connect();
  });
  afterEach(() => {
    if (child && child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
    child = undefined;
  });
  afterAll(async () => {
    await admin.cleanup();
    redis.disconnect();
  });

  it('the README pattern exits with code 0 after SIGTERM, logging "shutting down" and "stopped"', async () => {
    const queue = uniqueName('runner-exit');
    admin.track(queue, { delayTiersMs: [100] });
    const prefix = uniqueName('runner-exit');
    child = startChild({ QUEUE: queue, PREFIX: prefix, MODE: 'closers' });
    await child.ready;
    await admin.publish('', queue, { n: 1 }, { headers: { 'idempotency-key': 'k1' } });
    await waitFor(async () => (await redis.hget(`${prefix}:effects`, 'runner-exit:k1')) === '1', { what: 'the effect' });
    const sent = Date.now();
    child.process.kill('SIGTERM');
    const exit = await child.exited;
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(exit.at - sent).toBeLessThan(10_000);
    const log = lines(child.stderr());
    expect(log.find((l) => l.msg === 'twophase: shutting down')).toMatchObject({ level: 'info', signal: 'SIGTERM' });
    expect(log.find((l) => l.msg === 'twophase: stopped')).toMatchObject({ level: 'info', signal: 'SIGTERM' });
    await redis.del(`${prefix}:effects`);
  });

  it('a second signal exits at once (143) while a handler ignores its signal', async () => {
    const queue = uniqueName('runner-exit2');
    admin.track(queue, { delayTiersMs: [100] });
    const prefix = uniqueName('runner-exit2');
    child = startChild({ QUEUE: queue, PREFIX: prefix, MODE: 'stuck', SHUTDOWN_TIMEOUT_MS: '60000' });
    await child.ready;
    await admin.publish('', queue, { n: 1 }, { headers: { 'idempotency-key': 'k2' } });
    await waitFor(async () => (await redis.get(`${prefix}:started`)) === '1', { what: 'the handler to start' });
    child.process.kill('SIGTERM');
    await waitFor(() => child!.stderr().includes('twophase: shutting down'), { what: 'the shutting down line' });
    const sent = Date.now();
    child.process.kill('SIGTERM');
    const exit = await child.exited;
    expect(exit).toMatchObject({ code: 143, signal: null });
    expect(exit.at - sent).toBeLessThan(5000);
    expect(lines(child.stderr()).find((l) => l.msg?.toString().includes('second signal'))).toMatchObject({ level: 'warn' });
    // Nothing was lost: the message is back on the queue (unacked when the connection dropped).
    await waitFor(async () => (await admin.messageCount(queue)) === 1, { what: 'the message back on the queue' });
    await redis.del(`${prefix}:started`);
  });

  it('a shutdown that cannot finish exits with code 1 at exitDeadlineMs, saying so', async () => {
    const queue = uniqueName('runner-exit3');
    admin.track(queue, { delayTiersMs: [100] });
    const prefix = uniqueName('runner-exit3');
    child = startChild({ QUEUE: queue, PREFIX: prefix, MODE: 'stuck', SHUTDOWN_TIMEOUT_MS: '60000', EXIT_DEADLINE_MS: '1500' });
    await child.ready;
    await admin.publish('', queue, { n: 1 }, { headers: { 'idempotency-key': 'k3' } });
    await waitFor(async () => (await redis.get(`${prefix}:started`)) === '1', { what: 'the handler to start' });
    const sent = Date.now();
    child.process.kill('SIGTERM');
    const exit = await child.exited;
    expect(exit).toMatchObject({ code: 1, signal: null });
    expect(exit.at - sent).toBeGreaterThanOrEqual(1400);
    expect(exit.at - sent).toBeLessThan(8000);
    expect(lines(child.stderr()).find((l) => l.msg?.toString().includes('did not finish within exitDeadlineMs'))).toMatchObject({ level: 'error' });
    await redis.del(`${prefix}:started`);
  });
});
