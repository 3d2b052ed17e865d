/**
 * Options and dependencies of the Redis claimer: TSDoc gives meaning, unit, default and range;
 * defaults live in one `Readonly<Required<…>>` constant; `resolveOptions` merges into a copy and
 * validates at construction, naming the field and the value.
 */
import type { Cluster, Redis } from 'ioredis';
import { type Clock, ConfigurationError, consoleWarnLogger, DEFAULT_MAX_RESULT_BYTES } from '../../src';
import { checkInteger, checkKnownOptions, optionNames } from '../../src/adapter-kit';
import { DEFAULT_PREFIX, validatePrefix } from './key-layout';

/**
 * A pino-compatible logger (`logger.warn({ policy }, 'message')`). Only `warn` and `error` are
 * used for problems; `info` and `debug` for startup facts.
 */
export interface RedisClaimerLogger {
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

/** What the claimer is given. It never opens connections of its own. */
export interface RedisClaimerDependencies {
  /**
   * An ioredis client the caller created and owns: a standalone `Redis` or a `Cluster`. The
   * claimer attaches `error` listeners (so client errors never crash the process), never quits
   * it, and connects it only when `ready()` finds it lazily unconnected (`lazyConnect`).
   */
  readonly redis: Redis | Cluster;
  /**
   * Where warnings go. Default: the core's default logger (`consoleWarnLogger`: warn and error as
   * one JSON line each on stderr, info and debug dropped), so claimer and consumer lines share a format.
   */
  readonly logger?: RedisClaimerLogger;
  /**
   * Monotonic local clock, ms. Used only to measure each operation's deadline; lease expiry is
   * never judged on it. Default: `performance.now()`.
   */
  readonly clock?: Clock;
}

/** Coalescing of concurrent operations into one script call (see {@link RedisClaimerOptions.coalesce}). */
export interface RedisCoalesceOptions {
  /**
   * How long the first operation of a batch waits for others, in ms. 0 (default) = until the
   * current event-loop turn ends (`setImmediate`), which adds no timer delay. Range [0, 50].
   */
  readonly windowMs?: number;
}

/** Options of `RedisClaimer`. */
export interface RedisClaimerOptions {
  /**
   * Namespace of every record key: `<prefix>:{<business key>}`. Non-empty, at most 128 bytes, no
   * `{`, `}` or NUL. Give each application (not each consumer group: namespace keys with
   * `namespaceKey()` for that) its own prefix. Default `twophase`.
   */
  readonly prefix?: string;
  /**
   * Deadline of each store operation (claim, claimMany, commit, release, extend), in ms, from the
   * call until its reply. Past it the operation rejects with `ClaimerUnavailableError`, and the
   * script, if Redis runs it later (a paused server, a resent command), refuses to write.
   * Keep it well under the broker's ack timeout. Default 2000; range [10, 60000].
   */
  readonly operationTimeoutMs?: number;
  /** How long `ready()` waits for the client to become ready, in ms. Default 10000; range [10, 600000]. */
  readonly readyTimeoutMs?: number;
  /** Largest commit result, in bytes of UTF-8 JSON. Default 4096; range [1, 1048576]. */
  readonly maxResultBytes?: number;
  /**
   * Send concurrent operations of one kind issued in the same event-loop turn (or `windowMs`) as
   * one multi-key script call (per hash slot on a Cluster), instead of one call each. Raises
   * throughput with many messages in flight; adds at most `windowMs` latency. `true` = `{}`.
   * Default `true` (see docs/redis.md for the measurements behind the default).
   */
  readonly coalesce?: boolean | RedisCoalesceOptions;
  /**
   * Largest number of keys in one script call (a coalesced batch or a chunk of `claimMany`).
   * Bounds how long one script holds Redis (about 2–5 µs per key). Default 128; range [1, 1000].
   */
  readonly maxBatchKeys?: number;
}

/** The options after defaults and validation. */
export interface ResolvedRedisClaimerOptions {
  readonly prefix: string;
  readonly operationTimeoutMs: number;
  readonly readyTimeoutMs: number;
  readonly maxResultBytes: number;
  /** undefined = coalescing off. */
  readonly coalesce: Readonly<Required<RedisCoalesceOptions>> | undefined;
  readonly maxBatchKeys: number;
}

/** Defaults of {@link RedisClaimerOptions}. */
export const REDIS_CLAIMER_DEFAULTS: Readonly<Required<Omit<RedisClaimerOptions, 'coalesce'>>> & {
  readonly coalesce: Readonly<Required<RedisCoalesceOptions>>;
} = {
  prefix: DEFAULT_PREFIX,
  operationTimeoutMs: 2000,
  readyTimeoutMs: 10_000,
  maxResultBytes: DEFAULT_MAX_RESULT_BYTES,
  coalesce: { windowMs: 0 },
  maxBatchKeys: 128,
};

/**
 * Merges `options` over the defaults into a new object and validates every field.
 * @throws ConfigurationError naming the field and the value
 */
export function resolveOptions(options: RedisClaimerOptions = {}): ResolvedRedisClaimerOptions {
  const prefix = options.prefix ?? REDIS_CLAIMER_DEFAULTS.prefix;
  validatePrefix('prefix', prefix);
  const coalesceOption = options.coalesce ?? true;
  let coalesce: Required<RedisCoalesceOptions> | undefined;
  if (coalesceOption !== false) {
    if (coalesceOption !== true && (typeof coalesceOption !== 'object' || coalesceOption === null)) {
      throw new ConfigurationError(`coalesce must be a boolean or an object, got ${JSON.stringify(coalesceOption)}`);
    }
    const windowMs = coalesceOption === true ? REDIS_CLAIMER_DEFAULTS.coalesce.windowMs : (coalesceOption.windowMs ?? 0);
    checkInteger('coalesce.windowMs', windowMs, 0, 50);
    coalesce = { windowMs };
  }
  const resolved: ResolvedRedisClaimerOptions = {
    prefix,
    operationTimeoutMs: options.operationTimeoutMs ?? REDIS_CLAIMER_DEFAULTS.operationTimeoutMs,
    readyTimeoutMs: options.readyTimeoutMs ?? REDIS_CLAIMER_DEFAULTS.readyTimeoutMs,
    maxResultBytes: options.maxResultBytes ?? REDIS_CLAIMER_DEFAULTS.maxResultBytes,
    coalesce,
    maxBatchKeys: options.maxBatchKeys ?? REDIS_CLAIMER_DEFAULTS.maxBatchKeys,
  };
  checkInteger('operationTimeoutMs', resolved.operationTimeoutMs, 10, 60_000);
  checkInteger('readyTimeoutMs', resolved.readyTimeoutMs, 10, 600_000);
  checkInteger('maxResultBytes', resolved.maxResultBytes, 1, 1_048_576);
  checkInteger('maxBatchKeys', resolved.maxBatchKeys, 1, 1000);
  return resolved;
}


/** The default logger: the core's, so the claimer's lines are JSON lines like the consumer's. */
export const consoleLogger: RedisClaimerLogger = consoleWarnLogger;

/** Every name each argument of `new RedisClaimer(dependencies, options)` accepts (issue #12 item 5). */
export const DEPENDENCY_NAMES = optionNames<RedisClaimerDependencies>()(['redis', 'logger', 'clock']);
export const OPTION_NAMES = optionNames<RedisClaimerOptions>()(['prefix', 'operationTimeoutMs', 'readyTimeoutMs', 'maxResultBytes', 'coalesce', 'maxBatchKeys']);
const COALESCE_NAMES = optionNames<RedisCoalesceOptions>()(['windowMs']);

/**
 * Refuses unknown names in both arguments; an option passed among the dependencies (`{ redis,
 * prefix }`) is named as such, since it would otherwise leave the shared default in force.
 * @throws ConfigurationError naming the field and the closest known name
 */
export function checkRedisClaimerArguments(dependencies: unknown, options: unknown): void {
  if (dependencies && typeof dependencies === 'object') {
    const misplaced = Object.keys(dependencies).find((name) => OPTION_NAMES.includes(name));
    if (misplaced !== undefined) {
      throw new ConfigurationError(
        `RedisClaimer dependencies: "${misplaced}" is an option, not a dependency; pass it in the second argument: new RedisClaimer({ redis }, { ${misplaced} })`,
      );
    }
  }
  checkKnownOptions('RedisClaimer dependencies', dependencies, DEPENDENCY_NAMES);
  checkKnownOptions('RedisClaimer options', options, OPTION_NAMES);
  const coalesce = (options as RedisClaimerOptions | undefined)?.coalesce;
  if (coalesce && typeof coalesce === 'object') checkKnownOptions('RedisClaimer options.coalesce', coalesce, COALESCE_NAMES);
}
