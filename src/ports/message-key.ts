/**
 * Default idempotency key of a delivery: the `idempotency-key` header, else the message id.
 *
 * Rule: two messages whose key bytes differ never share a claim.
 * - A text header is the key as is.
 * - A byte header (a Buffer: Kafka header values, AMQP byte arrays such as a Java `byte[]`) that
 *   is valid UTF-8 is the same key as that text, so one key sent as text by one producer and as
 *   bytes by another is one key.
 * - Any other byte header is encoded losslessly: {@link BINARY_KEY_PREFIX} followed by the
 *   base64url form of the bytes (RFC 4648 §5, no padding). The prefix starts with U+FFFD, which no
 *   accepted text key contains, so an encoded key never equals a text key.
 * - A text key (or message id) containing U+FFFD, the Unicode replacement character, is refused
 *   with reason `invalid_key`: its original bytes were not valid UTF-8 and were replaced before
 *   twophase saw them (amqplib decodes an AMQP long string as UTF-8), so different keys may look
 *   alike and cannot be told apart.
 * - A repeated header (kafkajs gives an array) is one key when every value gives the same key,
 *   else `invalid_key`.
 */
import { isUtf8 } from 'node:buffer';
import type { Delivery } from './delivery';
import { InvalidKeyError, InvalidMessageError } from '../util/errors';
import { IDEMPOTENCY_KEY_HEADER } from '../util/idempotency-header';
import { validateKey } from '../claim/keys';

export { IDEMPOTENCY_KEY_HEADER };

/**
 * Start of the key made from a byte header that is not valid UTF-8: U+FFFD (never part of an
 * accepted text key), then `base64url:`, then the bytes in base64url without padding.
 */
export const BINARY_KEY_PREFIX = '\uFFFDbase64url:';

const REPLACEMENT_CHARACTER = '\uFFFD';

/**
 * Reads the `idempotency-key` header, else the broker's message id (see the module rules above).
 * @throws InvalidMessageError with reason `missing_key` when neither is present, or
 *   `invalid_key` when the header has another type, repeats with differing values, or the key
 *   holds U+FFFD (bytes lost before twophase saw them)
 */
export function defaultMessageKey(delivery: Delivery): string {
  return messageKeyOf(delivery.headers, delivery.messageId);
}

/**
 * The same derivation as {@link defaultMessageKey} from a message's headers and message id:
 * for tools that see a message outside a consumer (the DLQ replay CLI prints keys with it).
 * @throws InvalidMessageError as {@link defaultMessageKey}
 */
export function messageKeyOf(headers: Readonly<Record<string, unknown>> | undefined, messageId: unknown): string {
  const header = headers?.[IDEMPOTENCY_KEY_HEADER];
  if (header !== undefined && header !== null) return keyFromHeaderValue(header);
  if (typeof messageId === 'string' && messageId.length > 0) return textKey(messageId, 'the message id');
  throw new InvalidMessageError('missing_key', `no "${IDEMPOTENCY_KEY_HEADER}" header and no message id${otherCaseHint(headers)}`);
}

/**
 * Checks a key a publisher is about to send by the consumer's own rule: the key a consumer
 * derives from the header on arrival ({@link keyFromHeaderValue}) must pass {@link validateKey}.
 * So a publisher refuses what every consumer would dead-letter as `invalid_key` (NUL, a lone
 * surrogate, more than 512 bytes, U+FFFD in a text header), before anything is sent. The
 * consumer's own namespace prefix is not known here; it adds the namespace's length.
 * @param wire how the header travels: `'text'` (an AMQP long string, decoded by amqplib as
 *   UTF-8) or `'bytes'` (a Kafka header: the key's UTF-8 bytes)
 * @throws InvalidKeyError naming what is wrong with the key
 */
export function validatePublishedKey(key: unknown, wire: 'text' | 'bytes'): asserts key is string {
  validateKey(key);
  let derived: string;
  try {
    derived = keyFromHeaderValue(wire === 'bytes' ? Buffer.from(key, 'utf8') : key);
  } catch (error) {
    if (error instanceof InvalidMessageError) throw new InvalidKeyError(`consumers would dead-letter this key as invalid_key: ${error.message}`);
    throw error;
  }
  validateKey(derived);
}

/**
 * The key held by one `idempotency-key` header value: a string, a Buffer (or Uint8Array), or an
 * array of those when the header repeats.
 * @throws InvalidMessageError with reason `invalid_key` for any other value
 */
export function keyFromHeaderValue(value: unknown): string {
  if (!Array.isArray(value)) return singleKey(value);
  if (value.length === 0) throw invalidKey(`header "${IDEMPOTENCY_KEY_HEADER}" is an empty list`);
  const first = singleKey(value[0]);
  for (let i = 1; i < value.length; i++) {
    if (singleKey(value[i]) !== first) {
      throw invalidKey(`header "${IDEMPOTENCY_KEY_HEADER}" is repeated ${value.length} times with differing values; one message must carry one key`);
    }
  }
  return first;
}

function singleKey(value: unknown): string {
  if (typeof value === 'string') return textKey(value, `header "${IDEMPOTENCY_KEY_HEADER}"`);
  if (value instanceof Uint8Array) return bytesKey(Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength));
  throw invalidKey(`header "${IDEMPOTENCY_KEY_HEADER}" must be a string or bytes, got ${value === null ? 'null' : Array.isArray(value) ? 'a nested list' : typeof value}`);
}

function textKey(text: string, what: string): string {
  if (text.includes(REPLACEMENT_CHARACTER)) {
    throw invalidKey(
      `${what} contains U+FFFD (the Unicode replacement character): its bytes were not valid UTF-8 and were replaced before twophase saw them ` +
        '(amqplib decodes an AMQP long string as UTF-8), so distinct keys could look alike. Send the key as valid UTF-8 text, or as a byte array',
    );
  }
  return text;
}

function bytesKey(bytes: Buffer): string {
  // Valid UTF-8 (strict: no overlong forms, surrogates or code points past U+10FFFF; a BOM is
  // kept) is the same key as that text, unless the text holds U+FFFD: that character is reserved
  // for encoded keys, so such bytes are encoded too (their bytes are intact here).
  if (isUtf8(bytes)) {
    const text = bytes.toString('utf8');
    if (!text.includes(REPLACEMENT_CHARACTER)) return text;
  }
  return BINARY_KEY_PREFIX + bytes.toString('base64url');
}

function invalidKey(message: string): InvalidMessageError {
  return new InvalidMessageError('invalid_key', message);
}

/** A hint when a header differs from the key header only by case (header names are case-sensitive). */
function otherCaseHint(headers: Readonly<Record<string, unknown>> | undefined): string {
  if (!headers) return '';
  const near = Object.keys(headers).find((name) => name !== IDEMPOTENCY_KEY_HEADER && name.toLowerCase() === IDEMPOTENCY_KEY_HEADER);
  return near === undefined ? '' : ` (a header "${near}" is present, but header names are case-sensitive: the key header is "${IDEMPOTENCY_KEY_HEADER}")`;
}
