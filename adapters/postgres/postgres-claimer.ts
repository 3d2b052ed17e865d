/**
 * PostgresClaimer: the claim contract on PostgreSQL through a caller-owned `pg` Pool, standalone
 * or transactional (the inbox mode).
 */
import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient, QueryResultRow } from 'pg';
import { type Claimer, type ClaimOptions, type ClaimResult, type Clock, ConfigurationError as ClaimerConfigurationError, type JsonValue } from '../../src';
import { LeaseReceipt, LogLimiter, NonAcquiredReceipt, validateClaimOptions, type ClaimManyEntry, type ClaimRequest, type KeyPeek, monotonicClock, validateKey } from '../../src/adapter-kit';
import { toClaimerError } from './errors';
import { type KeyDigests, keyDigests, sha256 } from './key-digest';
import {
  consoleLogger,
  type PostgresClaimerDependencies,
  type PostgresClaimerLogger,
  type PostgresClaimerOptions,
  checkDependencyNames,
  resolveOptions,
  type ResolvedPostgresClaimerOptions,
} from './options';
import { borrow } from './pool-client';
import { checkSchema } from './startup-checks';
import { conflictError, runWithin, storedResult } from './statement-runner';
import { type ClaimRow, claimMany as claimManySql, claimOne } from './statements/claim';
import { StandaloneLease } from './standalone-lease';
import { claimInTransaction } from './transaction-lease';
import { claimThroughPort } from './port-lease';
import type { TransactionPort } from './transaction-port';
import { COMPLETION_FUNCTION_VERSION, REQUIRED_PORT_VERSION } from './migrations';
import { claimChunk } from './chunk-claim';
import { lockHalves, peekStandalone, peekTransactional } from './statements/peek';

const ABSENT: KeyPeek = Object.freeze({ state: 'absent', attempts: 0 });
import { checkPeerVersion } from '../../src/adapter-kit';
import { SUPPORTED_RANGE } from './peer';

/**
 * A {@link Claimer} backed by PostgreSQL (kind `distributed`). Tables, statuses and the
 * migrations: see `migrations/` and docs/postgres.md.
 *
 * **Standalone mode** (default): every operation is one auto-committed statement on a client
 * borrowed from the pool for that statement. A claim is one call of the `twophase_claim`
 * function (an `INSERT … ON CONFLICT DO NOTHING`, else a takeover `UPDATE` that re-checks the row
 * it read: never read-then-write). The lease ends at `expires_at`, judged by the server clock
 * (`clock_timestamp()`), never the client's. commit, release and extend compare the owner token
 * and the fencing token. A completed key is done until `expires_at` (its retention, `doneTtlMs`).
 * Fencing tokens come from one sequence: they strictly increase per key, also after a row was
 * purged. `claimMany` claims a batch in one statement (one round trip).
 *
 * **Transactional mode**: see docs/postgres.md, "Transactional mode (the inbox)". An acquired claim holds a pool client
 * with an open transaction until its receipt is committed (COMMIT) or released (ROLLBACK); the
 * consumer hands that transaction to the handler as `ctx.transaction`. `claimMany` is offered only
 * with `transactionBatch: 'per-chunk'`: it claims a chunk of keys into ONE shared transaction
 * (chunk-transaction.ts); per record it would open one transaction per record ahead of the handlers.
 *
 * **Outages.** Each operation has its own deadline (`operationTimeoutMs`, including the wait for
 * a pool client) and rejects with {@link twophase!ClaimerUnavailableError} past it or on any connection
 * error; it never guesses a state. A client whose connection failed is destroyed, never reused.
 * When PostgreSQL returns, the pool connects again; nothing needs re-creating.
 */
export class PostgresClaimer<Tx = PoolClient> implements Claimer {
  /** Claims live in PostgreSQL, shared by every replica. */
  readonly kind = 'distributed' as const;
  /** True in transactional mode: the consumer then refuses `failOpen` (see {@link Claimer.transactional}). */
  readonly transactional: boolean;
  /** True with `transactionBatch: 'per-chunk'`: batch claims share one transaction (see {@link Claimer.sharesTransactions}). */
  readonly sharesTransactions: boolean;
  /**
   * Claims many keys in one round trip (standalone mode), or into one shared transaction in two
   * round trips (transactional mode with `transactionBatch: 'per-chunk'`); undefined otherwise.
   */
  readonly claimMany?: (requests: readonly ClaimRequest[]) => Promise<ClaimManyEntry[]>;

  /** @internal */ readonly pool: Pool;
  /** @internal The database library's transactions (transactional mode), or undefined: transactions on `pool`'s clients. */
  readonly transactions: TransactionPort<Tx> | undefined;
  /** @internal */ readonly options: ResolvedPostgresClaimerOptions;
  /** @internal */ readonly logger: PostgresClaimerLogger;
  /** @internal */ readonly clock: Clock;
  /** @internal Rate limit of repeated session warnings (a few per window, then a summary). */
  readonly warnings: LogLimiter;
  /**
   * @internal True once `ready()` found migration 7 applied: a per-record transaction completes
   * through `twophase_complete` (planned once per session) instead of the inline statement.
   */
  completesInFunction = false;

  /**
   * @throws ConfigurationError for an invalid option or a missing pool
   */
  constructor(dependencies: PostgresClaimerDependencies<Tx>, options: PostgresClaimerOptions = {}) {
    checkDependencyNames(dependencies);
    this.options = resolveOptions(options);
    if (!dependencies?.pool || typeof dependencies.pool.connect !== 'function') {
      throw new ClaimerConfigurationError('PostgresClaimer needs { pool }: a pg Pool the application created');
    }
    this.pool = dependencies.pool;
    this.logger = dependencies.logger ?? consoleLogger;
    checkPeerVersion('pg', SUPPORTED_RANGE, this.logger);
    this.clock = dependencies.clock ?? monotonicClock;
    const logger = this.logger;
    this.warnings = new LogLimiter({ debug: () => undefined, info: () => undefined, warn: (obj, msg) => logger.warn(obj, msg), error: (obj, msg) => logger.error(obj, msg) }, { claimer: 'postgres' });
    this.transactions = checkPort(dependencies.transactions, this.options);
    this.transactional = this.options.mode === 'transactional';
    this.sharesTransactions = this.transactional && this.options.transactionBatch === 'per-chunk';
    if (this.options.mode === 'standalone') this.claimMany = (requests) => this.claimBatch(requests);
    else if (this.options.transactionBatch === 'per-chunk') this.claimMany = (requests) => claimChunk(this.native, requests);
  }

  /** This claimer as the modules of the paths without a port see it (their transaction is a pool client). */
  private get native(): PostgresClaimer {
    return this as unknown as PostgresClaimer;
  }

  /** `standalone` or `transactional`. */
  get mode(): ResolvedPostgresClaimerOptions['mode'] {
    return this.options.mode;
  }

  /** The options in force, defaults applied (the name every adapter uses; see `AdapterSurface`). */
  get settings(): ResolvedPostgresClaimerOptions {
    return this.options;
  }

  /**
   * Checks that the inbox table exists with the expected shape (called by the consumer's
   * `start()`); fails closed.
   * @throws SchemaMismatchError when a migration is missing or the table differs
   * @throws ClaimerUnavailableError when PostgreSQL cannot be reached within `readyTimeoutMs`
   */
  async ready(): Promise<void> {
    const what = 'ready';
    const borrowed = await borrow(this.pool, what, this.options.readyTimeoutMs);
    try {
      const applied = await checkSchema(borrowed.client, this.options.schemaName, this.options.schema, this.options.tenantOf !== undefined, this.transactions ? [REQUIRED_PORT_VERSION] : []);
      this.completesInFunction = applied.includes(COMPLETION_FUNCTION_VERSION);
    } catch (error) {
      borrowed.noteError(error);
      throw toClaimerError(error, what);
    } finally {
      borrowed.giveBack();
    }
  }

  /** {@inheritDoc twophase!Claimer.claim} */
  async claim(key: string, options: ClaimOptions): Promise<ClaimResult> {
    validateKey(key);
    validateClaimOptions(options);
    const tenant = this.tenantOf(key);
    const digests = keyDigests(key, tenant);
    if (this.transactions) {
      // A library that builds its transaction object over the claimer's own pool's client: the path without a port.
      const over = this.transactions.overPoolClient;
      if (over !== undefined && over.pool === this.pool) return claimInTransaction(this.native, key, tenant, digests, options, (client) => over.wrap(client));
      return claimThroughPort(this, this.transactions, key, digests, options);
    }
    if (this.options.mode === 'transactional') return claimInTransaction(this.native, key, tenant, digests, options);
    const owner = randomUUID();
    const rows = await this.query<ClaimRow>(`claim of "${key}"`, claimOne(this.options.schema, tenant !== undefined), [
      ...(tenant === undefined ? [] : [tenant]),
      ...this.claimParams(key, digests, options, owner),
      null,
    ]);
    return this.toClaimResult(key, tenant, digests, owner, options, rows[0]!);
  }

  /** {@inheritDoc twophase!Claimer.peek} */
  async peek(key: string): Promise<KeyPeek> {
    validateKey(key);
    const tenant = this.tenantOf(key);
    const digests = keyDigests(key, tenant);
    const tenantParams = tenant === undefined ? [] : [tenant];
    const hasTenant = tenant !== undefined;
    if (this.options.mode === 'transactional') {
      const [row] = await this.query<{ done: boolean; locked: boolean; attempts: number }>(`peek of "${key}"`, peekTransactional(this.options.schema, hasTenant), [
        ...tenantParams,
        digests.key,
        digests.scope,
        ...lockHalves(digests.lockId),
      ]);
      if (row!.done) return { state: 'done', attempts: row!.attempts };
      if (row!.locked) return { state: 'busy', attempts: row!.attempts };
      return row!.attempts > 0 ? { state: 'failed', attempts: row!.attempts } : ABSENT;
    }
    const [row] = await this.query<{ status: string; attempt: number; live: boolean }>(`peek of "${key}"`, peekStandalone(this.options.schema, hasTenant), [...tenantParams, digests.key]);
    if (!row) return ABSENT;
    if (row.status === 'processing') return { state: row.live ? 'busy' : 'failed', attempts: row.attempt };
    // A completed or released row past its retention is forgotten; a dead-lettered one restarts at 1.
    if (!row.live || row.status === 'failed_permanent') return ABSENT;
    return { state: row.status === 'completed' ? 'done' : 'failed', attempts: row.attempt };
  }

  private async claimBatch(requests: readonly ClaimRequest[]): Promise<ClaimManyEntry[]> {
    const entries: (ClaimManyEntry | undefined)[] = new Array(requests.length);
    const valid: { index: number; key: string; tenant: string | undefined; digests: KeyDigests; owner: string; options: ClaimOptions }[] = [];
    requests.forEach((request, index) => {
      try {
        validateKey(request.key);
        validateClaimOptions(request.options);
        const tenant = this.tenantOf(request.key);
        valid.push({ index, key: request.key, tenant, digests: keyDigests(request.key, tenant), owner: randomUUID(), options: request.options });
      } catch (error) {
        entries[index] = { ok: false, error: error as Error };
      }
    });
    if (valid.length > 0) {
      const tenantMode = this.options.tenantOf !== undefined;
      const columns = valid.map((v) => this.claimParams(v.key, v.digests, v.options, v.owner));
      const arrays = [0, 1, 2, 3, 4].map((i) => columns.map((c) => c[i]));
      const params = tenantMode ? [valid.map((v) => v.tenant), ...arrays] : arrays;
      const rows = await this.query<ClaimRow & { ord: string }>(`claimMany of ${valid.length} keys`, claimManySql(this.options.schema, tenantMode), params);
      rows.forEach((row, i) => {
        const v = valid[i]!;
        try {
          entries[v.index] = { ok: true, result: this.toClaimResult(v.key, v.tenant, v.digests, v.owner, v.options, row) };
        } catch (error) {
          entries[v.index] = { ok: false, error: error as Error };
        }
      });
    }
    return entries as ClaimManyEntry[];
  }

  /** Parameters of one claim after the tenant: key digest, key text, fingerprint digest, owner, lease ms. */
  private claimParams(key: string, digests: KeyDigests, options: ClaimOptions, owner: string): unknown[] {
    return [digests.key, this.options.keepKeyText ? key : null, fingerprintDigest(options), owner, options.leaseTtlMs];
  }

  /** @internal Turns a claim function row into a ClaimResult (standalone mode). */
  toClaimResult(key: string, tenant: string | undefined, digests: KeyDigests, owner: string, options: ClaimOptions, row: ClaimRow): ClaimResult {
    switch (row.state) {
      case 'acquired': {
        const lease = { key, ownerToken: owner, fencingToken: Number(row.fencing_token) };
        const ops = new StandaloneLease(this.native, tenant, digests, options.doneTtlMs);
        return { state: 'acquired', attempt: row.attempt, receipt: new LeaseReceipt(lease, ops, options.doneTtlMs, this.options.maxResultBytes) };
      }
      case 'done':
        return { state: 'done', receipt: new NonAcquiredReceipt(key, 'done'), result: storedResult(row.outcome) as JsonValue };
      case 'busy':
        return { state: 'busy', receipt: new NonAcquiredReceipt(key, 'busy') };
      case 'conflict':
        throw conflictError(key, row.stored_fingerprint, options);
    }
  }

  /** @internal The tenant of a key, or undefined for the platform inbox. */
  tenantOf(key: string): string | undefined {
    const of = this.options.tenantOf;
    if (!of) return undefined;
    const tenant = of(key);
    if (typeof tenant !== 'string' || tenant.length === 0) {
      throw new ClaimerConfigurationError(`tenantOf returned ${JSON.stringify(tenant)} for key "${key}"; it must return a non-empty string`);
    }
    return tenant;
  }

  /** @internal Milliseconds left before `deadlineAt` (local clock). */
  remaining(deadlineAt: number): number {
    return deadlineAt - this.clock.now();
  }

  /**
   * @internal One auto-committed statement on a borrowed client, under the operation deadline.
   * @throws ClaimerUnavailableError (or a classified error, see errors.ts)
   */
  async query<R extends QueryResultRow>(what: string, text: string, values: readonly unknown[]): Promise<R[]> {
    const deadlineAt = this.clock.now() + this.options.operationTimeoutMs;
    const borrowed = await borrow(this.pool, what, this.options.operationTimeoutMs);
    try {
      return await runWithin<R>(borrowed, what, text, values, this.remaining(deadlineAt));
    } finally {
      borrowed.giveBack();
    }
  }
}

/**
 * The `transactions` dependency, checked against the options.
 * @throws ConfigurationError for a port without `name`, `transaction` and `query`, or with an option it cannot serve
 */
function checkPort<Tx>(port: TransactionPort<Tx> | undefined, options: ResolvedPostgresClaimerOptions): TransactionPort<Tx> | undefined {
  if (port === undefined) return undefined;
  if (port === null || typeof port !== 'object' || typeof port.transaction !== 'function' || typeof port.query !== 'function' || typeof port.name !== 'string') {
    throw new ClaimerConfigurationError('PostgresClaimer: transactions must be a transaction port { name, transaction(work, limits), query(tx, text, values) }, e.g. drizzleTransactions(db) or pgTransactions(pool)');
  }
  if (options.mode !== 'transactional') {
    throw new ClaimerConfigurationError(`PostgresClaimer: transactions (${port.name}) needs mode "transactional": a standalone claim has no transaction to run in`);
  }
  if (options.transactionBatch === 'per-chunk') {
    throw new ClaimerConfigurationError(
      `PostgresClaimer: transactions (${port.name}) cannot be used with transactionBatch "per-chunk": a chunk's handlers run one after the other in one shared transaction that twophase commits once all committed, but a library's transaction ends when its callback returns, so each claim needs its own; use "per-record"`,
    );
  }
  if (options.tenantOf !== undefined) {
    throw new ClaimerConfigurationError(`PostgresClaimer: transactions (${port.name}) does not serve the tenant inbox (tenantOf) yet; use the claimer without transactions (ctx.transaction is then a pg PoolClient)`);
  }
  return port;
}

function fingerprintDigest(options: ClaimOptions): Buffer | null {
  return options.fingerprint === undefined ? null : sha256(options.fingerprint);
}

