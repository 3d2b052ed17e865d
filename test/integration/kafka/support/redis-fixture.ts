/**
 * A RedisClaimer on the shared Redis (127.0.0.1:6379) with a namespace of its own, removed at
 * the end of the suite.
 */
import Redis from 'ioredis';
import { RedisClaimer, type RedisClaimerOptions } from '../../../../adapters/redis';
import { deleteMatching, SHARED_REDIS, silentLogger, uniquePrefix } from '../../redis/support/redis-helpers';

export class RedisFixture {
  private readonly clients: Redis[] = [];
  private readonly claimers: RedisClaimer[] = [];
  private readonly prefixes: string[] = [];

  /** A ready claimer on a client of its own, under a fresh prefix. */
  async claimer(label: string, options: RedisClaimerOptions = {}, port = SHARED_REDIS.port): Promise<RedisClaimer> {
    const client = new Redis({ host: SHARED_REDIS.host, port, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => 100 });
    this.clients.push(client);
    const prefix = options.prefix ?? uniquePrefix(`kafka-${label}`);
    if (port === SHARED_REDIS.port && !this.prefixes.includes(prefix)) this.prefixes.push(prefix);
    const claimer = new RedisClaimer({ redis: client, logger: silentLogger }, { ...options, prefix });
    this.claimers.push(claimer);
    await claimer.ready();
    return claimer;
  }

  /** A plain client on the shared Redis (for effect sinks shared across processes). */
  async client(): Promise<Redis> {
    const client = new Redis({ host: SHARED_REDIS.host, port: SHARED_REDIS.port, lazyConnect: true, maxRetriesPerRequest: 1 });
    client.on('error', () => undefined);
    await client.connect();
    this.clients.push(client);
    return client;
  }

  /** Closes the claimers, deletes their keys, quits the clients. */
  async destroy(): Promise<void> {
    await Promise.all(this.claimers.splice(0).map((c) => c.close()));
    if (this.prefixes.length > 0) {
      const admin = await this.client();
      for (const prefix of this.prefixes.splice(0)) await deleteMatching(admin, `${prefix}:*`);
    }
    await Promise.all(this.clients.splice(0).map((c) => c.quit().catch(() => c.disconnect())));
  }
}
