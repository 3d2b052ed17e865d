/**
 * RedisClaimer: the claim contract on Redis (standalone or Cluster) through ioredis.
 */
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { type Claimer, type ClaimOptions, type ClaimResult, type Clock, ClaimerUnavailableError, ConfigurationError } from '../../src';
import {
  commitEach,
  decodeResult,
  type LeaseOperations,
  LeaseReceipt,
  NonAcquiredReceipt,
  validateClaimOptions,
} from '../../src/adapter-kit';
import { Coalescer } from './coalescer';
import { recordKey, recordSlot, validateClientKeyPrefix } from './key-layout';
import {
  checkRedisClaimerArguments,
  consoleLogger,
  type RedisClaimerDependencies,
  type RedisClaimerLogger,
  type RedisClaimerOptions,
  resolveOptions,
  type ResolvedRedisClaimerOptions,
} from './options';
import { type CallReply, CLAIM_CODE, decodeClaimEntry, decodeLeaseEntry, decodePeekEntry, isDeadlinePassed, parseCallReply } from './reply-codes';
import { toClaimerError } from './redis-errors';
import { type LoadedScript, preloadScripts, runScript, SCRIPTS, type ScriptName } from './script-loader';
import { ServerClock } from './server-clock';
import { checkClientOptions, checkClusterMode, checkEvictionPolicy, describeRedisError, redisEndpoint, waitForReady } from './startup-checks';
import { checkPeerVersion, type ClaimManyEntry, type ClaimRequest, type CommitManyEntry, type CommitRequest, type KeyPeek, monotonicClock, validateKey } from '../../src/adapter-kit';
import { SUPPORTED_RANGE } from './peer';

/** Counters of one RedisClaimer since construction. Read them through {@link RedisClaimer.stats}. */
export interface RedisClaimerStats {
  /** Script calls sent to Redis (one call may carry many keys). */
  scriptCalls: number;
  /** Operations (keys) carried by those calls. */
  operations: number;
  /** NOSCRIPT replies recovered by re-sending the script source (after SCRIPT FLUSH, a restart, a failover). */
  scriptReloads: number;
  /** Operations that passed their `operationTimeoutMs` without a reply. */
  deadlinesExceeded: number;
  /** Script calls Redis ran after their deadline and that therefore wrote nothing. */
  lateCallsRefused: number;
  /** Operations failed at once because the client was not ready (down, reconnecting, closed). */
  notReady: number;
  /** `error` events of the client (and `node error` events of a Cluster) absorbed by the claimer. */
  clientErrors: number;
}

/** Per-key data of one operation waiting for its script call. */
interface OpItem {
  readonly key: string;
  /**
   * The ARGV entries after the deadline that every key of one call shares (TTLs, owner prefix,
   * reset flag; see the script's header). Operations whose shared entries differ go in different
   * calls.
   */
  readonly shared: readonly string[];
  /** This key's one ARGV entry (see the script's header). */
  readonly arg: string;
  /** Local clock ms after which the caller gets ClaimerUnavailableError. */
  readonly deadlineAt: number;
  /** Receives this key's raw entry, and the call's server time in µs (claim calls only; else 0). */
  resolve(entry: unknown, serverNowUs: number): void;
  reject(error: Error): void;
}

/** The shared ARGV entries of release calls, by reset flag. */
const NO_ARGS: readonly string[] = [];
const RELEASE_KEEP: readonly string[] = ['0'];
const RELEASE_RESET: readonly string[] = ['1'];
const RELEASE_UNCOUNT: readonly string[] = ['2'];

const ERROR_LOG_INTERVAL_MS = 10_000;
/**
 * Coalescing under load only: a coalesced operation is sent at once while no script call is in
 * flight (no added latency at low concurrency), and batched otherwise.
 */
const IDLE_CALLS = 1;
/**
 * A coalesced batch goes out as this many calls (each at least MIN_SPLIT_KEYS keys), so Redis runs
 * one while this process handles the other's reply. With one call per batch the two alternate and
 * each idles half the time (measured: about 0.5x the split throughput at 64 in flight). A batch too
 * small to give each call MIN_SPLIT_KEYS keys goes as one call: a call of a few keys costs about as
 * much as a call of many (about 3 µs of Redis and 5 µs of Node CPU per call, bench/redis/floor.ts).
 */
const COALESCED_SPLIT = 2;
const MIN_SPLIT_KEYS = 8;

/**
 * A {@link Claimer} backed by Redis through a caller-owned ioredis client (`Redis` or `Cluster`).
 * Kind `distributed`: every replica sharing the Redis sees the same claims.
 *
 * **Record.** One Redis string per business key at `<prefix>:{<business key>}` (braces escaped;
 * see `key-layout.ts`), holding state (leased, done, released), owner token, fencing token,
 * attempt count, fingerprint and the optional result (format in `lua/includes/record.lua`). Its
 * PX is the retention: `doneTtlMs` from the last claim or commit. After commit the record keeps
 * only state, fence, attempts, fingerprint and result: about 90 bytes plus key and result
 * (docs/redis.md gives the sizing formula). A release keeps the record (fence, attempts,
 * fingerprint) until that retention ends, so the next claim continues the count.
 *
 * **Transitions.** claim, commit, release and extend are each one Lua script (`lua/*.lua`),
 * atomic on the server, compare-owner-then-act. Lease expiry is decided by the server: the lease
 * end is stored in server time (`TIME` inside the script) and compared with `TIME`, never with the
 * client's clock (S24). A lease that expired and was not taken over stays its owner's: commit and
 * extend succeed until another claim takes the key.
 *
 * **Fencing tokens** strictly increase across acquisitions of one key, takeovers included. Only a
 * claim issues a token: `fence = max(stored fence + 1, server time in µs)` (`TIME` in the script).
 * While the record lives, the first term orders acquisitions. When it is gone, the second takes
 * over: a token issued at server time T is at most T (plus one per acquisition of that key faster
 * than one per µs, in practice none), and a record keeps the retention its claim set (≥ doneTtlMs ≥
 * leaseTtlMs ≥ 100 ms), so it expires no sooner than 100 ms after the token was issued, and the next
 * claim reads a later time. **Bound:** this holds while the server clock that runs the next claim
 * (after a failover, the new master's) is not behind the clock that issued the previous token by
 * the time elapsed since (at least 100 ms for an expired record). Evicted records (any
 * `maxmemory-policy` but `noeviction`, which `ready()` warns about) and records lost in a failover
 * narrow that margin to the time between issue and the next claim. Tokens are about 1.8e15 today
 * and stay below 2^53 (exact in a JS number) until the year 2255.
 *
 * **Batches.** `claimMany` and `commitMany` send their requests as one multi-key script call (per
 * hash slot on a Cluster, issued concurrently, chunked by `maxBatchKeys`). Each key takes one
 * script argument; what the keys of a call share (TTLs, the owner-token prefix) travels once per
 * call, so a call carries only keys of equal TTLs (the claimer groups them). With `coalesce` (default on),
 * concurrent single `claim()`, `commit()`, `release()` and `extend()` calls issued in the same
 * event-loop turn travel the same way. Whether ioredis auto-pipelining is on is the caller's choice
 * on their client; both work.
 *
 * **Outages.** Every operation has its own deadline (`operationTimeoutMs`) and rejects with
 * {@link ClaimerUnavailableError} past it. Nothing is queued while the client is not ready: the
 * operation fails at once. A call that reaches Redis after its deadline (a paused server, a
 * command ioredis resends after a reconnect) writes nothing: each script gets the deadline in
 * server time and refuses past it (see `server-clock.ts`). `READONLY` after a failover, connection
 * errors, `LOADING`, `BUSY`, `OOM` become ClaimerUnavailableError; `CROSSSLOT`, `MOVED` and
 * `WRONGTYPE` become `ConfigurationError`. A NOSCRIPT reply is recovered transparently and
 * counted in `stats.scriptReloads`. The client's `error` events are absorbed and logged (rate
 * limited), so they never crash the process; when Redis returns, the client reconnects (its own
 * `retryStrategy`) and operations resume without re-creating the claimer.
 *
 * Requires Redis ≥ 6.0 (`SET … KEEPTTL`, scripts replicated by effects); tested with 7.0.
 */
export class RedisClaimer implements Claimer {
  /** Claims live in Redis, shared by every replica. */
  readonly kind = 'distributed' as const;

  private readonly client: Redis | Cluster;
  private readonly isCluster: boolean;
  private readonly options: ResolvedRedisClaimerOptions;
  private readonly logger: RedisClaimerLogger;
  private readonly clock: Clock;
  private readonly serverClock: ServerClock;
  private readonly queues: Readonly<Record<ScriptName, Coalescer<OpItem>>> | undefined;
  private readonly counters: RedisClaimerStats = {
    scriptCalls: 0,
    operations: 0,
    scriptReloads: 0,
    deadlinesExceeded: 0,
    lateCallsRefused: 0,
    notReady: 0,
    clientErrors: 0,
  };
  private readonly tokenPrefix = randomBytes(12).toString('base64url');
  private tokenCounter = 0;
  private inFlight = 0;
  private idleWaiters: Array<() => void> = [];
  private closed = false;
  private closing: Promise<void> | undefined;
  private lastErrorLogAt = Number.NEGATIVE_INFINITY;
  private suppressedErrors = 0;
  /** The client's newest error event, named when an operation finds the client not ready. */
  private lastClientError: Error | undefined;

  /** Commits that `commitMany` gathers into its own calls; undefined outside a commitMany call. */
  private gathering: OpItem[] | undefined;
  /** The shared ARGV entries of the latest claim and commit, reused while the TTLs stay the same. */
  private claimShared: { leaseTtlMs: number; doneTtlMs: number; args: readonly string[] } | undefined;
  private commitShared: { doneTtlMs: number; args: readonly string[] } | undefined;

  private readonly operations: LeaseOperations = {
    commit: (lease, resultJson, doneTtlMs) =>
      this.submit('commit', lease.key, this.commitArgs(doneTtlMs), `${lease.fencingToken}|${lease.ownerToken}|${resultJson ?? ''}`, (entry) =>
        decodeLeaseEntry(entry, lease.key),
      ),
    release: (lease, resetAttempts, uncountAttempt) =>
      this.submit('release', lease.key, resetAttempts ? RELEASE_RESET : uncountAttempt ? RELEASE_UNCOUNT : RELEASE_KEEP, `${lease.fencingToken}|${lease.ownerToken}`, (entry) =>
        decodeLeaseEntry(entry, lease.key),
      ),
    extend: (lease, ttlMs) =>
      this.submit('extend', lease.key, [String(ttlMs)], `${lease.fencingToken}|${lease.ownerToken}`, (entry) => decodeLeaseEntry(entry, lease.key)),
  };

  private readonly onClientError = (error: unknown): void => {
    this.counters.clientErrors++;
    // Not instanceof: ioredis may create its errors in another realm (jest's sandbox, for one).
    if (typeof (error as Error | undefined)?.message === 'string') this.lastClientError = error as Error;
    const now = this.clock.now();
    if (now - this.lastErrorLogAt < ERROR_LOG_INTERVAL_MS) {
      this.suppressedErrors++;
      return;
    }
    this.logger.warn(
      { error: error instanceof Error ? error.message : String(error), suppressedSinceLastLog: this.suppressedErrors },
      'Redis client error; claim operations fail fast with ClaimerUnavailableError until the client is ready again',
    );
    this.lastErrorLogAt = now;
    this.suppressedErrors = 0;
  };

  /**
   * @param dependencies the caller's ioredis client, and optionally a logger and a clock
   * @param options see {@link RedisClaimerOptions}; validated here
   * @throws ConfigurationError for an invalid option, a client that is not an ioredis client, or
   *   an ioredis `keyPrefix` containing braces
   */
  constructor(dependencies: RedisClaimerDependencies, options: RedisClaimerOptions = {}) {
    checkRedisClaimerArguments(dependencies, options);
    const client = dependencies?.redis;
    if (!client || typeof client.evalsha !== 'function' || typeof client.on !== 'function') {
      throw new ConfigurationError('dependencies.redis must be an ioredis Redis or Cluster client');
    }
    this.client = client;
    this.isCluster = client.isCluster === true;
    this.options = resolveOptions(options);
    validateClientKeyPrefix(client.options?.keyPrefix);
    this.logger = dependencies.logger ?? consoleLogger;
    checkPeerVersion('ioredis', SUPPORTED_RANGE, this.logger);
    this.clock = dependencies.clock ?? monotonicClock;
    this.serverClock = new ServerClock(this.clock);
    const coalesce = this.options.coalesce;
    if (coalesce) {
      const queue = (op: ScriptName) => new Coalescer<OpItem>(coalesce.windowMs, this.options.maxBatchKeys, (items) => this.dispatch(op, items, true));
      this.queues = { claim: queue('claim'), commit: queue('commit'), release: queue('release'), extend: queue('extend'), peek: queue('peek') };
    }
    client.on('error', this.onClientError);
    if (this.isCluster) client.on('node error', this.onClientError);
  }

  /** A snapshot of the counters (see {@link RedisClaimerStats}). */
  get stats(): Readonly<RedisClaimerStats> {
    return { ...this.counters };
  }

  /** For the consumer's start line: `{ store: 'redis', prefix }` (see {@link Claimer.describe}). */
  describe(): Readonly<Record<string, string>> {
    return { store: 'redis', prefix: this.options.prefix };
  }

  /** The options in force, defaults applied. */
  get settings(): ResolvedRedisClaimerOptions {
    return this.options;
  }

  /**
   * Waits until the client is ready (connecting a `lazyConnect` client), then: refuses a plain
   * client on a cluster-mode server, learns the server clock, loads the scripts on every master,
   * warns when `maxmemory-policy` could evict records, and warns about client settings with no
   * bound on command latency. Safe to call more than once.
   * @throws ClaimerUnavailableError when the client is not ready within `readyTimeoutMs`
   * @throws ConfigurationError for a plain `Redis` client on a cluster-mode server
   */
  async ready(): Promise<void> {
    await waitForReady(this.client, this.options.readyTimeoutMs);
    try {
      await checkClusterMode(this.client);
      const [seconds, micros] = (await this.client.time()) as Array<number | string>;
      this.serverClock.sample(Number(seconds) * 1000 + Math.floor(Number(micros) / 1000));
      await preloadScripts(this.client);
    } catch (error) {
      throw toClaimerError(error, 'ready');
    }
    await checkEvictionPolicy(this.client, this.logger);
    checkClientOptions(this.client, this.logger);
  }

  /**
   * Reads the state of `key` without writing (see {@link Claimer.peek}): one read-only script
   * call (`lua/peek.lua`), or a share of a coalesced one.
   * @throws InvalidKeyError for an empty, non-string or too long key
   * @throws ConfigurationError for a key holding foreign data
   * @throws ClaimerUnavailableError when Redis fails, is not ready, or passes `operationTimeoutMs`
   */
  peek(key: string): Promise<KeyPeek> {
    try {
      validateKey(key);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.submit('peek', key, NO_ARGS, '', (entry) => decodePeekEntry(entry, key));
  }

  /**
   * Claims `key` (see {@link Claimer.claim}): one script call, or a share of a coalesced one.
   * Safe to repeat: a repeat by the same caller while its lease lives answers `busy`.
   * @throws InvalidKeyError for an empty, non-string or too long key
   * @throws ConfigurationError for invalid TTLs, or a key holding foreign data / a cluster misuse
   * @throws KeyConflictError when the stored fingerprint differs
   * @throws ClaimerUnavailableError when Redis fails, is not ready, or passes `operationTimeoutMs`
   */
  claim(key: string, options: ClaimOptions): Promise<ClaimResult> {
    try {
      validateKey(key);
      validateClaimOptions(options);
    } catch (error) {
      return Promise.reject(error);
    }
    const suffix = this.nextOwnerSuffix();
    return this.submit('claim', key, this.claimArgs(options), claimArg(suffix, options), (entry, nowUs) =>
      this.toClaimResult(key, options, this.tokenPrefix + suffix, entry, nowUs),
    );
  }

  /**
   * Claims a batch in one round trip: one multi-key script call on a standalone server; on a
   * Cluster one call per hash slot, all sent at once. Entries come back in request order; an
   * invalid request, a fingerprint conflict or (on a Cluster) one unreachable node fails only its
   * own entries.
   * @throws ClaimerUnavailableError as a whole only when every request sent to Redis failed with it
   */
  async claimMany(requests: readonly ClaimRequest[]): Promise<ClaimManyEntry[]> {
    const entries: ClaimManyEntry[] = new Array<ClaimManyEntry>(requests.length);
    const items: OpItem[] = [];
    const settled: Array<Promise<void>> = [];
    const sent: number[] = [];
    const deadlineAt = this.clock.now() + this.options.operationTimeoutMs;
    requests.forEach((request, index) => {
      try {
        validateKey(request?.key);
        validateClaimOptions(request.options);
      } catch (error) {
        entries[index] = { ok: false, error: error as Error };
        return;
      }
      const { key, options } = request;
      const suffix = this.nextOwnerSuffix();
      sent.push(index);
      settled.push(
        new Promise<void>((done) => {
          items.push({
            key,
            shared: this.claimArgs(options),
            arg: claimArg(suffix, options),
            deadlineAt,
            resolve: (entry, nowUs) => {
              try {
                entries[index] = { ok: true, result: this.toClaimResult(key, options, this.tokenPrefix + suffix, entry, nowUs) };
              } catch (error) {
                entries[index] = { ok: false, error: error as Error };
              }
              done();
            },
            reject: (error) => {
              entries[index] = { ok: false, error };
              done();
            },
          });
        }),
      );
    });
    if (items.length > 0) this.dispatch('claim', items);
    await Promise.all(settled);
    if (sent.length > 0 && sent.every((i) => isUnavailable(entries[i]!))) {
      throw (entries[sent[0]!] as { error: Error }).error;
    }
    return entries;
  }

  /**
   * Commits a batch of receipts (see {@link Claimer.commitMany}): the commits of this claimer's
   * own receipts travel as one multi-key script call (per hash slot on a Cluster, chunked by
   * `maxBatchKeys`, split by `doneTtlMs`), sent at once whatever `coalesce` says. Each entry follows
   * the receipt rules as `receipt.commit(result)` would, lost-reply recovery included (a retried
   * commit whose first try landed resolves). A receipt with an operation still in flight, or of
   * another claimer, commits through its own path. Entries come back in request order.
   * @throws ConfigurationError when `requests` is not an array
   */
  commitMany(requests: readonly CommitRequest[]): Promise<CommitManyEntry[]> {
    const gathered: OpItem[] = [];
    const outer = this.gathering;
    this.gathering = gathered;
    let outcomes: Promise<CommitManyEntry[]>;
    try {
      // commitEach calls every receipt's commit before it yields: their operations land in `gathered`.
      outcomes = commitEach(requests);
    } finally {
      this.gathering = outer;
    }
    if (gathered.length > 0) this.dispatch('commit', gathered);
    return outcomes;
  }

  /**
   * Sends any coalesced operations now, waits for calls in flight (each bounded by its
   * deadline), then detaches the claimer's listeners from the client. Does not quit the client:
   * the caller owns it. Operations after close reject with ClaimerUnavailableError. Safe to repeat.
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    // Receipt operations called before close() reach the claimer a few microtasks later.
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (this.queues) for (const queue of Object.values(this.queues)) queue.flush();
    this.closed = true;
    if (this.inFlight > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    this.client.off('error', this.onClientError);
    if (this.isCluster) this.client.off('node error', this.onClientError);
  }

  /** The part of a new owner token after {@link tokenPrefix}: a counter in base 36. */
  private nextOwnerSuffix(): string {
    return (this.tokenCounter++).toString(36);
  }

  /** The shared ARGV entries of a claim call (see lua/claim.lua): owner prefix, lease TTL, retention. */
  private claimArgs(options: ClaimOptions): readonly string[] {
    const last = this.claimShared;
    if (last && last.leaseTtlMs === options.leaseTtlMs && last.doneTtlMs === options.doneTtlMs) return last.args;
    const args = [this.tokenPrefix, String(options.leaseTtlMs), String(options.doneTtlMs)];
    this.claimShared = { leaseTtlMs: options.leaseTtlMs, doneTtlMs: options.doneTtlMs, args };
    return args;
  }

  /** The shared ARGV entries of a commit call (see lua/commit.lua): the done record's retention. */
  private commitArgs(doneTtlMs: number): readonly string[] {
    const last = this.commitShared;
    if (last && last.doneTtlMs === doneTtlMs) return last.args;
    const args = [String(doneTtlMs)];
    this.commitShared = { doneTtlMs, args };
    return args;
  }

  private toClaimResult(key: string, options: ClaimOptions, owner: string, entry: unknown, serverNowUs: number): ClaimResult {
    const decoded = decodeClaimEntry(entry, key, options.fingerprint, serverNowUs);
    switch (decoded.code) {
      case CLAIM_CODE.ACQUIRED:
        return {
          state: 'acquired',
          attempt: decoded.attempt,
          receipt: new LeaseReceipt(
            { key, ownerToken: owner, fencingToken: decoded.fencingToken },
            this.operations,
            options.doneTtlMs,
            this.options.maxResultBytes,
          ),
        };
      case CLAIM_CODE.DONE:
        return { state: 'done', receipt: new NonAcquiredReceipt(key, 'done'), result: decodeStoredResult(key, decoded.resultJson) };
      case CLAIM_CODE.BUSY:
        return { state: 'busy', receipt: new NonAcquiredReceipt(key, 'busy') };
    }
  }

  /**
   * Queues one key's operation (coalescing; inside `commitMany`, its batch), or sends it at once.
   * Resolves with `decode` of its raw entry; rejects with what `decode` or the call threw.
   */
  private submit<T>(op: ScriptName, key: string, shared: readonly string[], arg: string, decode: (entry: unknown, serverNowUs: number) => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const item: OpItem = {
        key,
        shared,
        arg,
        deadlineAt: this.clock.now() + this.options.operationTimeoutMs,
        resolve: (entry, nowUs) => {
          try {
            resolve(decode(entry, nowUs));
          } catch (error) {
            reject(error as Error);
          }
        },
        reject,
      };
      if (op === 'commit' && this.gathering) {
        this.gathering.push(item);
        return;
      }
      const queue = this.queues && !this.closed ? this.queues[op] : undefined;
      // Coalesce only under load: with fewer than IDLE_CALLS calls in flight, send at once.
      if (queue && (queue.size > 0 || this.inFlight >= IDLE_CALLS || this.options.coalesce!.windowMs > 0)) queue.add(item);
      else this.dispatch(op, [item]);
    });
  }

  /**
   * Splits items into script calls: by shared ARGV entries (TTLs, reset flag), by hash slot on a
   * Cluster, then in chunks of maxBatchKeys (for a coalesced batch, of about half the batch; see
   * COALESCED_SPLIT).
   */
  private dispatch(op: ScriptName, items: OpItem[], coalesced = false): void {
    const groups = groupByShared(items);
    if (groups.length > 1) {
      for (const group of groups) this.dispatch(op, group, coalesced);
      return;
    }
    const max = coalesced
      ? Math.min(this.options.maxBatchKeys, items.length < COALESCED_SPLIT * MIN_SPLIT_KEYS ? items.length : Math.ceil(items.length / COALESCED_SPLIT))
      : this.options.maxBatchKeys;
    if (!this.isCluster) {
      for (let i = 0; i < items.length; i += max) this.call(op, items.length <= max ? items : items.slice(i, i + max));
      return;
    }
    const bySlot = new Map<number, OpItem[]>();
    for (const item of items) {
      const slot = recordSlot(item.key);
      const group = bySlot.get(slot);
      if (group) group.push(item);
      else bySlot.set(slot, [item]);
    }
    for (const group of bySlot.values()) {
      for (let i = 0; i < group.length; i += max) this.call(op, group.length <= max ? group : group.slice(i, i + max));
    }
  }

  /** One script call for `items` (all in one slot); settles each item with its own entry. */
  private call(op: ScriptName, items: readonly OpItem[]): void {
    const script = SCRIPTS[op];
    let deadlineAt = items[0]!.deadlineAt;
    const keys: string[] = new Array<string>(items.length);
    const args: string[] = new Array<string>(items.length);
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      keys[i] = recordKey(this.options.prefix, item.key);
      args[i] = item.arg;
      if (item.deadlineAt < deadlineAt) deadlineAt = item.deadlineAt;
    }
    this.exec(script, keys, items[0]!.shared, args, deadlineAt).then(
      (reply) => {
        for (let i = 0; i < items.length; i++) items[i]!.resolve(reply.entries[i], reply.serverNowUs);
      },
      (error: Error) => {
        for (const item of items) item.reject(error);
      },
    );
  }

  /**
   * Runs one script call under its deadline. Never queues on a client that is not ready.
   * Resolves with the per-key entries; rejects with a twophase error.
   */
  private exec(script: LoadedScript, keys: readonly string[], shared: readonly string[], args: readonly string[], deadlineAt: number): Promise<CallReply> {
    const what = `${script.name} of ${keys.length === 1 ? `"${keys[0]}"` : `${keys.length} keys`}`;
    if (this.closed) return Promise.reject(new ClaimerUnavailableError(`${what}: the claimer is closed`));
    const status = this.client.status;
    if (status !== 'ready') {
      this.counters.notReady += keys.length;
      const last = this.lastClientError ? ` (last error: ${describeRedisError(this.lastClientError)})` : '';
      return Promise.reject(new ClaimerUnavailableError(`${what}: the Redis client for ${redisEndpoint(this.client)} is "${status}", not ready${last}; nothing was sent`));
    }
    const remainingMs = deadlineAt - this.clock.now();
    if (remainingMs <= 0) {
      this.counters.deadlinesExceeded += keys.length;
      return Promise.reject(new ClaimerUnavailableError(`${what}: deadline passed before sending`));
    }
    this.counters.scriptCalls++;
    this.counters.operations += keys.length;
    this.inFlight++;
    const notAfter = this.serverClock.toServerMs(deadlineAt);
    const pending = runScript(this.client, script, keys, [String(notAfter), ...shared, ...args], () => this.counters.scriptReloads++);
    return new Promise<CallReply>((resolve, reject) => {
      // The call counts as in flight until it settles or its deadline passes, whichever is first,
      // so close() never waits on a command a dead connection holds.
      let finished = false;
      const finish = () => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        if (--this.inFlight === 0) this.idleWaiters.splice(0).forEach((wake) => wake());
      };
      const timer = setTimeout(() => {
        this.counters.deadlinesExceeded += keys.length;
        reject(new ClaimerUnavailableError(`${what}: no reply from Redis within ${this.options.operationTimeoutMs} ms`));
        finish();
      }, remainingMs);
      // finish() runs before the callers' continuations, so their next operations see the call done.
      pending.then(
        (reply) => {
          finish();
          try {
            const parsed = parseCallReply(reply, script.name);
            this.serverClock.sample(parsed.serverNowMs);
            if (isDeadlinePassed(reply)) {
              this.counters.lateCallsRefused++;
              throw new ClaimerUnavailableError(`${what}: reached Redis after its deadline; nothing was written`);
            }
            resolve(parsed);
          } catch (error) {
            reject(toClaimerError(error, what));
          }
        },
        (error: unknown) => {
          finish();
          reject(toClaimerError(error, what));
        },
      );
    });
  }
}

/** A claim's own ARGV entry (see lua/claim.lua): the owner suffix, and `=fingerprint` when given. */
function claimArg(ownerSuffix: string, options: ClaimOptions): string {
  return options.fingerprint === undefined ? ownerSuffix : `${ownerSuffix}=${options.fingerprint}`;
}

/** Items by equal shared ARGV entries, in first-seen order; one group (the input) in the common case. */
function groupByShared(items: OpItem[]): OpItem[][] {
  const first = items[0]!.shared;
  let i = 1;
  while (i < items.length && sameArgs(items[i]!.shared, first)) i++;
  if (i === items.length) return [items];
  const groups: OpItem[][] = [];
  for (const item of items) {
    const group = groups.find((g) => sameArgs(g[0]!.shared, item.shared));
    if (group) group.push(item);
    else groups.push([item]);
  }
  return groups;
}

function sameArgs(a: readonly string[], b: readonly string[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function decodeStoredResult(key: string, json: string | undefined): ReturnType<typeof decodeResult> {
  try {
    return decodeResult(json);
  } catch (cause) {
    throw new ConfigurationError(`the stored result of "${key}" is not valid JSON`, { cause });
  }
}

function isUnavailable(entry: ClaimManyEntry): boolean {
  return !entry.ok && entry.error instanceof ClaimerUnavailableError;
}
