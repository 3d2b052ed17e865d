/**
 * Options and dependencies of the PostgreSQL claimer: TSDoc gives meaning, unit, default and
 * range; defaults live in one `Readonly<Required<…>>` constant; `resolveOptions` merges into a
 * copy and validates at construction, naming the field and the value.
 */
import type { Pool, PoolClient } from 'pg';
import { type Clock, ConfigurationError, consoleWarnLogger } from '../../src';
import { checkBoolean, checkInteger, checkKnownOptions, optionNames } from '../../src/adapter-kit';
import { DEFAULT_SCHEMA, quoteIdentifier } from './identifiers';
import type { TransactionPort } from './transaction-port';

/** A pino-compatible logger (`logger.warn({ key }, 'message')`). */
export interface PostgresClaimerLogger {
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/**
 * What the claimer is given. It never opens connections of its own.
 * @typeParam Tx - the transaction object the handler gets as `ctx.transaction`: a `pg`
 *   PoolClient (default), or the transaction object of the library behind `transactions`.
 */
export interface PostgresClaimerDependencies<Tx = PoolClient> {
  /**
   * A `pg` Pool the caller created and owns. The claimer borrows clients from it (one per
   * operation in standalone mode; one per delivery, for the handler's whole run, in
   * transactional mode: size the pool above the consumer's concurrency) and never ends it.
   */
  readonly pool: Pool;
  /**
   * Where warnings go (pino-compatible). Default: the core's `consoleWarnLogger`, one JSON line
   * per warning on stderr. Repeated session warnings (a claim's session that could not be ended
   * cleanly, for example during a `pg_terminate_backend` storm) are rate-limited: a few per 10 s,
   * then one summary line with the count.
   */
  readonly logger?: PostgresClaimerLogger;
  /** Monotonic local clock, ms, for operation deadlines only. Default `performance.now()`. */
  readonly clock?: Clock;
  /**
   * Transactional mode only: run each claim inside a transaction of the application's database
   * library (Drizzle's, Prisma's…) instead of a transaction on a client of `pool`; the handler
   * gets that library's transaction object as `ctx.transaction` (docs/postgres.md, "The
   * transaction port"). The claimer still uses `pool` for the attempt count (one short
   * statement per claim, while the library's transaction is open: size the pools so both fit),
   * `peek` and `ready`. Needs migration 4. Not with `transactionBatch: 'per-chunk'` nor
   * `tenantOf` (ConfigurationError). Default: none (transactions on `pool`'s clients).
   */
  readonly transactions?: TransactionPort<Tx>;
}

/**
 * How claims relate to the handler's effect.
 * - `standalone`: each claim, commit, release and extend is its own auto-committed statement: an
 *   ordinary claimer beside any effect (same guarantee as the Redis claimer).
 * - `transactional`: the inbox mode. Each acquired claim opens a transaction on a pool client;
 *   the handler writes its effect through `ctx.transaction`; `commit` marks the key completed and
 *   COMMITs both, `release` rolls both back. See docs/postgres.md.
 */
export type PostgresClaimerMode = 'standalone' | 'transactional';

/**
 * How the transactional mode groups claims into transactions (docs/postgres.md, "Kafka batch mode").
 * - `per-record` (default): one transaction per delivery; `claimMany` is not offered.
 * - `per-chunk`: `claimMany` (the Kafka source's claim of a chunk of one partition's records)
 *   opens ONE transaction for the chunk's keys: one COMMIT per chunk. Trade-off: one failing
 *   record rolls back the whole chunk, whose other records then run again one by one, each in its
 *   own transaction. For `KafkaSource`; other sources should keep `per-record`.
 */
export type TransactionBatch = 'per-record' | 'per-chunk';

/** Options of `PostgresClaimer`. */
export interface PostgresClaimerOptions {
  /** Schema holding the inbox tables (as migrated). Default `twophase`. */
  readonly schema?: string;
  /** Default `standalone`. */
  readonly mode?: PostgresClaimerMode;
  /** Transactional mode only: `per-record` (default) or `per-chunk` (see {@link TransactionBatch}). */
  readonly transactionBatch?: TransactionBatch;
  /**
   * Claims go to the tenant inbox (`twophase_tenant_inbox`, migration 2) with the tenant this
   * function returns for the claim's key; a tenant the tenants table does not hold is refused by
   * the database (the consumer dead-letters with reason `invalid_key`). Keys are unique per
   * tenant. Default: none, claims go to the platform inbox.
   */
  readonly tenantOf?: (key: string) => string;
  /**
   * Also store the readable key (`key_text`) beside its digest, for `twophase keys diagnose`.
   * Keys can hold personal data: off by default.
   */
  readonly keepKeyText?: boolean;
  /**
   * Deadline of each store operation (claim, claimMany, commit, release, extend; in
   * transactional mode each statement the claimer sends), in ms, including the wait for a pool
   * client. Past it the operation rejects with `ClaimerUnavailableError`. Default 2000; range
   * [10, 60000].
   */
  readonly operationTimeoutMs?: number;
  /** How long `ready()` may take, in ms. Default 10000; range [10, 600000]. */
  readonly readyTimeoutMs?: number;
  /**
   * Largest commit result, in bytes of UTF-8 JSON. The stored outcome is bounded to 4096 bytes
   * by a CHECK, and wraps the result; a result that still does not fit once stored is dropped
   * (the key is completed without it, with a warning). Default 4000; range [1, 4000].
   */
  readonly maxResultBytes?: number;
}

/** The options after defaults and validation. */
export interface ResolvedPostgresClaimerOptions {
  readonly schemaName: string;
  /** Quoted schema. */
  readonly schema: string;
  readonly mode: PostgresClaimerMode;
  readonly transactionBatch: TransactionBatch;
  readonly tenantOf: ((key: string) => string) | undefined;
  readonly keepKeyText: boolean;
  readonly operationTimeoutMs: number;
  readonly readyTimeoutMs: number;
  readonly maxResultBytes: number;
}

/** Defaults of {@link PostgresClaimerOptions}. */
export const POSTGRES_CLAIMER_DEFAULTS: Readonly<Required<Omit<PostgresClaimerOptions, 'tenantOf'>>> = {
  schema: DEFAULT_SCHEMA,
  mode: 'standalone',
  transactionBatch: 'per-record',
  keepKeyText: false,
  operationTimeoutMs: 2000,
  readyTimeoutMs: 10_000,
  maxResultBytes: 4000,
};

/** Every name each argument of `new PostgresClaimer(dependencies, options)` accepts. */
export const DEPENDENCY_NAMES = optionNames<PostgresClaimerDependencies>()(['pool', 'logger', 'clock', 'transactions']);
export const OPTION_NAMES = optionNames<PostgresClaimerOptions>()(['schema', 'mode', 'transactionBatch', 'tenantOf', 'keepKeyText', 'operationTimeoutMs', 'readyTimeoutMs', 'maxResultBytes']);

/**
 * Refuses unknown names in the dependencies, naming the closest known one; an option passed among
 * them (`{ pool, mode: 'transactional' }`) is named as such, since it would otherwise leave the
 * default (`standalone`) in force.
 * @throws ConfigurationError naming the field
 */
export function checkDependencyNames(dependencies: unknown): void {
  if (dependencies && typeof dependencies === 'object') {
    const misplaced = Object.keys(dependencies).find((name) => OPTION_NAMES.includes(name));
    if (misplaced !== undefined) {
      throw new ConfigurationError(`PostgresClaimer dependencies: "${misplaced}" is an option, not a dependency; pass it in the second argument: new PostgresClaimer({ pool }, { ${misplaced} })`);
    }
  }
  checkKnownOptions('PostgresClaimer dependencies', dependencies, DEPENDENCY_NAMES);
}

/**
 * Merges `options` over the defaults into a new object and validates every field.
 * @throws ConfigurationError naming the field and the value; an unknown name with the closest known one ("did you mean")
 */
export function resolveOptions(options: PostgresClaimerOptions = {}): ResolvedPostgresClaimerOptions {
  checkKnownOptions('PostgresClaimer options', options, OPTION_NAMES);
  options = (options as PostgresClaimerOptions | null) ?? {};
  const schemaName = options.schema ?? POSTGRES_CLAIMER_DEFAULTS.schema;
  const mode = options.mode ?? POSTGRES_CLAIMER_DEFAULTS.mode;
  if (mode !== 'standalone' && mode !== 'transactional') {
    throw new ConfigurationError(`mode must be "standalone" or "transactional", got ${JSON.stringify(mode)}`);
  }
  const transactionBatch = options.transactionBatch ?? POSTGRES_CLAIMER_DEFAULTS.transactionBatch;
  if (transactionBatch !== 'per-record' && transactionBatch !== 'per-chunk') {
    throw new ConfigurationError(`transactionBatch must be "per-record" or "per-chunk", got ${JSON.stringify(transactionBatch)}`);
  }
  if (transactionBatch === 'per-chunk' && mode !== 'transactional') {
    throw new ConfigurationError('transactionBatch "per-chunk" needs mode "transactional" (standalone claims have no transaction to share)');
  }
  if (options.tenantOf !== undefined && typeof options.tenantOf !== 'function') {
    throw new ConfigurationError(`tenantOf must be a function (key) => tenant, got ${typeof options.tenantOf}`);
  }
  const resolved: ResolvedPostgresClaimerOptions = {
    schemaName,
    schema: quoteIdentifier('schema', schemaName),
    mode,
    transactionBatch,
    tenantOf: options.tenantOf,
    keepKeyText: options.keepKeyText ?? POSTGRES_CLAIMER_DEFAULTS.keepKeyText,
    operationTimeoutMs: options.operationTimeoutMs ?? POSTGRES_CLAIMER_DEFAULTS.operationTimeoutMs,
    readyTimeoutMs: options.readyTimeoutMs ?? POSTGRES_CLAIMER_DEFAULTS.readyTimeoutMs,
    maxResultBytes: options.maxResultBytes ?? POSTGRES_CLAIMER_DEFAULTS.maxResultBytes,
  };
  checkBoolean('keepKeyText', resolved.keepKeyText);
  checkInteger('operationTimeoutMs', resolved.operationTimeoutMs, 10, 60_000);
  checkInteger('readyTimeoutMs', resolved.readyTimeoutMs, 10, 600_000);
  checkInteger('maxResultBytes', resolved.maxResultBytes, 1, 4000);
  return resolved;
}


/** The default logger: the core's `consoleWarnLogger` (one JSON line per warning or error, on stderr). */
export const consoleLogger: PostgresClaimerLogger = consoleWarnLogger;
