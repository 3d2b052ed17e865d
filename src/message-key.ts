/**
 * Default idempotency key of a delivery: the `idempotency-key` header, else the message id.
 */
import type { Delivery } from './delivery';
import { InvalidMessageError } from './errors';

/** Header carrying the idempotency key, set by the publisher helpers. */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';

/**
 * Reads the `idempotency-key` header (a string, or a Buffer as Kafka delivers it), else the
 * broker's message id.
 * @throws InvalidMessageError with reason `missing_key` when neither is present, or
 *   `invalid_key` when the header has another type
 */
export function defaultMessageKey(delivery: Delivery): string {
  const header = delivery.headers[IDEMPOTENCY_KEY_HEADER];
  if (header !== undefined && header !== null) {
    if (typeof header === 'string') return header;
    if (Buffer.isBuffer(header)) return header.toString('utf8');
    throw new InvalidMessageError('invalid_key', `header "${IDEMPOTENCY_KEY_HEADER}" must be a string, got ${Array.isArray(header) ? 'an array' : typeof header}`);
  }
  if (typeof delivery.messageId === 'string' && delivery.messageId.length > 0) return delivery.messageId;
  throw new InvalidMessageError('missing_key', `no "${IDEMPOTENCY_KEY_HEADER}" header and no message id`);
}
