/**
 * The records of one partition in one group generation, in offset order, and the end of their
 * contiguous settled prefix: the offset the partition may commit.
 *
 * Records before `cursor` were dispatched (settled, or committing while later ones run); records
 * before `head` are settled and gone from the partition's concern. A record settles out of order
 * (a pipelined commit ends after a later record's), so the committable offset moves only over the
 * contiguous prefix.
 */
import type { Delivery } from '../../src';
import { type PreparedClaim, type SharedTransaction } from '../../src/adapter-kit';
import type { KafkaRecord } from './client';
import type { RecordSettler } from './record-settler';

/** A claim made ahead of dispatch (claim-ahead.ts), with the delivery and settler it was made for. */
export interface Prepared {
  readonly claim: PreparedClaim;
  readonly delivery: Delivery;
  readonly settler: RecordSettler;
  /** performance.now() when the claim was made. */
  readonly at: number;
}

/** One record in the queue. */
export interface QueuedRecord {
  readonly record: KafkaRecord;
  readonly bytes: number;
  prepared?: Prepared;
  /** True once acked or dead-lettered (possibly before an earlier record's commit ended). */
  settled?: boolean;
  /** The shared transaction of the chunk whose member this record's claim is, until the chunk ended. */
  chunk?: SharedTransaction;
  /** Dispatched without a claim made ahead: a member of a chunk that rolled back runs on its own. */
  single?: boolean;
}

/** True when decimal offset `a` is above `b` (Kafka offsets: non-negative, no leading zeros). */
export function offsetAbove(a: string, b: string): boolean {
  return a.length !== b.length ? a.length > b.length : a > b;
}

/** The queue of one partition worker, and its settled prefix. */
export class RecordQueue {
  readonly items: QueuedRecord[] = [];
  /** Index of the first record not settled yet. */
  head = 0;
  /** Index of the next record to dispatch (records in [head, cursor) are settled or committing). */
  cursor = 0;
  /** Bytes of keys and values queued and not settled yet. */
  bufferedBytes = 0;
  /** Offset of the last record of the contiguous settled prefix; undefined before the first settle. */
  lastSettled: string | undefined;
  /** The highest offset queued; records at or below it are not queued again. */
  private lastQueued: string | undefined;
  /** Records below this offset were settled by this partition's previous worker on this member: queued as settled. */
  private settledBefore: string | undefined;

  /**
   * Queues fetched records (those below the highest offset already queued are ignored, so a
   * re-fetch never queues a record twice). Returns how many were queued.
   */
  enqueue(records: readonly KafkaRecord[]): number {
    let queued = 0;
    for (const record of records) {
      if (this.lastQueued !== undefined && !offsetAbove(record.offset, this.lastQueued)) continue;
      this.lastQueued = record.offset;
      const bytes = (record.value?.length ?? 0) + (record.key?.length ?? 0);
      this.items.push(this.settledBefore !== undefined && offsetAbove(this.settledBefore, record.offset) ? { record, bytes, settled: true } : { record, bytes });
      this.bufferedBytes += bytes;
      queued++;
    }
    return queued;
  }

  /**
   * Marks settled every record below `offset`, queued or queued later: this partition's previous
   * worker on this member settled them (its committable offset). Call before anything was dispatched.
   */
  settledBelow(offset: string): void {
    this.settledBefore = offset;
    for (const item of this.items) if (offsetAbove(offset, item.record.offset)) item.settled = true;
  }

  /** The record at the cursor, if any. */
  get next(): QueuedRecord | undefined {
    return this.cursor < this.items.length ? this.items[this.cursor] : undefined;
  }

  /** Offset to commit: one past the contiguous settled prefix; undefined before the first settle. */
  get committable(): string | undefined {
    return this.lastSettled === undefined ? undefined : (BigInt(this.lastSettled) + 1n).toString();
  }

  /** Drops the records from index `keep` on (not dispatched), calling `dropped` for each. */
  truncate(keep: number, dropped: (item: QueuedRecord) => void): void {
    for (let i = keep; i < this.items.length; i++) {
      const item = this.items[i]!;
      this.bufferedBytes -= item.bytes;
      dropped(item);
    }
    this.items.length = keep;
  }

  /** Marks `item` settled and moves the contiguous settled prefix as far as it now reaches. */
  settle(item: QueuedRecord): void {
    item.settled = true;
    this.advanceHead();
  }

  /** Moves the contiguous settled prefix as far as it reaches (and drops the settled records in bulk). */
  advanceHead(): void {
    const items = this.items;
    while (this.head < this.cursor && items[this.head]!.settled) {
      const first = items[this.head++]!;
      this.lastSettled = first.record.offset;
      this.bufferedBytes -= first.bytes;
    }
    if (this.head >= 1024 && this.head * 2 >= items.length) {
      items.splice(0, this.head);
      this.cursor -= this.head;
      this.head = 0;
    }
  }
}
