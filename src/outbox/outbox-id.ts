/**
 * Outbox message ids. A message staged by a handler (or by `runOnce`) gets an id derived from its
 * scope (the consumer's namespaced idempotency key, or the `runOnce` key) and its position among
 * the messages that run staged (0, 1, 2, … in call order). A delivery whose transaction rolled
 * back and runs again stages the same ids, so whatever it publishes carries the same
 * `idempotency-key` as the first run would have.
 *
 * The id is the first 16 bytes of SHA-256 over the UTF-8 bytes of
 * `"twophase-outbox-v1\n" + scope + "\n" + position` (position in decimal), printed as a UUID with
 * the version nibble set to 8 and the variant bits to `10` (RFC 9562, UUIDv8: a name-based UUID
 * of a custom hash). Any language recomputes it with a SHA-256 function.
 */
import { createHash, randomUUID } from 'node:crypto';
import { InvalidOutboxMessageError } from '../util/errors';
import { describeType } from '../util/known-options';

/** The text hashed before the scope; a later scheme changes the version suffix. */
export const OUTBOX_ID_DOMAIN = 'twophase-outbox-v1';

/**
 * The deterministic id of the message at `position` (0-based) of `scope`.
 * @throws InvalidOutboxMessageError when `scope` is not a non-empty string or `position` not an integer ≥ 0
 */
export function outboxMessageId(scope: string, position: number): string {
  if (typeof scope !== 'string' || scope.length === 0) throw new InvalidOutboxMessageError(`an outbox id scope must be a non-empty string, got ${describeType(scope)}`);
  if (!Number.isSafeInteger(position) || position < 0) throw new InvalidOutboxMessageError(`an outbox message position must be an integer ≥ 0, got ${describeType(position)}`);
  const digest = createHash('sha256').update(`${OUTBOX_ID_DOMAIN}\n${scope}\n${position}`, 'utf8').digest();
  digest[6] = (digest[6]! & 0x0f) | 0x80;
  digest[8] = (digest[8]! & 0x3f) | 0x80;
  const hex = digest.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

/** A random id (UUIDv4), for messages staged without a scope. */
export function randomOutboxMessageId(): string {
  return randomUUID();
}
