/**
 * What a handler returns. Anything else is an {@link InvalidDispositionError}, never an ack.
 */
import type { JsonValue } from '../claim/claimer';
import { InvalidDispositionError } from '../util/errors';
import { checkKnownOptions, describeType } from '../util/known-options';

export type Disposition =
  | { readonly type: 'ack'; readonly result?: JsonValue }
  | { readonly type: 'requeue'; readonly delayMs?: number; readonly reason?: string }
  | { readonly type: 'reject'; readonly reason: string };

/**
 * Success: commit the claim (storing `result`, JSON ≤ maxResultBytes) and ack the message.
 * @throws InvalidDispositionError when `result` is a function, a symbol or a bigint (JSON cannot
 *   hold it); thrown from a handler, it dead-letters the message with reason `invalid_disposition`
 */
export function ack(result?: JsonValue): Disposition {
  if (result === undefined) return ACK;
  const type = typeof result;
  if (type === 'function' || type === 'symbol' || type === 'bigint') {
    throw new InvalidDispositionError(result, `ack(result): result must be JSON (an object, array, string, number, boolean or null), got a ${type}`);
  }
  return { type: 'ack', result };
}

const ACK: Disposition = Object.freeze({ type: 'ack' });
const REQUEUE_OPTIONS = ['delayMs', 'reason'];

/**
 * Try again later: release the claim and requeue, after `delayMs` ms or the backoff. Counts as an attempt.
 * @throws InvalidDispositionError when `options` is not an object, has an unknown name, or
 *   `delayMs` is not a finite number ≥ 0 (a "retry at" time already past: pass
 *   `Math.max(0, delayMs)`), or `reason` is not a string; thrown from a handler, it dead-letters
 *   the message with reason `invalid_disposition`
 */
export function requeue(options: { delayMs?: number; reason?: string } = {}): Disposition {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidDispositionError(options, `requeue(options) takes { delayMs?, reason? }, got ${describeType(options)}`);
  }
  try {
    checkKnownOptions('requeue(options)', options, REQUEUE_OPTIONS);
  } catch (error) {
    throw new InvalidDispositionError(options, (error as Error).message);
  }
  const { delayMs, reason } = options;
  if (delayMs !== undefined && (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0)) {
    throw new InvalidDispositionError(options, `requeue({ delayMs }): delayMs must be a finite number of ms ≥ 0, got ${describeType(delayMs)}`);
  }
  if (reason !== undefined && typeof reason !== 'string') {
    throw new InvalidDispositionError(options, `requeue({ reason }): reason must be a string, got ${describeType(reason)}`);
  }
  return { type: 'requeue', ...options };
}

/**
 * Give up: release the claim and dead-letter the message with `reason`.
 * An empty reason is dead-lettered as `handler_rejected`.
 * @throws InvalidDispositionError when `reason` is not a string; thrown from a handler, it
 *   dead-letters the message with reason `invalid_disposition`
 */
export function reject(reason: string): Disposition {
  if (typeof reason !== 'string') {
    throw new InvalidDispositionError(reason, `reject(reason): reason must be a string (it names the dead-letter cause), got ${describeType(reason)}`);
  }
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
