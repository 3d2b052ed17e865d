/**
 * Redis key layout of the claimer: one Redis key per business key, `<prefix>:{<escaped key>}`.
 *
 * The braces are a Redis Cluster hash tag: only the part between the first `{` and the next `}`
 * is hashed, so the slot of a record depends on the business key alone, never on the prefix
 * (https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#hash-tags).
 * A brace inside the business key would end the tag early, so `%`, `{` and `}` are
 * percent-escaped (`%25`, `%7B`, `%7D`): the mapping stays one-to-one and the tag always spans the
 * whole key. A prefix (ours, or the ioredis `keyPrefix` option) containing a brace would hijack
 * the tag and is refused.
 */
import { ConfigurationError } from '../../src';

/** Default namespace prefix of every record key. */
export const DEFAULT_PREFIX = 'twophase';

/** Longest accepted prefix, in bytes of UTF-8. */
export const MAX_PREFIX_BYTES = 128;

/** Number of Redis Cluster hash slots. */
export const HASH_SLOTS = 16384;

/**
 * Checks a namespace prefix: a non-empty string of at most {@link MAX_PREFIX_BYTES} bytes with no
 * `{`, `}` or NUL.
 * @param field the option name reported in the error (`prefix`, `keyPrefix`)
 * @throws ConfigurationError naming the field and the value
 */
export function validatePrefix(field: string, prefix: unknown): asserts prefix is string {
  if (typeof prefix !== 'string' || prefix.length === 0) {
    throw new ConfigurationError(`${field} must be a non-empty string, got ${JSON.stringify(prefix)}`);
  }
  if (Buffer.byteLength(prefix, 'utf8') > MAX_PREFIX_BYTES) {
    throw new ConfigurationError(`${field} must be at most ${MAX_PREFIX_BYTES} bytes, got ${Buffer.byteLength(prefix, 'utf8')}`);
  }
  if (/[{}]/.test(prefix) || prefix.includes('\u0000')) {
    throw new ConfigurationError(
      `${field} ${JSON.stringify(prefix)} contains "{", "}" or NUL; braces would take over the Redis Cluster hash tag of every key`,
    );
  }
}

/**
 * Checks the ioredis `keyPrefix` client option (prepended by ioredis to every key): it may be
 * absent or empty, but must not contain braces.
 * @throws ConfigurationError when it contains `{` or `}`
 */
export function validateClientKeyPrefix(keyPrefix: unknown): void {
  if (keyPrefix === undefined || keyPrefix === null || keyPrefix === '') return;
  const text = Buffer.isBuffer(keyPrefix) ? keyPrefix.toString('latin1') : String(keyPrefix);
  if (/[{}]/.test(text)) {
    throw new ConfigurationError(
      `the ioredis keyPrefix option ${JSON.stringify(text)} contains "{" or "}"; it would take over the Redis Cluster hash tag of every key`,
    );
  }
}

const ESCAPES: Record<string, string> = { '%': '%25', '{': '%7B', '}': '%7D' };

/** Percent-escapes `%`, `{` and `}` so the key can sit inside a hash tag. One-to-one. */
export function escapeKey(key: string): string {
  return /[%{}]/.test(key) ? key.replace(/[%{}]/g, (c) => ESCAPES[c]!) : key;
}

/**
 * The Redis key of a business key's record: `<prefix>:{<escaped key>}` (without the ioredis
 * `keyPrefix`, which the client prepends itself).
 */
export function recordKey(prefix: string, key: string): string {
  return `${prefix}:{${escapeKey(key)}}`;
}

/**
 * The Redis Cluster hash slot of a business key's record: CRC16 (XMODEM) of the escaped key's
 * UTF-8 bytes, modulo 16384. Prefixes contain no braces, so the tag is always the escaped key.
 */
export function recordSlot(key: string): number {
  return hashSlot(escapeKey(key));
}

/**
 * The Redis Cluster hash slot of a full key, hash tags honoured, as `CLUSTER KEYSLOT` computes it
 * (https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#key-distribution-model).
 */
export function hashSlot(fullKey: string | Buffer): number {
  let bytes = typeof fullKey === 'string' ? Buffer.from(fullKey, 'utf8') : fullKey;
  const open = bytes.indexOf(0x7b);
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) bytes = bytes.subarray(open + 1, close);
  }
  return crc16(bytes) % HASH_SLOTS;
}

const CRC16_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[i] = crc;
  }
  return table;
})();

/** CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as used by Redis Cluster. */
function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ byte) & 0xff]!;
  return crc;
}
