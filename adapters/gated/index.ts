/**
 * `twophase/gated`: a fast gate (a `RedisClaimer`) in front of the claimer of record (a
 * `PostgresClaimer` in transactional mode). Duplicates are turned away by the gate without a
 * PostgreSQL round trip; PostgreSQL, in the effect's transaction, stays the truth.
 *
 * ```ts
 * import { Redis } from 'ioredis';
 * import { Pool } from 'pg';
 * import { GatedClaimer } from 'twophase/gated';
 * import { PostgresClaimer } from 'twophase/postgres';
 * import { RedisClaimer } from 'twophase/redis';
 * const claimer = new GatedClaimer({
 *   gate: new RedisClaimer({ redis: new Redis() }, { prefix: 'payments', operationTimeoutMs: 200 }),
 *   truth: new PostgresClaimer({ pool: new Pool() }, { mode: 'transactional' }),
 * });
 * ```
 *
 * @module twophase/gated
 */
export { GatedClaimer, type GatedClaimerStats } from './gated-claimer';
export {
  GATED_CLAIMER_DEFAULTS,
  type GatedClaimerDependencies,
  type GatedClaimerOptions,
  type ResolvedGatedClaimerOptions,
} from './options';
