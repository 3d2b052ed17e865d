/**
 * Batched commits of acked deliveries: the commits issued within one event-loop turn go to the
 * claimer as one {@link Claimer.commitMany} call instead of one store call each.
 *
 * Only the I/O is batched. Each commit keeps its own promise, which settles as that entry of the
 * batch did (done, or the error that entry alone failed with), so the per-delivery decision
 * (settlement-table.ts) and the retries and deadline of `commitWithin` (settlement.ts) work on it
 * exactly as on `receipt.commit`. A retry of one entry joins whatever batch is open when it is
 * issued.
 *
 * No head-of-line blocking: a batch is sent when the turn in which its first commit was issued
 * ends (`setImmediate`), or at once when it reaches {@link MAX_BATCHED_COMMITS}; it never waits
 * for the other deliveries of a claimed batch, so a slow handler never holds a fast one's commit.
 *
 * The consumer uses it only for receipts without a transaction (a transactional receipt commits
 * the handler's effect with the claim: see `Receipt.transaction`) and only when the claimer has
 * `commitMany`.
 */
import type { Claimer, CommitManyEntry, CommitRequest, JsonValue, Receipt } from './claimer';
import { ClaimerUnavailableError } from '../util/errors';

/** Largest number of commits in one `commitMany` call; a batch this large is sent at once. */
export const MAX_BATCHED_COMMITS = 512;

interface Waiter {
  resolve(): void;
  reject(error: Error): void;
}

/** Gathers commits into `commitMany` calls, one per event-loop turn. */
export class CommitBatcher {
  private requests: CommitRequest[] = [];
  private waiters: Waiter[] = [];
  private scheduled: NodeJS.Immediate | undefined;
  private readonly flushNow = (): void => {
    this.scheduled = undefined;
    this.flush();
  };

  /** @param claimer - the claimer whose `commitMany` receives the batches */
  constructor(private readonly claimer: Required<Pick<Claimer, 'commitMany'>>) {}

  /**
   * Commits `receipt` with `result` in the next batch. Resolves or rejects exactly as
   * `receipt.commit(result)` would (the receipt rules hold per entry, see Claimer.commitMany);
   * when the `commitMany` call as a whole fails, every entry of that batch rejects with its error
   * (a non-Error becomes ClaimerUnavailableError, which is retriable).
   */
  readonly commit = (receipt: Receipt, result: JsonValue | undefined): Promise<void> => {
    return new Promise<void>((resolve, reject) => {
      this.requests.push(result === undefined ? { receipt } : { receipt, result });
      this.waiters.push({ resolve, reject });
      if (this.requests.length >= MAX_BATCHED_COMMITS) this.flush();
      else this.scheduled ??= setImmediate(this.flushNow);
    });
  };

  /** Commits waiting for the next batch. */
  get size(): number {
    return this.requests.length;
  }

  /** Sends the waiting commits now as one `commitMany` call (nothing when none wait). */
  flush(): void {
    if (this.scheduled !== undefined) {
      clearImmediate(this.scheduled);
      this.scheduled = undefined;
    }
    const requests = this.requests;
    if (requests.length === 0) return;
    const waiters = this.waiters;
    this.requests = [];
    this.waiters = [];
    let sent: Promise<CommitManyEntry[]>;
    try {
      sent = this.claimer.commitMany(requests);
    } catch (error) {
      sent = Promise.reject(error);
    }
    sent.then(
      (entries) => {
        for (let i = 0; i < waiters.length; i++) {
          const entry = entries[i];
          if (entry?.ok === true) waiters[i]!.resolve();
          else if (entry?.ok === false) waiters[i]!.reject(entry.error);
          else waiters[i]!.reject(new ClaimerUnavailableError(`commitMany returned no entry for commit ${i} of ${waiters.length}`));
        }
      },
      (error: unknown) => {
        const failure = error instanceof Error ? error : new ClaimerUnavailableError(`commitMany failed: ${String(error)}`, { cause: error });
        for (const waiter of waiters) waiter.reject(failure);
      },
    );
  }
}
