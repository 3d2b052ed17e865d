/**
 * PostgresClaimer: the claim contract on PostgreSQL through a caller-owned `pg` Pool, standalone
 * or transactional (the inbox mode).
 */
import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { type Claimer, type ClaimOptions, type ClaimResult, ConfigurationError as ClaimerConfigurationError } from '../../src';
import { checkPeerVersion, LogLimiter, validateClaimOptions, type ClaimManyEntry, type ClaimRequest, type KeyPeek, monotonicClock, validateKey } from '../../src/adapter-kit';
import { claimChunk } from './chunk-claim';
import { PoolClaimSession } from './claim-session';
import { toClaimerError } from './errors';
import { type KeyDigests, keyDigests, sha256 } from './key-digest';
import { COMPLETION_FUNCTION_VERSION, REQUIRED_PORT_VERSION } from './migrations';
import { checkDependencyNames, consoleLogger, type PostgresClaimerDependencies, type PostgresClaimerOptions, resolveOptions, type ResolvedPostgresClaimerOptions } from './options';
import { SUPPORTED_RANGE } from './peer';
import { borrow, type BorrowedClient } from './pool-client';
import { claimThroughPort } from './port-lease';
import { standaloneClaimResult } from './standalone-lease';
import { checkSchema } from './startup-checks';
import { type ClaimRow, claimMany as claimManySql, claimOne } from './statements/claim';
import { lockHalves, peekStandalone, peekTransactional } from './statements/peek';
import { claimInTransaction } from './transaction-lease';
import type { EnteredPoolClient, TransactionPort } from './transaction-port';
import { runWithin } from './statement-runner';

const ABSENT: KeyPeek = Object.freeze({ state: 'absent', attempts: 0 });

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

  /** What the modules of each mode need of this claimer (claim-session.ts). */
  private readonly session: PoolClaimSession;
  /** The database library's transactions (transactional mode), or undefined: transactions on the pool's clients. */
  private readonly transactions: TransactionPort<Tx> | undefined;

  /**
   * @throws ConfigurationError for an invalid option or a missing pool
   */
  constructor(dependencies: PostgresClaimerDependencies<Tx>, options: PostgresClaimerOptions = {}) {
    const resolved = resolveOptions(options);
    if (!dependencies?.pool || typeof dependencies.pool.connect !== 'function') {
      throw new ClaimerConfigurationError('PostgresClaimer needs { pool }: a pg Pool the application created');
    }
    checkDependencyNames(dependencies);
    const logger = dependencies.logger ?? consoleLogger;
    checkPeerVersion('pg', SUPPORTED_RANGE, logger);
    const warnings = new LogLimiter({ debug: () => undefined, info: () => undefined, warn: (obj, msg) => logger.warn(obj, msg), error: (obj, msg) => logger.error(obj, msg) }, { claimer: 'postgres' });
    this.session = new PoolClaimSession(dependencies.pool, resolved, logger, dependencies.clock ?? monotonicClock, warnings);
    this.transactions = checkPort(dependencies.transactions, resolved);
    this.transactional = resolved.mode === 'transactional';
    this.sharesTransactions = this.transactional && resolved.transactionBatch === 'per-chunk';
    if (resolved.mode === 'standalone') this.claimMany = (requests) => this.claimBatch(requests);
    else if (resolved.transactionBatch === 'per-chunk') this.claimMany = (requests) => claimChunk(this.session, requests);
  }

  private get options(): ResolvedPostgresClaimerOptions {
    return this.session.options;
  }

  /** `standalone` or `transactional`. */
  get mode(): ResolvedPostgresClaimerOptions['mode'] {
    return this.options.mode;
  }

  /** For the consumer's start line: `{ store: 'postgresql', mode, schema }` (see {@link Claimer.describe}). */
  describe(): Readonly<Record<string, string>> {
    return { store: 'postgresql', mode: this.options.mode, schema: this.options.schemaName };
  }

  /**
   * In transactional mode on the pool's own clients, each delivery in flight holds a pool client
   * for its whole transaction: a pool whose `max` (pg's `options.max`, default 10) is below the
   * consumer's `concurrency` makes the others wait for a client. Says so, naming both numbers and
   * the fix. With a transaction port whose library can build its object over the claimer's own
   * clients (`overPoolClient`) but sends through another pool, says that each claim takes the
   * slower path inside the library's transaction, and how to give the claimer the library's pool.
   * Undefined otherwise (see {@link Claimer.startWarning}).
   */
  startWarning(options: { readonly concurrency: number }): string | undefined {
    const port = this.transactions;
    if (port !== undefined && port.overPoolClient?.pool !== this.session.pool) return this.otherPoolWarning(port);
    if (this.options.mode !== 'transactional' || this.options.transactionBatch === 'per-chunk') return undefined;
    const max = (this.session.pool as { options?: { max?: unknown } }).options?.max ?? 10;
    if (typeof max !== 'number' || max >= options.concurrency) return undefined;
    return (
      `PostgresClaimer (transactional): the pg Pool's max is ${max} but the consumer's concurrency is ${options.concurrency}; each delivery in flight holds a pool client for its whole transaction, so ${options.concurrency - max} of them wait for a client (and other users of the pool wait too). ` +
      `Raise the pool's max to at least ${options.concurrency}${port === undefined ? '' : `, plus the connections ${port.name}'s calls outside ctx.transaction take,`} or lower concurrency to ${max}`
    );
  }

  private otherPoolWarning(port: TransactionPort<Tx>): string | undefined {
    const libraryPool = port.overPoolClient?.pool;
    if (libraryPool === undefined || libraryPool === this.session.pool) return undefined;
    return (
      `PostgresClaimer: ${port.name} sends through another pg Pool than the claimer's, so each claim runs inside ${port.name}'s own transaction ` +
      "(6 round trips a message instead of 3, and a second connection for a moment); give the claimer the Pool the library sends through " +
      '(drizzle(pool), kyselyTransactions(db, { pool }), typeormPool(dataSource), new PrismaPg(pool) with inboxAdapter) to run each claim as without a port'
    );
  }

  /** The options in force, defaults applied (the name every adapter uses; see `AdapterSurface`). */
  get settings(): ResolvedPostgresClaimerOptions {
    return this.options;
  }

  /**
   * Checks that the inbox table exists with the expected shape (called by the consumer's
   * `start()`); fails closed.
   * With a port whose library enters its transaction over the claimer's own clients
   * ({@link EnteredPoolClient}, Prisma's `inboxAdapter`), also enters and leaves it once in an
   * empty transaction, so a wiring that cannot run a claim fails here, not at every delivery.
   * @throws SchemaMismatchError when a migration is missing or the table differs
   * @throws ClaimerUnavailableError when PostgreSQL cannot be reached within `readyTimeoutMs`
   * @throws ConfigurationError when the port's library cannot enter its transaction over the claimer's client
   */
  async ready(): Promise<void> {
    const what = 'ready';
    const borrowed = await borrow(this.session.pool, what, this.options.readyTimeoutMs);
    try {
      const applied = await checkSchema(borrowed.client, this.options.schemaName, this.options.schema, this.options.tenantOf !== undefined, this.transactions ? [REQUIRED_PORT_VERSION] : []);
      this.session.completesInFunction = applied.includes(COMPLETION_FUNCTION_VERSION);
      const over = this.transactions?.overPoolClient;
      if (over !== undefined && 'enter' in over && over.pool === this.session.pool) await enterOnce(borrowed, over, this.options.readyTimeoutMs);
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
    const tenant = this.session.tenantOf(key);
    const digests = keyDigests(key, tenant);
    if (this.transactions) {
      // A library that builds its transaction object over the claimer's own pool's client: the path without a port.
      const over = this.transactions.overPoolClient;
      if (over !== undefined && over.pool === this.session.pool) return claimInTransaction(this.session, key, tenant, digests, options, over);
      return claimThroughPort(this.session, this.transactions, key, digests, options);
    }
    if (this.options.mode === 'transactional') return claimInTransaction(this.session, key, tenant, digests, options);
    const owner = randomUUID();
    const rows = await this.session.query<ClaimRow>(`claim of "${key}"`, claimOne(this.options.schema, tenant !== undefined), [
      ...(tenant === undefined ? [] : [tenant]),
      ...this.claimParams(key, digests, options, owner),
      null,
    ]);
    return standaloneClaimResult(this.session, key, tenant, digests, owner, options, rows[0]!);
  }

  /** {@inheritDoc twophase!Claimer.peek} */
  async peek(key: string): Promise<KeyPeek> {
    validateKey(key);
    const tenant = this.session.tenantOf(key);
    const digests = keyDigests(key, tenant);
    const tenantParams = tenant === undefined ? [] : [tenant];
    const hasTenant = tenant !== undefined;
    if (this.options.mode === 'transactional') {
      const ask = async (): Promise<KeyPeek> => {
        const [row] = await this.session.query<{ done: boolean; locked: boolean; attempts: number }>(`peek of "${key}"`, peekTransactional(this.options.schema, hasTenant), [
          ...tenantParams,
          digests.key,
          digests.scope,
          ...lockHalves(digests.lockId),
        ]);
        if (row!.done) return { state: 'done', attempts: row!.attempts };
        if (row!.locked) return { state: 'busy', attempts: row!.attempts };
        return row!.attempts > 0 ? { state: 'failed', attempts: row!.attempts } : ABSENT;
      };
      const first = await ask();
      // A run commits, then releases its lock: a snapshot taken before the COMMIT with pg_locks
      // read after the release looks failed. Asked again, the new snapshot follows that release,
      // so it sees the commit (done), a new run (busy), or an attempt that really failed.
      return first.state === 'failed' ? ask() : first;
    }
    const [row] = await this.session.query<{ status: string; attempt: number; live: boolean }>(`peek of "${key}"`, peekStandalone(this.options.schema, hasTenant), [...tenantParams, digests.key]);
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
        const tenant = this.session.tenantOf(request.key);
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
      const rows = await this.session.query<ClaimRow & { ord: string }>(`claimMany of ${valid.length} keys`, claimManySql(this.options.schema, tenantMode), params);
      rows.forEach((row, i) => {
        const v = valid[i]!;
        try {
          entries[v.index] = { ok: true, result: standaloneClaimResult(this.session, v.key, v.tenant, v.digests, v.owner, v.options, row) };
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

/**
 * Enters and leaves `over`'s library transaction once on `borrowed`'s client, inside a transaction
 * that is rolled back: what a claim does, with nothing claimed.
 * @throws the library's or the port's error (a ConfigurationError for a wiring that cannot work)
 */
async function enterOnce(borrowed: BorrowedClient, over: EnteredPoolClient<unknown>, timeoutMs: number): Promise<void> {
  const what = 'ready (entering the transaction port)';
  await runWithin(borrowed, what, 'BEGIN', undefined, timeoutMs);
  try {
    const entered = await over.enter(borrowed.client, { timeoutMs, maxWaitMs: timeoutMs });
    await entered.leave(false);
  } finally {
    await runWithin(borrowed, what, 'ROLLBACK', undefined, timeoutMs);
  }
}
