/**
 * The batch commit every claimer's `commitMany` is built on: each request goes through its own
 * receipt, so the receipt rules (repeats, release, lease lost, lost replies) hold unchanged, and
 * the outcomes come back per entry in request order.
 */
import type { CommitManyEntry, CommitRequest } from './claimer';
import { ClaimerUnavailableError, ConfigurationError } from '../util/errors';

const OK: CommitManyEntry = Object.freeze({ ok: true as const });

/**
 * Calls `request.receipt.commit(request.result)` for every request, all before this function
 * first yields, so a claimer can gather the store operations those calls start synchronously into
 * one round trip (see `RedisClaimer.commitMany`). Resolves when every commit settled.
 * @throws ConfigurationError when `requests` is not an array; an entry without a receipt fails
 *   alone with ConfigurationError
 */
export function commitEach(requests: readonly CommitRequest[]): Promise<CommitManyEntry[]> {
  if (!Array.isArray(requests)) {
    return Promise.reject(new ConfigurationError(`commitMany needs an array of { receipt, result? }, got ${typeof requests}`));
  }
  const pending = requests.map((request: CommitRequest | undefined, index): Promise<CommitManyEntry> => {
    const receipt = request?.receipt;
    if (!receipt || typeof receipt.commit !== 'function') {
      return Promise.resolve({ ok: false, error: new ConfigurationError(`commitMany request ${index} has no receipt`) });
    }
    let commit: Promise<void>;
    try {
      commit = receipt.commit(request.result);
    } catch (error) {
      commit = Promise.reject(error);
    }
    return commit.then(
      () => OK,
      // A receipt rejecting with a non-Error is treated like a store failure (retriable).
      (error: unknown) => ({
        ok: false,
        error: error instanceof Error ? error : new ClaimerUnavailableError(`commit of "${receipt.key}" failed: ${String(error)}`, { cause: error }),
      }),
    );
  });
  return Promise.all(pending);
}
