/**
 * `twophase/redis`: the Redis claimer (ioredis, standalone or Cluster).
 *
 * ```ts
 * import { Redis } from 'ioredis';
 * import { RedisClaimer } from 'twophase/redis';
 * const claimer = new RedisClaimer({ redis: new Redis() }, { prefix: 'billing' });
 * await claimer.ready();
 * ```
 *
 * @module twophase/redis
 */
export { RedisClaimer, type RedisClaimerStats } from './redis-claimer';
export {
  REDIS_CLAIMER_DEFAULTS,
  type RedisClaimerDependencies,
  type RedisClaimerLogger,
  type RedisClaimerOptions,
  type RedisCoalesceOptions,
  type ResolvedRedisClaimerOptions,
} from './options';
export { DEFAULT_PREFIX, MAX_PREFIX_BYTES, recordKey, recordSlot, hashSlot, escapeKey } from './key-layout';
export { diagnoseRedisKey, type RedisDiagnoseOptions, type RedisKeyDiagnosis } from './keys';
