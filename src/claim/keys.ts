/**
 * Idempotency keys: validation, namespacing and digests.
 */
import { createHash } from 'node:crypto';
import { ConfigurationError, InvalidKeyError } from '../util/errors';
import type { ClaimOptions } from './claimer';
import { checkInteger } from '../util/option-checks';
import {
  MAX_DONE_TTL_MS,
  MAX_FINGERPRINT_LENGTH,
  MAX_KEY_BYTES,
  MAX_LEASE_TTL_MS,
  MIN_LEASE_TTL_MS,
} from '../util/limits';

/**
 * Checks that `key` is a non-empty string of at most {@link MAX_KEY_BYTES} bytes (UTF-8) with
 * no NUL character, and well-formed Unicode: a lone surrogate has no UTF-8 form (a store would
 * keep U+FFFD for it), so two distinct keys holding one would share a claim.
 * @throws InvalidKeyError otherwise
 */
export function validateKey(key: unknown): asserts key is string {
  if (typeof key !== 'string') throw new InvalidKeyError(`key must be a string, got ${typeof key}`);
  if (key.length === 0) throw new InvalidKeyError('key must not be empty');
  // A UTF-16 code unit is at most 3 bytes of UTF-8 (a surrogate pair, two units, is 4): a key of
  // up to MAX_KEY_BYTES / 3 units fits without counting its bytes.
  if (key.length > MAX_KEY_UNITS_UNCOUNTED) {
    const bytes = Buffer.byteLength(key, 'utf8');
    if (bytes > MAX_KEY_BYTES) {
      throw new InvalidKeyError(`key is ${bytes} bytes, more than ${MAX_KEY_BYTES}; digest long keys with digestKey()`);
    }
  }
  if (key.includes('\u0000')) throw new InvalidKeyError('key must not contain NUL characters');
  if (!(key as unknown as WellFormedCheck).isWellFormed()) throw new InvalidKeyError('key must be well-formed Unicode: it holds a lone surrogate, which has no UTF-8 form');
}

/** Longest key (in UTF-16 code units) that cannot pass MAX_KEY_BYTES in UTF-8. */
const MAX_KEY_UNITS_UNCOUNTED = Math.floor(MAX_KEY_BYTES / 3);

/** `String.prototype.isWellFormed` (ES2024, Node ≥ 20), not in this project's ES2022 lib typings. */
type WellFormedCheck = { isWellFormed(): boolean };

/**
 * The namespace of `runOnce`'s keys (`run-once:<operation>:…`). No consumer may take it as its
 * name: its message keys would then be `runOnce` keys, and a producer could plant the stored
 * response a later request replays.
 */
export const RUN_ONCE_NAMESPACE = 'run-once';

/**
 * Joins a namespace (a consumer group, or a handler name) and a message key, so two consumer
 * groups never deduplicate each other: `namespaceKey('billing', 'order-7')` → `billing:order-7`.
 * A `:` inside the namespace is escaped as `\:` so `a:b` + `c` never equals `a` + `b:c`.
 * @throws InvalidKeyError when the namespace is empty or the result is not a valid key
 */
export function namespaceKey(namespace: string, key: string): string {
  if (typeof namespace !== 'string' || namespace.length === 0) {
    throw new InvalidKeyError('namespace must be a non-empty string');
  }
  const joined = `${namespace.replace(/\\/g, '\\\\').replace(/:/g, '\\:')}:${key}`;
  validateKey(joined);
  return joined;
}

/**
 * Replaces a key by `sha256:` + the hex SHA-256 digest of its UTF-8 bytes (71 characters).
 * Use for keys that may be longer than {@link MAX_KEY_BYTES} or hold binary data.
 */
export function digestKey(key: string | Uint8Array): string {
  return `sha256:${createHash('sha256').update(key).digest('hex')}`;
}

/**
 * Checks claim TTLs and the fingerprint: `MIN_LEASE_TTL_MS ≤ leaseTtlMs ≤ MAX_LEASE_TTL_MS`,
 * `leaseTtlMs ≤ doneTtlMs ≤ MAX_DONE_TTL_MS`, integers; fingerprint ≤ 128 characters.
 * @throws ConfigurationError naming the field and the value
 */
export function validateClaimOptions(options: ClaimOptions): void {
  // A frozen options object cannot change once checked: consumers pass one per claim.
  if (validatedFrozen.has(options)) return;
  const { leaseTtlMs, doneTtlMs, fingerprint } = options ?? ({} as ClaimOptions);
  checkTtl('leaseTtlMs', leaseTtlMs, MIN_LEASE_TTL_MS, MAX_LEASE_TTL_MS);
  checkTtl('doneTtlMs', doneTtlMs, MIN_LEASE_TTL_MS, MAX_DONE_TTL_MS);
  if (doneTtlMs < leaseTtlMs) {
    throw new ConfigurationError(`doneTtlMs (${doneTtlMs}) must be ≥ leaseTtlMs (${leaseTtlMs})`);
  }
  if (fingerprint !== undefined && (typeof fingerprint !== 'string' || fingerprint.length > MAX_FINGERPRINT_LENGTH)) {
    throw new ConfigurationError(`fingerprint must be a string of at most ${MAX_FINGERPRINT_LENGTH} characters`);
  }
  if (Object.isFrozen(options)) validatedFrozen.add(options);
}

const validatedFrozen = new WeakSet<ClaimOptions>();

/**
 * Checks one TTL field: an integer number of milliseconds within [min, max].
 * @throws ConfigurationError naming the field and the value
 */
export function checkTtl(field: string, value: unknown, min: number, max: number): void {
  checkInteger(field, value, min, max, 'milliseconds');
}
