/**
 * A Redis claimer whose client is not ready says where and why: ready() and an operation on a
 * client that cannot connect name the host, the port and the cause (ECONNREFUSED, ENOTFOUND).
 * Real connection attempts against a closed loopback port and an unresolvable host name.
 */
import { createServer } from 'node:net';
import Redis from 'ioredis';
import { ClaimerUnavailableError } from '../../../src';
import { RedisClaimer } from '../../../adapters/redis';
import { describeWithServices } from '../../support/services';
import { recordingLogger, uniquePrefix } from './support/redis-helpers';
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

  test('ready() against an unknown host names it and ENOTFOUND', async () => {
    const { claimer } = claimerFor('no-such-host.invalid', 6379);
    await expect(claimer.ready()).rejects.toThrow(/the Redis client for no-such-host\.invalid:6379 was not ready within 500 ms .*ENOTFOUND/);
  });
});
