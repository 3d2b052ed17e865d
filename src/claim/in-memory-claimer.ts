/**
 * InMemoryClaimer: the claim contract in process memory.
 *
 * For tests, the embedded demo and single-replica deployments. Its kind is `in_memory`: startup
 * validation refuses it when more than one replica is declared, since each replica would keep
 * its own claims and let duplicates through.
 */
import { randomUUID } from 'node:crypto';
import type { Claimer, ClaimManyEntry, ClaimOptions, ClaimRequest, ClaimResult, CommitManyEntry, CommitRequest, KeyPeek } from './claimer';
import { commitEach } from './commit-many';
import { type Clock, monotonicClock } from '../util/clock';
import { ConfigurationError, KeyConflictError } from '../util/errors';
import { validateClaimOptions, validateKey } from './keys';
import { checkKnownOptions, describeType, optionNames } from '../util/known-options';
import { DEFAULT_MAX_RESULT_BYTES } from '../util/limits';
import { type LeaseIdentity, type LeaseOperations, type LeaseOutcome, LeaseReceipt, NonAcquiredReceipt } from './receipt';
import { decodeResult } from './result-codec';

/** Options of {@link InMemoryClaimer}. */
export interface InMemoryClaimerOptions {
  /** Time source in milliseconds. Default: monotonic `performance.now()`; inject one in tests. */
  readonly clock?: Clock;
  /** Largest commit result in bytes of UTF-8 JSON. Default 4096. */
  readonly maxResultBytes?: number;
  /** Records inspected for expiry per claim by the amortised sweep. Default 4. */
  readonly sweepPerClaim?: number;
  /**
   * Most records held (live leases, done keys, retained attempt counts). Default: no bound (memory
   * is bounded only by the keys seen within their done TTL: about 165 bytes of heap per key plus
   * the key string, see docs/configuration.md, "InMemoryClaimer memory"). When a new key would pass it, the oldest committed records are evicted
   * first, then released or expired ones; live leases never. Each eviction is counted in
   * {@link InMemoryClaimer.evictions}: an evicted done key is forgotten, so a redelivery of its
   * message runs the effect again. Integer ≥ 1.
   */
  readonly maxKeys?: number;
}

const IN_MEMORY_OPTION_NAMES = optionNames<InMemoryClaimerOptions>()(['clock', 'maxResultBytes', 'sweepPerClaim', 'maxKeys']);

interface KeyRecord {
  /** The record's own key, so the sweep can walk `records.values()` (no entry pair per step). */
  readonly key: string;
  state: 'leased' | 'done' | 'released';
  /** The fencing token of the record's latest lease; with the instance id, its owner token. */
  fence: number;
  attempts: number;
  fingerprint: string | undefined;
  result: string | undefined;
  /** Lease or done expiry, clock ms. */
  expiresAt: number;
  /** When the record may be forgotten (attempt count and fingerprint kept until then), clock ms. */
  retainUntil: number;
  /**
   * True while the record is its key's entry in `records`; false once deleted or replaced by a
   * newer claim (records are never put back). Lets a lease reach its record without a lookup.
   */
  current: boolean;
}

/**
 * Map-based claimer.
 *
 * - Fencing tokens come from one counter per claimer instance, so they strictly increase per key
 *   (and across keys) for the life of the instance.
 * - Expiry is lazy (checked on access) plus an amortised sweep of a few records per claim, so
 *   memory is bounded by keys seen within their done TTL; no timer keeps the process alive.
 * - A record whose lease expired keeps its attempt count until `doneTtlMs` after its last claim.
 */
export class InMemoryClaimer implements Claimer {
  readonly kind = 'in_memory' as const;
  private readonly records = new Map<string, KeyRecord>();
  private readonly clock: Clock;
  private readonly maxResultBytes: number;
  private readonly sweepPerClaim: number;
  private fenceCounter = 0;
  /** Owner tokens are this random instance id plus the fencing token: unique without a UUID per claim. */
  private readonly instanceId = randomUUID();
  private sweepCursor: Iterator<KeyRecord> | undefined;
  private readonly maxKeys: number | undefined;
  /** With maxKeys: done records in commit order, oldest first (entries whose record changed since are stale and skipped). */
  private readonly committedOrder = new Map<string, KeyRecord>();
  private evicted = 0;
  /** The store primitives answer synchronously (see LeaseOperations). */
  private readonly operations: LeaseOperations = {
    commit: (lease, resultJson, doneTtlMs) => this.commitLease(lease, resultJson, doneTtlMs),
    release: (lease, resetAttempts, uncountAttempt) => this.releaseLease(lease, resetAttempts, uncountAttempt === true),
    extend: (lease, ttlMs) => this.extendLease(lease, ttlMs),
  };

  /** @throws ConfigurationError for a non-positive maxResultBytes or sweepPerClaim, or an unknown option name */
  constructor(options: InMemoryClaimerOptions = {}) {
    checkKnownOptions('InMemoryClaimer options', options, IN_MEMORY_OPTION_NAMES);
    this.clock = options.clock ?? monotonicClock;
    this.maxResultBytes = options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES;
    this.sweepPerClaim = options.sweepPerClaim ?? 4;
    if (!Number.isInteger(this.maxResultBytes) || this.maxResultBytes <= 0) {
      throw new ConfigurationError(`maxResultBytes must be a positive integer, got ${describeType(this.maxResultBytes)}`);
    }
    if (!Number.isInteger(this.sweepPerClaim) || this.sweepPerClaim < 1) {
      throw new ConfigurationError(`sweepPerClaim must be an integer ≥ 1, got ${describeType(this.sweepPerClaim)}`);
    }
    this.maxKeys = options.maxKeys;
    if (this.maxKeys !== undefined && (!Number.isInteger(this.maxKeys) || this.maxKeys < 1)) {
      throw new ConfigurationError(`maxKeys must be an integer ≥ 1, got ${describeType(this.maxKeys)}`);
    }
  }

  /** Records evicted to stay within `maxKeys` since construction (each one a key forgotten early). */
  get evictions(): number {
    return this.evicted;
  }

  /** Number of records held (live leases, done keys, and retained attempt counts). */
  get size(): number {
    return this.records.size;
  }

  claim(key: string, options: ClaimOptions): Promise<ClaimResult> {
    try {
      return Promise.resolve(this.claimNow(key, options));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async claimMany(requests: readonly ClaimRequest[]): Promise<ClaimManyEntry[]> {
    return requests.map((request) => {
      try {
        return { ok: true as const, result: this.claimNow(request.key, request.options) };
      } catch (error) {
        return { ok: false as const, error: error as Error };
      }
    });
  }

  /**
   * Commits each request's receipt (see {@link Claimer.commitMany}); in memory there is no round
   * trip to save, so this is each receipt's own commit, outcomes per entry in request order.
   * @throws ConfigurationError when `requests` is not an array
   */
  commitMany(requests: readonly CommitRequest[]): Promise<CommitManyEntry[]> {
    return commitEach(requests);
  }

  /** {@inheritDoc Claimer.peek} */
  async peek(key: string): Promise<KeyPeek> {
    validateKey(key);
    const now = this.clock.now();
    const record = this.live(key, now);
    if (!record || (record.state === 'done' && now >= record.expiresAt)) return { state: 'absent', attempts: 0 };
    if (record.state === 'done') return { state: 'done', attempts: record.attempts };
    if (record.state === 'leased' && now < record.expiresAt) return { state: 'busy', attempts: record.attempts };
    return record.attempts > 0 ? { state: 'failed', attempts: record.attempts } : { state: 'absent', attempts: 0 };
  }

  private claimNow(key: string, options: ClaimOptions): ClaimResult {
    validateKey(key);
    validateClaimOptions(options);
    const now = this.clock.now();
    this.sweep(now);
    let record = this.live(key, now);
    if (record?.state === 'done' && now >= record.expiresAt) {
      this.forget(record);
      record = undefined;
    }
    if (record && options.fingerprint !== undefined && record.fingerprint !== undefined && record.fingerprint !== options.fingerprint) {
      throw new KeyConflictError(key, record.fingerprint, options.fingerprint);
    }
    if (record?.state === 'done') {
      return { state: 'done', receipt: new NonAcquiredReceipt(key, 'done'), result: decodeResult(record.result) };
    }
    if (record?.state === 'leased' && now < record.expiresAt) {
      return { state: 'busy', receipt: new NonAcquiredReceipt(key, 'busy') };
    }
    if (record === undefined && this.maxKeys !== undefined && this.records.size >= this.maxKeys) this.evict(now);
    const next: KeyRecord = {
      key,
      state: 'leased',
      fence: ++this.fenceCounter,
      attempts: (record?.attempts ?? 0) + 1,
      fingerprint: options.fingerprint ?? record?.fingerprint,
      result: undefined,
      expiresAt: now + options.leaseTtlMs,
      retainUntil: now + options.doneTtlMs,
      current: true,
    };
    if (record) record.current = false;
    this.records.set(key, next);
    const lease = new MemoryLease(next, this.instanceId);
    return { state: 'acquired', receipt: new LeaseReceipt(lease, this.operations, options.doneTtlMs, this.maxResultBytes), attempt: next.attempts };
  }

  /**
   * Store primitive of {@link LeaseReceipt.commit} (see {@link LeaseOperations}). Protected so a
   * test subclass can wrap it (for example to lose its reply after it acted).
   */
  protected commitLease(lease: LeaseIdentity, resultJson: string | undefined, doneTtlMs: number): LeaseOutcome {
    const now = this.clock.now();
    const record = this.owned(lease, now);
    if (!record) return 'lost';
    if (record.state === 'released') return 'released';
    if (record.state === 'done') return 'committed';
    record.state = 'done';
    record.result = resultJson;
    record.expiresAt = now + doneTtlMs;
    record.retainUntil = record.expiresAt;
    if (this.maxKeys !== undefined) this.noteCommitted(record);
    return 'ok';
  }

  /** Appends a committed record to the eviction order, and keeps that order's stale entries bounded. */
  private noteCommitted(record: KeyRecord): void {
    this.committedOrder.delete(record.key);
    this.committedOrder.set(record.key, record);
    for (const [key, entry] of this.committedOrder) {
      if (this.isCommitted(entry)) break;
      this.committedOrder.delete(key); // stale head (expired or claimed again)
    }
    if (this.committedOrder.size > 2 * this.maxKeys!) {
      for (const [key, entry] of this.committedOrder) if (!this.isCommitted(entry)) this.committedOrder.delete(key);
    }
  }

  private isCommitted(entry: KeyRecord): boolean {
    return entry.state === 'done' && entry.current;
  }

  /**
   * Frees room for one new key: the oldest committed record, else the oldest released or expired
   * one; never a live lease (if only live leases are held, the claimer goes over maxKeys).
   */
  private evict(now: number): void {
    for (const [key, entry] of this.committedOrder) {
      this.committedOrder.delete(key);
      if (!this.isCommitted(entry)) continue;
      this.forget(entry);
      this.evicted++;
      return;
    }
    for (const record of this.records.values()) {
      if (record.state === 'leased' && now < record.expiresAt) continue;
      this.forget(record);
      this.evicted++;
      return;
    }
  }

  /** Store primitive of {@link LeaseReceipt.release}; protected as {@link InMemoryClaimer.commitLease}. */
  protected releaseLease(lease: LeaseIdentity, resetAttempts: boolean, uncountAttempt = false): LeaseOutcome {
    const now = this.clock.now();
    const record = this.owned(lease, now);
    if (!record) return 'lost';
    if (record.state === 'released') return 'released';
    if (record.state === 'done') return 'committed';
    record.state = 'released';
    record.expiresAt = now;
    if (resetAttempts) record.attempts = 0;
    else if (uncountAttempt && record.attempts > 0) record.attempts--;
    return 'ok';
  }

  /** Store primitive of {@link LeaseReceipt.extend}; protected as {@link InMemoryClaimer.commitLease}. */
  protected extendLease(lease: LeaseIdentity, ttlMs: number): LeaseOutcome {
    const now = this.clock.now();
    const record = this.owned(lease, now);
    if (!record) return 'lost';
    if (record.state !== 'leased') return record.state === 'done' ? 'committed' : 'released';
    record.expiresAt = now + ttlMs;
    record.retainUntil = Math.max(record.retainUntil, record.expiresAt);
    return 'ok';
  }

  /**
   * The record `lease` owns, if it is still the key's live record. A lease of this instance
   * carries its record (no lookup); another identity (a wrapper's copy) is looked up, and owns the
   * record with its fencing token and owner token (this instance's id, `:`, the fencing token).
   */
  private owned(lease: LeaseIdentity, now: number): KeyRecord | undefined {
    if (lease instanceof MemoryLease && lease.instanceId === this.instanceId) {
      const record = lease.record;
      if (!record.current) return undefined;
      if (now >= record.retainUntil) {
        this.forget(record);
        return undefined;
      }
      return record;
    }
    const record = this.live(lease.key, now);
    if (!record || record.fence !== lease.fencingToken || lease.ownerToken !== `${this.instanceId}:${lease.fencingToken}`) return undefined;
    return record;
  }

  private live(key: string, now: number): KeyRecord | undefined {
    const record = this.records.get(key);
    if (record && now >= record.retainUntil) {
      this.forget(record);
      return undefined;
    }
    return record;
  }

  /** Deletes `record`, its key's current entry. */
  private forget(record: KeyRecord): void {
    record.current = false;
    this.records.delete(record.key);
  }

  private sweep(now: number): void {
    for (let i = 0; i < this.sweepPerClaim; i++) {
      this.sweepCursor ??= this.records.values();
      const next = this.sweepCursor.next();
      if (next.done) {
        this.sweepCursor = undefined;
        return;
      }
      const record = next.value;
      if (now >= record.retainUntil) this.forget(record);
    }
  }
}

/**
 * The identity of one in-memory lease: the record its claim created. The owner token (the
 * claimer instance's id, `:`, the fencing token) is built only when read.
 */
class MemoryLease implements LeaseIdentity {
  constructor(
    /** The record this lease created (see KeyRecord.current). */
    readonly record: KeyRecord,
    readonly instanceId: string,
  ) {}

  get key(): string {
    return this.record.key;
  }

  /** The lease's own fencing token (its record's; records are never re-fenced). */
  get fencingToken(): number {
    return this.record.fence;
  }

  get ownerToken(): string {
    return `${this.instanceId}:${this.record.fence}`;
  }
}
