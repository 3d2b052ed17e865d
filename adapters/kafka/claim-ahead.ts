/**
 * Claiming ahead: the partition worker claims a chunk of queued records in one claimer round trip
 * (`sink.claimBatch`) before dispatching them one by one. The chunk is as large as the records
 * expected to start within half of `preclaimMaxAgeMs` at the measured dispatch time (growing at
 * most twofold per chunk, one until a dispatch was measured), and a claim older than
 * `preclaimMaxAgeMs` at dispatch is released and made again: a lease must not run out while its
 * record waits its turn.
 */
import { performance } from 'node:perf_hooks';
import type { Logger } from '../../src';
import { type DeliverySink, type PreparedClaim, type SharedTransaction } from '../../src/adapter-kit';
import type { Prepared, QueuedRecord } from './record-queue';
import type { RecordSettler } from './record-settler';
import type { Delivery, ReleaseOptions } from '../../src';

/** The release of a claim whose handler never ran: its attempt does not count. */
const UNCOUNTED: ReleaseOptions = Object.freeze({ uncountAttempt: true });

/** What claiming ahead needs of its source. */
export interface ClaimAheadHost {
  readonly sink: DeliverySink;
  readonly logger: Logger;
  readonly claimBatchSize: number;
  readonly preclaimMaxAgeMs: number;
  count(counter: 'preclaimed' | 'preclaimReleased'): void;
}

/** How claiming ahead builds a record's settler and delivery, and joins a shared chunk. */
export interface ClaimAheadRecords {
  settlerOf(item: QueuedRecord): RecordSettler;
  deliveryOf(item: QueuedRecord, settler: RecordSettler): Delivery;
  /** Called for a record whose claim shares a transaction with its chunk. */
  joinChunk(item: QueuedRecord, settler: RecordSettler, shared: SharedTransaction): void;
}

const SKIPPED: PreparedClaim = Object.freeze({ kind: 'skipped' });

/**
 * Where the claims of one preclaim stop being used: at the first claim whose key repeats a key
 * acquired earlier in the batch into a shared transaction (`sharedTransaction`). That repeat is a
 * duplicate only once the chunk COMMITs, and the COMMIT needs every member first, so the records
 * from there on are left unclaimed and claimed again after the chunk ended. `claims.length` when
 * there is no such repeat.
 */
export function sharedChunkEnd(claims: readonly PreparedClaim[]): number {
  const shared = new Set<string>();
  for (let i = 0; i < claims.length; i++) {
    const claim = claims[i]!;
    if (claim.kind !== 'claimed') continue;
    if (claim.result.state !== 'acquired') {
      if (shared.has(claim.key)) return i;
    } else if (claim.result.receipt.sharedTransaction) shared.add(claim.key);
  }
  return claims.length;
}

/** Claims ahead for one partition worker. */
export class ClaimAhead {
  /** EWMA of one dispatch's duration, ms; undefined until the first dispatch. */
  private dispatchMs: number | undefined;
  private lastChunk = 1;

  constructor(private readonly host: ClaimAheadHost) {}

  /** Records one dispatch's duration (for the chunk size). */
  observe(durationMs: number): void {
    this.dispatchMs = this.dispatchMs === undefined ? durationMs : this.dispatchMs * 0.8 + durationMs * 0.2;
  }

  /** How many records to claim ahead now. */
  chunkSize(): number {
    if (this.dispatchMs === undefined) return 1;
    const fit = Math.floor(this.host.preclaimMaxAgeMs / 2 / Math.max(this.dispatchMs, 0.001));
    return Math.max(1, Math.min(this.host.claimBatchSize, fit, this.lastChunk * 2));
  }

  /** Claims `items` in one round trip and gives each its prepared claim. */
  async claim(items: readonly QueuedRecord[], records: ClaimAheadRecords): Promise<void> {
    if (items.length === 0) return;
    this.lastChunk = items.length;
    const settlers = items.map((item) => records.settlerOf(item));
    const deliveries = items.map((item, i) => records.deliveryOf(item, settlers[i]!));
    const claims = await this.host.sink.claimBatch(deliveries);
    const at = performance.now();
    const acquiredKeys = new Set<string>();
    // A chunk sharing one transaction ends before its first repeated key: the rest is claimed later.
    const end = sharedChunkEnd(claims);
    for (const claim of claims.slice(end)) this.release(claim);
    items.slice(0, end).forEach((item, i) => {
      let claim = claims[i] ?? SKIPPED;
      if (claim.kind === 'claimed') {
        if (claim.result.state === 'acquired') acquiredKeys.add(claim.key);
        // A repeat of a key acquired earlier in this chunk answers busy (held by this very
        // worker): claim it again at dispatch. If the earlier record's commit is still in
        // flight then, the dispatch answers busy and the worker waits for its own commits, not
        // for the busy delay.
        else if (claim.result.state === 'busy' && acquiredKeys.has(claim.key)) claim = SKIPPED;
      }
      const shared = claim.kind === 'claimed' && claim.result.state === 'acquired' ? claim.result.receipt.sharedTransaction : undefined;
      if (shared) records.joinChunk(item, settlers[i]!, shared);
      item.prepared = { claim, delivery: deliveries[i]!, settler: settlers[i]!, at };
      this.host.count('preclaimed');
    });
  }

  /** The record's claim made ahead, if still young enough; an old one is released. */
  take(item: QueuedRecord): Prepared | undefined {
    const prepared = item.prepared;
    item.prepared = undefined;
    if (!prepared) return undefined;
    if (performance.now() - prepared.at > this.host.preclaimMaxAgeMs) {
      this.release(prepared.claim);
      return undefined;
    }
    return prepared;
  }

  /** Forgets the record's claim made ahead; releases it when `release` (not after a crash: it ends at its TTL). */
  drop(item: QueuedRecord, release: boolean): void {
    const prepared = item.prepared;
    item.prepared = undefined;
    if (prepared && release) this.release(prepared.claim);
  }

  /**
   * Releases a claim made ahead (an acquired one), in the background. Its handler never ran, so
   * the attempt it counted is taken off again: rebalances and stops never use up `maxAttempts`.
   */
  release(claim: PreparedClaim): void {
    if (claim.kind !== 'claimed' || claim.result.state !== 'acquired') return;
    this.host.count('preclaimReleased');
    claim.result.receipt.release(UNCOUNTED).catch((error: unknown) => {
      this.host.logger.debug({ err: error, key: claim.key }, 'twophase/kafka: releasing a claim made ahead of dispatch failed; it ends at its lease TTL');
    });
  }
}
