/**
 * The receipt steps of settlement: commit and release with bounded retries, and the error fields
 * of a dead-letter. Which step a delivery takes is decided by the settlement table
 * (settlement-table.ts); apply-decision.ts calls these.
 *
 * Receipt operations run with their own deadline and are never cut short by shutdown: a commit
 * that was about to land must land, or the next delivery would repeat the effect.
 */
import type { JsonValue, Receipt, ReleaseOptions } from './claimer';
import { ConfigurationError, isRetriable, LeaseLostError, ResultTooLargeError, UnstorableResultError } from '../util/errors';
import type { Logger } from '../util/logger';
import type { BackoffPolicy } from '../util/retry';
import { retryWithin } from '../util/retry';

/** Backoff of commit and release retries inside their deadline. */
export const RECEIPT_RETRY_BACKOFF: Readonly<BackoffPolicy> = { initialDelayMs: 50, maxDelayMs: 1000, multiplier: 2, jitter: 0.2 };

/** How a commit ended. */
export type CommitOutcome =
  | { readonly outcome: 'committed' }
  | { readonly outcome: 'lease_lost'; readonly error: LeaseLostError }
  | { readonly outcome: 'commit_failed'; readonly error: unknown };

/** One commit try of a receipt: `receipt.commit(result)`, or the same through a batch (commit-batcher.ts). */
export type CommitOnce = (receipt: Receipt, result: JsonValue | undefined) => Promise<void>;

const COMMIT_ALONE: CommitOnce = (receipt, result) => receipt.commit(result);

/**
 * Commits `receipt` with `result`, retrying transient store errors until `deadlineMs` passes.
 * A result too large to store is logged and the key committed without it, so deduplication
 * still holds. Every try (the first and each retry) goes through `commitOnce` (default: the
 * receipt's own commit). Never throws.
 */
export function commitWithin(receipt: Receipt, result: JsonValue | undefined, deadlineMs: number, logger: Logger, commitOnce: CommitOnce = COMMIT_ALONE): Promise<CommitOutcome> {
  // Fast path (per message): one attempt without the retry machinery or an async frame.
  let first: Promise<void>;
  try {
    first = Promise.resolve(commitOnce(receipt, result));
  } catch (error) {
    first = Promise.reject(error);
  }
  return first.then(
    () => COMMITTED,
    (error: unknown): CommitOutcome | Promise<CommitOutcome> => {
      if (error instanceof LeaseLostError) return { outcome: 'lease_lost', error };
      if (!unstorable(error) && !isRetriable(error)) return { outcome: 'commit_failed', error };
      return commitRetrying(receipt, result, deadlineMs, logger, commitOnce);
    },
  );
}

const COMMITTED: CommitOutcome = Object.freeze({ outcome: 'committed' });

/**
 * A commit refused for its result alone (too large, not JSON; a claimer's own ConfigurationError
 * for a result): the key is committed again without it.
 */
export function unstorable(error: unknown): boolean {
  return error instanceof ResultTooLargeError || error instanceof UnstorableResultError || error instanceof ConfigurationError;
}

/** The slow path of {@link commitWithin}: retries until the deadline; drops a result that cannot be stored. */
async function commitRetrying(receipt: Receipt, result: JsonValue | undefined, deadlineMs: number, logger: Logger, commitOnce: CommitOnce): Promise<CommitOutcome> {
  let value = result;
  try {
    await retryWithin(
      async () => {
        try {
          await commitOnce(receipt, value);
        } catch (error) {
          if (unstorable(error)) {
            logger.error({ err: error, key: receipt.key }, 'twophase: handler result cannot be stored (too large, or not JSON); committing the key without it');
            value = undefined;
            await commitOnce(receipt, undefined);
            return;
          }
          throw error;
        }
      },
      { deadlineMs, backoff: RECEIPT_RETRY_BACKOFF },
    );
    return { outcome: 'committed' };
  } catch (error) {
    if (error instanceof LeaseLostError) return { outcome: 'lease_lost', error };
    return { outcome: 'commit_failed', error };
  }
}

/**
 * Releases `receipt`, retrying transient store errors until `deadlineMs` passes. Resolves true
 * when released (or left to a newer owner), false when the store stayed unavailable (the lease
 * then ends at its TTL). Never throws. `keepProcessAlive`: the pauses between tries keep the
 * process alive (a caller with nothing else running, as `runOnce` in a script); default false.
 */
export async function releaseWithin(receipt: Receipt, deadlineMs: number, logger: Logger, options?: ReleaseOptions, keepProcessAlive = false): Promise<boolean> {
  try {
    await receipt.release(options);
    return true;
  } catch (error) {
    if (!isRetriable(error)) {
      logger.warn({ err: error, key: receipt.key }, 'release failed; the lease will end at its TTL');
      return false;
    }
  }
  try {
    await retryWithin(() => receipt.release(options), { deadlineMs, backoff: RECEIPT_RETRY_BACKOFF, keepProcessAlive });
    return true;
  } catch (error) {
    logger.warn({ err: error, key: receipt.key }, 'release failed; the lease will end at its TTL');
    return false;
  }
}

/** Truncates an error message for dead-letter headers (1024 characters at most). */
export function truncateErrorMessage(error: unknown, max = 1024): string | undefined {
  if (error === undefined) return undefined;
  const message = error instanceof Error ? error.message : String(error);
  return message.length > max ? `${message.slice(0, max - 1)}…` : message;
}

/** The class name of an error, for dead-letter headers and `error.type`. */
export function errorType(error: unknown): string | undefined {
  if (error === undefined) return undefined;
  return error instanceof Error ? error.name : typeof error;
}
