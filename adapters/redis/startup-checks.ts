/**
 * What `RedisClaimer.ready()` checks before the first message: the client is ready, the server's
 * eviction policy cannot silently drop records, the client's own settings, and that a cluster-mode
 * server is reached through a Cluster client.
 */
import type { Cluster, Redis } from 'ioredis';
import { ClaimerUnavailableError, ConfigurationError } from '../../src';
import type { RedisClaimerLogger } from './options';

/**
 * Resolves when the client's status is `ready`, connecting a `lazyConnect` client first.
 * @throws ClaimerUnavailableError when not ready within `timeoutMs`, or the client was closed
 */
export function waitForReady(client: Redis | Cluster, timeoutMs: number): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  const where = redisEndpoint(client);
  if (client.status === 'end') {
    return Promise.reject(new ClaimerUnavailableError(`the Redis client for ${where} was closed (status "end"); create a new one`));
  }
  if (client.status === 'wait') {
    // lazyConnect: the caller's own connection, opened on first use; errors arrive as events.
    client.connect().catch(() => undefined);
  }
  return new Promise((resolve, reject) => {
    let lastError: Error | undefined;
    const cause = () => (lastError ? `: ${describeRedisError(lastError)}` : '');
    const onReady = () => {
      cleanup();
      resolve();
    };
    const onError = (error: Error) => {
      lastError = error;
    };
    const onEnd = () => {
      cleanup();
      reject(new ClaimerUnavailableError(`the Redis client for ${where} was closed before it became ready${cause()}`, { cause: lastError }));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new ClaimerUnavailableError(`the Redis client for ${where} was not ready within ${timeoutMs} ms (status "${client.status}")${cause()}`, { cause: lastError }));
    }, timeoutMs);
    const cleanup = () => {
      clearTimeout(timer);
      client.off('ready', onReady);
      client.off('end', onEnd);
      client.off('error', onError);
    };
    client.on('ready', onReady);
    client.on('end', onEnd);
    client.on('error', onError);
  });
}

/** `host:port` of a client (a Cluster: its startup nodes), for error messages. */
export function redisEndpoint(client: Redis | Cluster): string {
  if (client.isCluster) {
    const nodes = ((client as unknown as { startupNodes?: unknown }).startupNodes ?? []) as Array<string | number | { host?: string; port?: number }>;
    return `cluster ${nodes.map((n) => (typeof n === 'object' ? `${n.host ?? '127.0.0.1'}:${n.port ?? 6379}` : String(n))).join(',')}`;
  }
  const options = (client as Redis).options;
  if (options.path) return `socket ${options.path}`;
  return `${options.host ?? '127.0.0.1'}:${options.port ?? 6379}`;
}

/** An ioredis connection error in words: its code (ECONNREFUSED, ENOTFOUND, NOAUTH, …) and message. */
export function describeRedisError(error: Error): string {
  const code = (error as { code?: unknown }).code;
  const text = error.message || error.name;
  return typeof code === 'string' && !text.includes(code) ? `${code} ${text}` : text;
}

/** The nodes that run scripts: the client itself, or each master of a Cluster. */
export function scriptNodes(client: Redis | Cluster): Redis[] {
  return client.isCluster ? (client as Cluster).nodes('master') : [client as Redis];
}

/**
 * Reads `maxmemory-policy` on each node and warns unless it is `noeviction`. Every twophase record
 * carries a TTL, so `volatile-*` policies may evict them as readily as `allkeys-*`
 * (https://redis.io/docs/latest/develop/reference/eviction/). An evicted done record lets a
 * duplicate run its effect again; an evicted lease lets a second owner start while the first
 * still works (the fencing token still increases, see RedisClaimer). When the policy cannot be
 * read (managed services that disable or rename `CONFIG`), that is a warning too: the claimer
 * cannot tell whether records may be evicted.
 * @returns the policy per node address (`unknown` when unreadable)
 */
export async function checkEvictionPolicy(client: Redis | Cluster, logger: RedisClaimerLogger): Promise<Record<string, string>> {
  const policies: Record<string, string> = {};
  await Promise.all(
    scriptNodes(client).map(async (node) => {
      const address = `${node.options.host ?? '?'}:${node.options.port ?? '?'}`;
      try {
        const policy = configValue(await node.config('GET', 'maxmemory-policy'), 'maxmemory-policy') ?? 'unknown';
        policies[address] = policy;
        if (policy !== 'noeviction') {
          logger.warn(
            { node: address, maxmemoryPolicy: policy },
            `Redis maxmemory-policy is "${policy}": under memory pressure Redis may evict twophase records (all of them carry a TTL). ` +
              'An evicted done record lets a duplicate run its effect again; an evicted lease lets a second owner start. ' +
              'Use "noeviction" on the claim store (writes then fail with OOM, which twophase treats as unavailable and retries).',
          );
        }
      } catch (error) {
        policies[address] = 'unknown';
        logger.warn(
          { node: address, error: (error as Error).message },
          'could not read maxmemory-policy (CONFIG may be disabled or renamed, as on managed Redis); make sure the claim store uses "noeviction", or records may be evicted and effects repeat',
        );
      }
    }),
  );
  return policies;
}

/**
 * The value of `name` in a `CONFIG GET` reply, in either shape ioredis returns: a flat
 * `[name, value, …]` array (RESP2, and RESP3 with ioredis 6's default `replyMapping: 'legacy'`) or
 * an object `{ name: value }` (RESP3 with `replyMapping: 'resp3'`, where the server's map reply is
 * kept as a map). `undefined` when the reply holds no such entry.
 */
export function configValue(reply: unknown, name: string): string | undefined {
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) {
      if (reply[i] === name) return String(reply[i + 1]);
    }
    return undefined;
  }
  if (reply !== null && typeof reply === 'object' && Object.prototype.hasOwnProperty.call(reply, name)) {
    return String((reply as Record<string, unknown>)[name]);
  }
  return undefined;
}

/**
 * Warns about client settings that put no upper bound on the latency of *other* commands on the
 * same client (S14): the offline queue on, `maxRetriesPerRequest: null` and no `commandTimeout`.
 * The claimer's own operations are bounded anyway: it never queues while the client is not ready,
 * and each operation has its own deadline.
 */
export function checkClientOptions(client: Redis | Cluster, logger: RedisClaimerLogger): void {
  const options = (client.isCluster ? (client as Cluster).options.redisOptions : (client as Redis).options) ?? {};
  const offlineQueue = client.isCluster
    ? (client as Cluster).options.enableOfflineQueue !== false
    : (client as Redis).options.enableOfflineQueue !== false;
  if (offlineQueue && options.maxRetriesPerRequest === null && options.commandTimeout === undefined) {
    logger.warn(
      { enableOfflineQueue: true, maxRetriesPerRequest: null, commandTimeout: undefined },
      'this ioredis client can hold commands indefinitely while Redis is down (offline queue on, maxRetriesPerRequest null, no commandTimeout). ' +
        "twophase's operations keep their own deadline; set commandTimeout or maxRetriesPerRequest for the application's other commands.",
    );
  }
}

/**
 * Refuses a plain `Redis` client connected to a server in cluster mode: multi-key calls would
 * fail with CROSSSLOT and other slots with MOVED.
 * @throws ConfigurationError when `cluster_enabled:1` and the client is not a Cluster
 */
export async function checkClusterMode(client: Redis | Cluster): Promise<void> {
  if (client.isCluster) return;
  let info: string;
  try {
    info = await (client as Redis).info('cluster');
  } catch {
    return; // INFO may be renamed or denied; the scripts' replies are mapped anyway.
  }
  if (/^cluster_enabled:1\s*$/m.test(info)) {
    throw new ConfigurationError('the Redis server runs in cluster mode; pass an ioredis Cluster client to RedisClaimer, not a plain Redis client');
  }
}
