/**
 * How a claim's key is stored: SHA-256 digests (32 bytes) of the key and of the fingerprint, a
 * digest of the key's scope (table, tenant, key) for the attempt counts of the transactional
 * mode, and the 64-bit advisory-lock id of that scope.
 */
import * as crypto from 'node:crypto';

/** `crypto.hash` (Node 20.12+, 21.7+): a one-shot digest, about half the CPU of a Hash object. */
const oneShot = (crypto as { hash?: (algorithm: string, data: string, outputEncoding: 'buffer') => Buffer }).hash;

/** SHA-256 of the UTF-8 text. */
export const sha256: (text: string) => Buffer = oneShot
  ? (text) => oneShot('sha256', text, 'buffer')
  : (text) => crypto.createHash('sha256').update(text, 'utf8').digest();

/** The digests and lock id of one claim. */
export interface KeyDigests {
  readonly key: Buffer;
  /** Unique per (inbox table, tenant, key). */
  readonly scope: Buffer;
  /** Signed 64-bit advisory-lock id (decimal text, as PostgreSQL's bigint). */
  readonly lockId: string;
}

/**
 * Digests of `key` for the platform inbox (`tenant` undefined) or a tenant's inbox. A NUL can
 * appear in neither a key nor a tenant, so the scope text is unambiguous.
 */
export function keyDigests(key: string, tenant: string | undefined): KeyDigests {
  const scope = sha256(tenant === undefined ? `p\u0000${key}` : `t\u0000${tenant}\u0000${key}`);
  return { key: sha256(key), scope, lockId: scope.readBigInt64BE(0).toString() };
}
