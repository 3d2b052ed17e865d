/**
 * What a handler returns. Anything else is an {@link InvalidDispositionError}, never an ack.
 */
import type { JsonValue } from './claimer';

export type Disposition =
  | { readonly type: 'ack'; readonly result?: JsonValue }
  | { readonly type: 'requeue'; readonly delayMs?: number; readonly reason?: string }
  | { readonly type: 'reject'; readonly reason: string };

/** Success: commit the claim (storing `result`, JSON ≤ maxResultBytes) and ack the message. */
export function ack(result?: JsonValue): Disposition {
  return result === undefined ? { type: 'ack' } : { type: 'ack', result };
}

/** Try again later: release the claim and requeue, after `delayMs` ms or the backoff. Counts as an attempt. */
export function requeue(options: { delayMs?: number; reason?: string } = {}): Disposition {
  return { type: 'requeue', ...options };
}

/** Give up: release the claim and dead-letter the message with `reason`. */
export function reject(reason: string): Disposition {
  return { type: 'reject', reason };
}

/** True for a value built by {@link ack}, {@link requeue} or {@link reject} (or the same shape). */
export function isDisposition(value: unknown): value is Disposition {
  if (typeof value !== 'object' || value === null) return false;
  const type = (value as { type?: unknown }).type;
  if (type === 'ack') return true;
  if (type === 'requeue') {
    const delay = (value as { delayMs?: unknown }).delayMs;
    return delay === undefined || (typeof delay === 'number' && delay >= 0 && Number.isFinite(delay));
  }
  return type === 'reject' && typeof (value as { reason?: unknown }).reason === 'string';
}
