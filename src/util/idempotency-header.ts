/** The name of the header that carries a message's idempotency key: what publishers write and consumers read. */

/** Header carrying the idempotency key, set by the publisher helpers. Names are case-sensitive. */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
