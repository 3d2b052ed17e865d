/**
 * The core's claimer conformance suite, unchanged, against RedisClaimer on the shared Redis
 * (127.0.0.1:6379), in the configurations users choose between: coalescing on (default) and off,
 * ioredis auto-pipelining on, and the ioredis keyPrefix option; each under every RESP version the
 * installed ioredis speaks (REDIS_PROTOCOLS: RESP2 and RESP3 with ioredis 6). Each test gets its own
 * namespace prefix; time passes for real (Redis judges expiry), so the lease TTL is short.
 */
import type Redis from 'ioredis';
import { RedisClaimer, type RedisClaimerOptions } from '../../../adapters/redis';
import { describeWithServices } from '../../support/services';
import { type ClaimerFactory, describeClaimerConformance } from '../../conformance/claimer-conformance';
import { describeRunOnceConformance } from '../../conformance/run-once-conformance';
import { ReplyFaults } from '../../conformance/reply-faults';
import { replyDroppingClient } from './support/reply-dropping-client';
import {
  connectionProtocol,
  connectRedis,
  deleteMatching,
  REDIS_PROTOCOLS,
  type RespVersion,
  silentLogger,
  sleep,
  uniquePrefix,
} from './support/redis-helpers';

const LEASE_TTL_MS = 250;

const variants: Array<{ name: string; client: (protocol: RespVersion) => Promise<Redis>; options: RedisClaimerOptions }> = [
  { name: 'coalescing (default)', client: (p) => connectRedis(undefined, {}, p), options: {} },
  { name: 'no coalescing', client: (p) => connectRedis(undefined, {}, p), options: { coalesce: false } },
  { name: 'ioredis enableAutoPipelining, no coalescing', client: (p) => connectRedis(undefined, { enableAutoPipelining: true }, p), options: { coalesce: false } },
  { name: 'ioredis keyPrefix', client: (p) => connectRedis(undefined, { keyPrefix: 'tp-kp:' }, p), options: {} },
];

describeWithServices(['redis'], 'RedisClaimer conformance on 127.0.0.1:6379', () => {
  describe.each(REDIS_PROTOCOLS)('RESP%i', (protocol) => {
    for (const variant of variants) {
      describe(variant.name, () => {
        let client: Redis | undefined;
        afterAll(async () => {
          await client?.quit();
        });

        test(`the connection speaks RESP${protocol}`, async () => {
          client ??= await variant.client(protocol);
          expect(await connectionProtocol(client)).toBe(protocol);
        });

        const factory: ClaimerFactory = async () => {
          client ??= await variant.client(protocol);
          const prefix = uniquePrefix('conf');
          const faults = new ReplyFaults();
          const claimer = new RedisClaimer({ redis: replyDroppingClient(client, faults), logger: silentLogger }, { ...variant.options, prefix });
          await claimer.ready();
          return {
            claimer,
            leaseTtlMs: LEASE_TTL_MS,
            advance: (ms) => sleep(ms),
            dropNextReply: (operation) => faults.dropNext(operation),
            cleanup: async () => {
              await claimer.close();
              await deleteMatching(client!, `${prefix}:*`);
            },
          };
        };
        describeClaimerConformance(`RedisClaimer (${variant.name}, RESP${protocol})`, factory, { claimMany: true, commitMany: true, transactional: false });
        describeRunOnceConformance(`RedisClaimer (${variant.name}, RESP${protocol})`, factory);
      });
    }
  });
});
