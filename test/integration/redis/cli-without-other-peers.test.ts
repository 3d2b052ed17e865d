/**
 * A Redis command of the CLI in a service without kafkajs and pg (and without amqplib): the
 * `twophase` entry point, run as a child process with those packages unresolvable, reads a key
 * a real RedisClaimer holds on the shared Redis. Before the CLI loaded clients per command, its
 * entry point failed with "Cannot find module 'kafkajs'".
 */
import type Redis from 'ioredis';
import { RedisClaimer } from '../../../adapters/redis';
import { EXIT } from '../../../adapters/cli';
import { runCliProcess } from '../../support/cli-process';
import { describeWithServices } from '../../support/services';
import { connectRedis, deleteMatching, SHARED_REDIS, silentLogger, uniquePrefix } from './support/redis-helpers';

describeWithServices(['redis'], 'twophase keys diagnose --store redis without kafkajs, pg and amqplib installed', () => {
  let client: Redis;
  let prefix: string;
  let claimer: RedisClaimer;
  beforeEach(async () => {
    client = await connectRedis();
    prefix = uniquePrefix('cli-peers');
    claimer = new RedisClaimer({ redis: client, logger: silentLogger }, { prefix });
    await claimer.ready();
  });
  afterEach(async () => {
    await deleteMatching(client, `${prefix}:*`);
    await claimer.close();
    client.disconnect();
  });

  test('reports the state of a claimed key', async () => {
    const claim = await claimer.claim('order-7', { leaseTtlMs: 60_000, doneTtlMs: 120_000 });
    expect(claim.state).toBe('acquired');
    const url = `redis://${SHARED_REDIS.host}:${SHARED_REDIS.port}`;
    const result = await runCliProcess(['keys', 'diagnose', '--store', 'redis', '--url', url, '--prefix', prefix, '--key', 'order-7', '--json'], {
      blocked: ['kafkajs', 'pg', 'amqplib'],
    });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(EXIT.ok);
    expect(JSON.parse(result.stdout)).toMatchObject({ state: 'in_progress', key: 'order-7', attempt: 1 });
  }, 120_000); // ts-node in a child process: several seconds on the shared 2-core machine
});
