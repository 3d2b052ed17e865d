/**
 * The chunk of records whose claims share one transaction (a transactional claimer whose
 * `claimMany` gives receipts a `sharedTransaction`, e.g. PostgresClaimer
 * `transactionBatch: 'per-chunk'`). The partition worker adopts the chunk's transaction, so a
 * member's commit resolves once recorded and its handler slot frees; the member's ack then waits
 * for the chunk's COMMIT (RecordSettler.ack) while the worker runs the next member. The worker
 * ends the chunk (PartitionWorker.endChunk) before any record after it runs.
 */
import { type SharedTransaction } from '../../src/adapter-kit';
import type { QueuedRecord } from './record-queue';
import type { RecordSettler } from './record-settler';

/** The open chunk of one partition worker, if any. */
export class SharedChunk {
  /** The shared transaction of the chunk being dispatched, until it ended. */
  current: SharedTransaction | undefined;
  /** Set when that chunk's transaction rolled back while no dispatch of it was running. */
  rolledBack = false;

  /** @param onRollback - called when the open chunk rolled back (wakes the worker) */
  constructor(private readonly onRollback: () => void) {}

  /** Makes `item` a member of the chunk sharing `shared`, and adopts that transaction. */
  join(item: QueuedRecord, settler: RecordSettler, shared: SharedTransaction): void {
    if (this.current !== shared) {
      this.current = shared;
      this.rolledBack = false;
      shared.adopt();
      void shared.outcome.then((committed) => {
        if (committed || this.current !== shared) return;
        this.rolledBack = true;
        this.onRollback();
      });
    }
    item.chunk = shared;
    settler.shared = shared;
  }

  /** Forgets `chunk` if it is still the open one. */
  ended(chunk: SharedTransaction): void {
    if (this.current !== chunk) return;
    this.current = undefined;
    this.rolledBack = false;
  }
}
