/**
 * The idempotency key the replay tool shows for a dead-lettered message: derived with the
 * consumer's own function (`messageKeyOf`), so the key printed is the key the replayed copy
 * will be claimed under, or the reason the consumer will refuse it.
 */
import { InvalidMessageError, messageKeyOf } from '../../src';

/** The derived key, or why the consumer would dead-letter the copy again (`missing_key`, `invalid_key`). */
export interface ReplayKey {
  readonly key?: string;
  /** `<reason>: <explanation>` when no key can be derived. */
  readonly keyError?: string;
}

/**
 * Derives the key from a message's headers and message id as the consumer does.
 * @throws only for an unexpected error (never for a message without a usable key)
 */
export function replayKeyOf(headers: Readonly<Record<string, unknown>> | undefined, messageId: unknown): ReplayKey {
  try {
    return { key: messageKeyOf(headers, messageId) };
  } catch (error) {
    if (error instanceof InvalidMessageError) return { keyError: `${error.reason}: ${error.message}` };
    throw error;
  }
}
