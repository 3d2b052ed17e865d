/**
 * Issue #12 item 6, Redis part: the claimer warns (not info) when it cannot read
 * `maxmemory-policy`, and by default logs with the core's logger (one JSON line per warning on
 * stderr), not a multi-line console.warn. Each test runs a private redis-server.
 */
import type Redis from 'ioredis';
import { RedisClaimer } from '../../../adapters/redis';
import { describeWithServices } from '../../support/services';
import { connectRedis, recordingLogger } from './support/redis-helpers';
import { RedisServerProcess } from './support/redis-process';

describeWithServices(['redis'], 'RedisClaimer startup warnings (private redis-server)', () => {
  let server: RedisServerProcess | undefined;
  let client: Redis | undefined;

  afterEach(async () => {
    client?.disconnect();
    client = undefined;
    await server?.destroy();
    server = undefined;
  });

  it('warns when CONFIG is disabled and maxmemory-policy cannot be read (managed Redis)', async () => {
    server = await RedisServerProcess.start(['--rename-command', 'CONFIG', '']);
    client = await connectRedis(server.port);
    const { calls, logger } = recordingLogger();
    await new RedisClaimer({ redis: client, logger }).ready();
    const line = calls.find((c) => c.msg?.includes('could not read maxmemory-policy'));
    expect(line?.level).toBe('warn');
    expect(line?.obj).toMatchObject({ node: `127.0.0.1:${server.port}` });
  });

  it('logs through the core default logger: one JSON line on stderr per warning', async () => {
    server = await RedisServerProcess.start(['--maxmemory-policy', 'allkeys-lru']);
    client = await connectRedis(server.port);
    const written: string[] = [];
    const stderr = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    const console = jest.spyOn(globalThis.console, 'warn');
    try {
      await new RedisClaimer({ redis: client }).ready();
    } finally {
      stderr.mockRestore();
      console.mockRestore();
    }
    expect(console).not.toHaveBeenCalled();
    const warning = written.find((w) => w.includes('maxmemory-policy is \\"allkeys-lru\\"'));
    expect(warning).toBeDefined();
    expect(warning!.endsWith('\n')).toBe(true);
    expect(warning!.trimEnd()).not.toContain('\n');
    expect(JSON.parse(warning!)).toMatchObject({ level: 'warn', maxmemoryPolicy: 'allkeys-lru', node: `127.0.0.1:${server.port}` });
  });
});
