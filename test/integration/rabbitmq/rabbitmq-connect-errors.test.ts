/**
 * An unreachable RabbitMQ at start(): a closed port and an unknown host are retried with
 * exponential backoff and few log lines, then end in a BrokerConnectionError naming host, port
 * and cause; a missing vhost and bad credentials cannot be fixed by retrying and end start() at
 * once. Real broker (for the vhost and credential cases) and a real closed port.
 */
import { createServer } from 'node:net';
import { ack } from '../../../src';
import { BrokerConnectionError } from '../../../adapters/rabbitmq';
import { describeWithServices } from '../../support/services';
import { AMQP_URL } from './support/amqp';
import { Harness } from './support/harness';

/** A loopback port nothing listens on (bound once, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describeWithServices(['rabbitmq'], 'RabbitMqSource start() against an unreachable broker (real)', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  async function startFails(url: string, connectTimeoutMs: number): Promise<{ error: BrokerConnectionError; ms: number; warnings: number }> {
    const source = h.source({ queue: h.queue('connect'), url, connectTimeoutMs, reconnectDelayMs: 100 });
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, async () => ack());
    const started = Date.now();
    const error = await consumer.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    const ms = Date.now() - started;
    expect(error).toBeInstanceOf(BrokerConnectionError);
    const warnings = h.logger.lines.filter((l) => l.level === 'warn' && /connect/i.test(l.msg ?? '')).length;
    return { error: error as BrokerConnectionError, ms, warnings };
  }

  test('a closed port: backoff, at most a few warning lines, and an error naming host, port and ECONNREFUSED', async () => {
    const port = await closedPort();
    const { error, warnings } = await startFails(`amqp://guest:guest@127.0.0.1:${port}`, 4000);
    expect(error).toMatchObject({ host: '127.0.0.1', port, reason: 'ECONNREFUSED', retriable: true });
    expect(error.message).toMatch(new RegExp(`could not connect to RabbitMQ at 127\\.0\\.0\\.1:${port} vhost "/": ECONNREFUSED`));
    expect(error.message).toMatch(/\(\d+ attempt\(s\) in \d+ ms\)/);
    // 4 s at a 100 ms base: fixed 100 ms retries were ~40 attempts × 2 connections, each logged.
    expect(error.attempts).toBeLessThanOrEqual(8);
    expect(warnings).toBeLessThanOrEqual(4);
    expect(warnings).toBeGreaterThanOrEqual(1);
  });

  test('a connect timeout names the broker without the password, also when the URL has an empty user (amqp://:password@host)', async () => {
    // A listener that accepts the TCP connection and never speaks AMQP: the connect times out
    // (300 ms). It drops the socket after 5 s, which lets the source's close after the failed start end.
    const sockets = new Set<import('node:net').Socket>();
    const silent = createServer((socket) => {
      sockets.add(socket);
      setTimeout(() => socket.destroy(), 5000).unref();
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    try {
      for (const url of [`amqp://:s3cret-pw@127.0.0.1:${port}`]) {
        const source = h.source({ queue: h.queue('connect-timeout'), url, connectTimeoutMs: 300, reconnectDelayMs: 100 });
        const consumer = h.consumer({ source, claimer: h.claimer('memory') }, async () => ack());
        const error = (await consumer.start().then(
          () => undefined,
          (e: unknown) => e,
        )) as Error;
        expect(error).toBeInstanceOf(Error);
        expect(error.message).toMatch(/could not connect to RabbitMQ at amqp:\/\/:\*\*\*@127\.0\.0\.1:\d+ within 300 ms/);
        const everything = [error.message, String((error.cause as Error | undefined)?.message), ...h.logger.lines.map((l) => `${l.msg ?? ''} ${JSON.stringify(l.obj)}`)].join('\n');
        expect(everything).not.toContain('s3cret');
      }
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  test('an unknown host: ENOTFOUND, naming the host', async () => {
    const { error } = await startFails('amqp://guest:guest@no-such-host.invalid:5672', 1500);
    expect(error).toMatchObject({ host: 'no-such-host.invalid', port: 5672, reason: 'ENOTFOUND' });
    expect(error.message).toMatch(/ENOTFOUND: the host name "no-such-host\.invalid" does not resolve/);
  });

  test('a missing vhost ends start() at once (not after connectTimeoutMs), not retriable', async () => {
    const { error, ms } = await startFails(`${AMQP_URL}/no-such-vhost`, 20_000);
    expect(error).toMatchObject({ reason: 'VHOST_NOT_FOUND', vhost: 'no-such-vhost', retriable: false });
    expect(error.message).toMatch(/vhost "no-such-vhost": vhost not found/);
    expect(ms).toBeLessThan(10_000);
  });

  test('bad credentials end start() at once with ACCESS-REFUSED, not retriable', async () => {
    const { error, ms } = await startFails(AMQP_URL.replace('guest:guest', 'guest:wrong-password'), 20_000);
    expect(error).toMatchObject({ reason: 'ACCESS_REFUSED', retriable: false });
    expect(error.message).toMatch(/ACCESS-REFUSED: the broker refused the user name or password/);
    expect(error.message).not.toMatch(/wrong-password/);
    expect(ms).toBeLessThan(10_000);
  });
});
