/**
 * Documented bounds of the claim contract. Every claimer and the consumer check against these.
 */

/** Largest idempotency key, in bytes of UTF-8. Longer keys: use {@link digestKey}. */
export const MAX_KEY_BYTES = 512;

/** Largest fingerprint, in characters. */
export const MAX_FINGERPRINT_LENGTH = 128;

/** Smallest lease, in milliseconds. Shorter leases cannot be kept alive reliably. */
export const MIN_LEASE_TTL_MS = 100;

/** Largest lease, in milliseconds (1 day). */
export const MAX_LEASE_TTL_MS = 24 * 60 * 60 * 1000;

/** Largest done retention, in milliseconds (365 days). */
export const MAX_DONE_TTL_MS = 365 * 24 * 60 * 60 * 1000;

/** Default bound of a commit result, in bytes of UTF-8 JSON. */
export const DEFAULT_MAX_RESULT_BYTES = 4096;
