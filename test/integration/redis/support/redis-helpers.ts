/**
 * Helpers shared by the Redis integration suites: clients with bounded retry, unique namespaces,
 * cleanup by prefix, and waiting on an outcome instead of sleeping.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import Redis, { Cluster, type ClusterOptions, type RedisOptions } from 'ioredis';
import { SERVICES } from '../../../support/services';

/** The shared Redis of the integration suites (127.0.0.1:6379 unless REDIS_PORT is set). */
export const SHARED_REDIS = { host: SERVICES.redis.host, port: SERVICES.redis.port };

/** A RESP protocol version (https://redis.io/docs/latest/develop/reference/protocol-spec/). */
export type RespVersion = 2 | 3;

/** Major version of the installed ioredis (the peer matrix in CI installs others). */
export const IOREDIS_MAJOR = Number(
  (JSON.parse(readFileSync(require.resolve('ioredis/package.json'), 'utf8')) as { version: string }).version.split('.')[0],
);

/**
 * The RESP versions the Redis suites run under, each suite once per version. ioredis 6 speaks
 * RESP3 by default and takes a `protocol` option (2 or 3); ioredis 5 has no such option and speaks
 * RESP2 only. `TWOPHASE_TEST_REDIS_PROTOCOLS` ("2", "3" or "2,3") narrows the list.
 */
export const REDIS_PROTOCOLS: readonly RespVersion[] = (() => {
  const supported: RespVersion[] = IOREDIS_MAJOR >= 6 ? [2, 3] : [2];
  const wanted = process.env.TWOPHASE_TEST_REDIS_PROTOCOLS;
  if (!wanted) return supported;
  const list = wanted.split(',').map((v) => Number(v.trim()));
  const bad = list.filter((v) => !supported.includes(v as RespVersion));
  if (bad.length > 0) {
    throw new Error(`TWOPHASE_TEST_REDIS_PROTOCOLS=${wanted}: ioredis ${IOREDIS_MAJOR} speaks RESP ${supported.join(' and ')} only`);
  }
  return list as RespVersion[];
})();

/**
 * ioredis options selecting `protocol`. Typed loosely on purpose: ioredis 5's `RedisOptions` has no
 * `protocol` field, and these suites also compile against it. Under ioredis 5 only RESP2 is asked for.
 */
export function protocolOptions(protocol: RespVersion): RedisOptions {
  return IOREDIS_MAJOR >= 6 ? ({ protocol } as RedisOptions) : {};
}

/** The RESP version the server says this connection speaks (`CLIENT INFO`, field `resp`). */
export async function connectionProtocol(client: Redis): Promise<number> {
  const info = String(await client.call('CLIENT', 'INFO'));
  return Number(/\bresp=(\d)/.exec(info)?.[1]);
}

/** A logger that records every call, for asserting warnings. */
export function recordingLogger() {
  const calls: Array<{ level: string; obj: object; msg?: string }> = [];
  const at = (level: string) => (obj: object, msg?: string) => void calls.push({ level, obj, msg });
  return { calls, logger: { warn: at('warn'), error: at('error'), info: at('info'), debug: at('debug') } };
}

/** A silent logger for suites where client errors are expected. */
export const silentLogger = { warn: () => undefined, error: () => undefined, info: () => undefined, debug: () => undefined };

/** A unique namespace prefix for one test. */
export function uniquePrefix(label: string): string {
  return `tp-test:${label}:${randomBytes(4).toString('hex')}`;
}

/** A standalone client that gives up reconnecting quickly in tests; resolves when ready. */
export async function connectRedis(port = SHARED_REDIS.port, options: RedisOptions = {}, protocol?: RespVersion): Promise<Redis> {
  const client = new Redis({
    host: SHARED_REDIS.host,
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    retryStrategy: (times) => Math.min(times * 50, 200),
    ...(protocol === undefined ? {} : protocolOptions(protocol)),
    ...options,
  });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** A Cluster client on the given seed ports; resolves when ready. */
export async function connectCluster(ports: number[], options: ClusterOptions = {}, protocol?: RespVersion): Promise<Cluster> {
  const cluster = new Cluster(
    ports.map((port) => ({ host: '127.0.0.1', port })),
    {
      lazyConnect: true,
      redisOptions: { maxRetriesPerRequest: 1, ...(protocol === undefined ? {} : protocolOptions(protocol)) },
      clusterRetryStrategy: () => 100,
      ...options,
    },
  );
  cluster.on('error', () => undefined);
  await cluster.connect();
  return cluster;
}

/** Deletes every key matching `<pattern>` on a standalone server or on every master of a cluster. */
export async function deleteMatching(client: Redis | Cluster, pattern: string): Promise<number> {
  const nodes = client.isCluster ? (client as Cluster).nodes('master') : [client as Redis];
  let deleted = 0;
  for (const node of nodes) {
    const keyPrefix = node.options.keyPrefix ?? '';
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${keyPrefix}${pattern}`, 'COUNT', 500);
      cursor = next;
      // SCAN returns full keys and ioredis prefixes UNLINK's keys again: strip keyPrefix.
      // One UNLINK per key: keys of a cluster node may sit in different slots.
      const counts = await Promise.all(keys.map((key) => node.unlink(key.slice(keyPrefix.length))));
      deleted += counts.reduce((sum, n) => sum + n, 0);
    } while (cursor !== '0');
  }
  return deleted;
}

/** A real sleep: only for letting Redis-judged TTLs pass. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
