/**
 * A Redis claimer whose client is not ready says where and why: ready() and an operation on a
 * client that cannot connect name the host, the port and the cause (ECONNREFUSED, ENOTFOUND).
 * Real connection attempts against a closed loopback port and an unresolvable host name.
 */
import { createServer } from 'node:net';
import Redis from 'ioredis';
import { ClaimerUnavailableError, runOnce } from '../../../src';
import { RedisClaimer } from '../../../adapters/redis';
import { describeWithServices } from '../../support/services';
import { recordingLogger, SHARED_REDIS, uniquePrefix } from './support/redis-helpers';
import { waitFor } from '../../support/wait';

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describeWithServices(['redis'], 'RedisClaimer not ready: host, port and cause in the error (real connections)', () => {
  const clients: Redis[] = [];
  const claimers: RedisClaimer[] = [];
  afterEach(async () => {
    for (const claimer of claimers.splice(0)) await claimer.close().catch(() => undefined);
    for (const client of clients.splice(0)) client.disconnect();
  });

  function claimerFor(host: string, port: number): { claimer: RedisClaimer; client: Redis } {
    const client = new Redis({ host, port, lazyConnect: true, retryStrategy: () => 100, maxRetriesPerRequest: 0 });
    clients.push(client);
    const claimer = new RedisClaimer({ redis: client, logger: recordingLogger().logger }, { prefix: uniquePrefix('not-ready'), readyTimeoutMs: 500 });
    claimers.push(claimer);
    return { claimer, client };
  }

  test('ready() against a closed port names 127.0.0.1:<port> and ECONNREFUSED; so does a claim on that client', async () => {
    const port = await closedPort();
    const { claimer, client } = claimerFor('127.0.0.1', port);
    const error = await claimer.ready().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ClaimerUnavailableError);
    expect((error as Error).message).toMatch(new RegExp(`the Redis client for 127\\.0\\.0\\.1:${port} was not ready within 500 ms \\(status "\\w+"\\): .*ECONNREFUSED`));
    await waitFor(() => client.status !== 'wait', { timeoutMs: 2000, intervalMs: 10, what: 'the client to try' });
    const claim = await claimer.claim('k', { leaseTtlMs: 1000, doneTtlMs: 60_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(claim).toBeInstanceOf(ClaimerUnavailableError);
    expect((claim as Error).message).toMatch(new RegExp(`the Redis client for 127\\.0\\.0\\.1:${port} is "\\w+", not ready \\(last error: .*ECONNREFUSED.*\\); nothing was sent`));
  });

  test('runOnce right after the client was created (still connecting) waits for ready() instead of failing', async () => {
    const client = new Redis({ ...SHARED_REDIS, maxRetriesPerRequest: 1 });
    clients.push(client);
    const claimer = new RedisClaimer({ redis: client, logger: recordingLogger().logger }, { prefix: uniquePrefix('run-once-boot') });
    claimers.push(claimer);
    expect(client.status).not.toBe('ready');
    const outcomes = await Promise.all([1, 2, 3].map((n) => runOnce({ claimer, scope: { operation: 'boot' }, key: `k${n}`, leaseTtlMs: 5000, doneTtlMs: 60_000 }, () => n)));
    expect(outcomes.map((o) => [o.status, o.result])).toEqual([['ran', 1], ['ran', 2], ['ran', 3]]);
  });

  test('runOnce whose claimer cannot get ready rejects with the ready() error, and tries ready() again on the next call', async () => {
    const port = await closedPort();
    const { claimer } = claimerFor('127.0.0.1', port);
    const calls: number[] = [];
    const ready = claimer.ready.bind(claimer);
    claimer.ready = () => {
      calls.push(1);
      return ready();
    };
    const call = () => runOnce({ claimer, scope: { operation: 'boot' }, key: 'k', leaseTtlMs: 5000, doneTtlMs: 60_000 }, () => 1);
    await expect(call()).rejects.toThrow(/was not ready within 500 ms/);
    await expect(call()).rejects.toThrow(ClaimerUnavailableError);
    expect(calls).toHaveLength(2);
  });

  test('ready() against an unknown host names it and ENOTFOUND', async () => {
    const { claimer } = claimerFor('no-such-host.invalid', 6379);
    await expect(claimer.ready()).rejects.toThrow(/the Redis client for no-such-host\.invalid:6379 was not ready within 500 ms .*ENOTFOUND/);
  });
});
