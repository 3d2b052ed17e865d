/**
 * Bad input for the adapters, and the oracle of what must become of it.
 *
 * A fuzz message has an `idempotency-key` header of any shape (absent, empty, very long, braces,
 * unicode, binary, NUL, wrong types, huge), maybe a message id, extra headers of odd types and
 * sizes, and a body that may be valid JSON, not JSON, truncated, binary, empty or large.
 *
 * The oracle follows the documented pipeline (README settlement table, src/ports/message-key.ts):
 * derive the key (header, else message id; `missing_key` / `invalid_key`; bytes that are not
 * valid UTF-8 get the binary key encoding; text holding U+FFFD is `invalid_key`), validate it once
 * namespaced (non-empty, at most MAX_KEY_BYTES bytes of UTF-8, no NUL, no lone surrogate), then decode the body as
 * UTF-8 JSON (`invalid_body`). A message that passes runs the handler; anything else is
 * dead-lettered with that reason and an `InvalidMessageError`, and the handler never runs.
 */
import { isUtf8 } from 'node:buffer';
import fc from 'fast-check';
import { MAX_KEY_BYTES } from '../../../src';

/** The header value as published, or undefined for no header at all. */
export type HeaderValue = string | Buffer | number | boolean | null | Record<string, unknown> | unknown[] | undefined;

export interface FuzzMessage {
  /** What kind of bad (or good) input this is, for failure messages and tallies. */
  readonly label: string;
  readonly header: HeaderValue;
  readonly messageId?: string;
  readonly extraHeaders: Readonly<Record<string, unknown>>;
  readonly body: Buffer;
}

/** `key` undefined: handled under a key the broker makes up (Kafka's `topic:partition:offset`). */
export type Fate = { readonly kind: 'handled'; readonly key: string | undefined } | { readonly kind: 'dead'; readonly reason: 'missing_key' | 'invalid_key' | 'invalid_body' };

/** How a transport changes a header value or message id on its way to the consumer. */
export interface Transport {
  /** The header value as the consumer receives it (undefined: header absent). */
  header(value: HeaderValue): unknown;
  /** The message id as the consumer receives it. */
  messageId(value: string | undefined): string | undefined;
  /**
   * True when the broker gives every record an id of its own (Kafka: `topic:partition:offset`),
   * which the producer cannot set: a record without a key header is handled under it.
   */
  readonly brokerRecordIds?: boolean;
}

/** The in-process broker hands headers and message ids over untouched. */
export const IN_PROCESS: Transport = { header: (v) => v, messageId: (v) => v };

/**
 * The fate of `m` in a consumer named `namespace` (a namespaced key is `<ns>:<key>`, with `:`
 * and `\` in the namespace escaped).
 */
export function expectedFate(m: FuzzMessage, namespace: string, transport: Transport): Fate {
  const header = transport.header(m.header);
  let raw: string | undefined;
  if (header !== undefined && header !== null) {
    raw = expectedHeaderKey(header);
    if (raw === undefined) return { kind: 'dead', reason: 'invalid_key' };
  } else if (transport.brokerRecordIds) {
    return bodyFate(m, undefined);
  } else {
    const id = transport.messageId(m.messageId);
    if (typeof id !== 'string' || id.length === 0) return { kind: 'dead', reason: 'missing_key' };
    if (id.includes('\uFFFD')) return { kind: 'dead', reason: 'invalid_key' };
    raw = id;
  }
  const wellFormed = (raw as unknown as { isWellFormed(): boolean }).isWellFormed();
  if (raw.length === 0 || raw.includes('\u0000') || !wellFormed || Buffer.byteLength(raw, 'utf8') > MAX_KEY_BYTES) return { kind: 'dead', reason: 'invalid_key' };
  const key = `${namespace.replace(/\\/g, '\\\\').replace(/:/g, '\\:')}:${raw}`;
  if (Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) return { kind: 'dead', reason: 'invalid_key' };
  return bodyFate(m, key);
}

/**
 * The raw key a header value gives (docs/configuration.md, "Keys"), or undefined for `invalid_key`: text without
 * U+FFFD as is; bytes that are valid UTF-8 (and hold no U+FFFD) as their text, other bytes as
 * U+FFFD `base64url:` + base64url; a list whose values all give one key, that key.
 */
function expectedHeaderKey(header: unknown): string | undefined {
  if (Array.isArray(header)) {
    const keys = header.map(expectedHeaderKey);
    if (keys.length === 0 || keys.some((k) => k === undefined || k !== keys[0])) return undefined;
    return keys[0];
  }
  if (typeof header === 'string') return header.includes('\uFFFD') ? undefined : header;
  if (!Buffer.isBuffer(header)) return undefined;
  const text = header.toString('utf8');
  const valid = isUtf8(header) && !text.includes('\uFFFD');
  return valid ? text : `\uFFFDbase64url:${header.toString('base64url')}`;
}

function bodyFate(m: FuzzMessage, key: string | undefined): Fate {
  try {
    JSON.parse(m.body.toString('utf8'));
  } catch {
    return { kind: 'dead', reason: 'invalid_body' };
  }
  return { kind: 'handled', key };
}

/** Options of the generators, per transport. */
export interface FuzzLimits {
  /** Namespace of the consumer (to aim keys at the byte limit exactly). */
  readonly namespace: string;
  /** Largest huge header value, bytes (RabbitMQ: the whole header frame must fit in frame_max). */
  readonly hugeHeaderBytes: number;
  /** Largest body, bytes. */
  readonly hugeBodyBytes: number;
  /** Whether header values may be nested tables and arrays (the in-process broker and AMQP: yes). */
  readonly structuredHeaders: boolean;
  /** Whether header values may be numbers, booleans and null (Kafka: no, only strings and Buffers). */
  readonly typedHeaders?: boolean;
  /** A unique tag mixed into generated valid keys so runs never collide in a shared store. */
  readonly runTag: string;
}

const unicodeText = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 });
const anyCodePoints = fc.string({ unit: 'binary', minLength: 1, maxLength: 12 });

/** Header values, good and bad. */
export function headerValue(limits: FuzzLimits): fc.Arbitrary<{ label: string; header: HeaderValue; messageId?: string }> {
  const room = MAX_KEY_BYTES - Buffer.byteLength(limits.namespace, 'utf8') - 1; // longest raw key that fits once namespaced
  const unique = (s: string) => `${limits.runTag}${s}`;
  const options: fc.Arbitrary<{ label: string; header: HeaderValue; messageId?: string }>[] = [
    fc.nat().map((n) => ({ label: 'plain', header: unique(`k${n}`) })),
    fc.constant({ label: 'absent, no message id', header: undefined }),
    fc.nat().map((n) => ({ label: 'absent, message id', header: undefined, messageId: unique(`mid-${n}`) })),
    fc.constant({ label: 'absent, empty message id', header: undefined, messageId: '' }),

    fc.constant({ label: 'empty', header: '' }),
    fc.constant({ label: 'empty Buffer', header: Buffer.alloc(0) }),
    fc.integer({ min: room + 1, max: 4 * MAX_KEY_BYTES }).map((n) => ({ label: 'very long', header: unique('L'.repeat(n)) })),
    fc.constant({ label: 'exactly at the limit once namespaced', header: unique('x').padEnd(room, 'x') }),
    fc.constant({ label: 'one byte over the limit once namespaced', header: unique('x').padEnd(room + 1, 'x') }),
    fc.constantFrom('{', '}', '{a}', '}{', '{}', '{{x}}', 'a{b}c').map((s) => ({ label: 'braces', header: unique(s) })),
    unicodeText.map((s) => ({ label: 'unicode', header: unique(s) })),
    anyCodePoints.map((s) => ({ label: 'any code points', header: unique(s) })),
    fc.uint8Array({ minLength: 1, maxLength: 24 }).map((b) => ({ label: 'binary Buffer', header: Buffer.concat([Buffer.from(limits.runTag), Buffer.from(b)]) })),
    fc.constant({ label: 'NUL inside', header: unique('a\u0000b') }),
    fc.constant({ label: 'huge', header: unique('H'.repeat(limits.hugeHeaderBytes)) }),
  ];
  if (limits.typedHeaders !== false) {
    options.push(
      fc.constant({ label: 'null header, no message id', header: null }),
      // Within what every transport can encode (amqplib refuses integers beyond 64 bits).
      fc.oneof(fc.integer(), fc.double({ min: -1e9, max: 1e9, noNaN: true })).map((n) => ({ label: 'number', header: n })),
      fc.boolean().map((b) => ({ label: 'boolean', header: b })),
    );
  }
  if (limits.structuredHeaders) {
    options.push(
      fc.constant({ label: 'object', header: { key: 'x' } }),
      fc.constant({ label: 'array', header: ['x', 1] }),
    );
  }
  return fc.oneof(...options);
}

/** Extra headers beside the key: odd types and sizes that must not disturb anything. */
export function extraHeaders(limits: FuzzLimits): fc.Arbitrary<Record<string, unknown>> {
  const values: fc.Arbitrary<unknown>[] = [fc.string({ maxLength: 20 }), fc.constant('J'.repeat(Math.floor(limits.hugeHeaderBytes / 2)))];
  if (limits.typedHeaders !== false) values.push(fc.integer(), fc.boolean());
  if (limits.structuredHeaders) values.push(fc.constant({ nested: { deep: [1, 'two'] } }), fc.constant([1, 2, 3]));
  return fc.dictionary(fc.constantFrom('x-junk', 'content', 'trace', 'ünï-cöde'), fc.oneof(...values), { maxKeys: 2 });
}

/** Bodies, good and bad. */
export function body(limits: FuzzLimits): fc.Arbitrary<{ label: string; body: Buffer }> {
  const good = fc.record({ n: fc.integer(), s: fc.string({ maxLength: 30 }) }).map((o) => JSON.stringify(o));
  return fc.oneof(
    { weight: 4, arbitrary: good.map((s) => ({ label: 'json', body: Buffer.from(s) })) },
    { weight: 1, arbitrary: fc.constantFrom('abc', '{', 'undefined', "{'a':1}", 'NaN', '[1,]').map((s) => ({ label: 'not JSON', body: Buffer.from(s) })) },
    { weight: 1, arbitrary: good.chain((s) => fc.nat({ max: s.length - 1 }).map((n) => ({ label: 'truncated', body: Buffer.from(s.slice(0, n)) }))) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((b) => ({ label: 'binary', body: Buffer.from(b) })) },
    { weight: 1, arbitrary: fc.constant({ label: 'empty', body: Buffer.alloc(0) }) },
    { weight: 1, arbitrary: fc.constant({ label: 'BOM + JSON', body: Buffer.from('\uFEFF{"a":1}') }) },
    { weight: 1, arbitrary: fc.constant({ label: 'huge JSON', body: Buffer.from(JSON.stringify({ pad: 'p'.repeat(limits.hugeBodyBytes) })) }) },
    { weight: 1, arbitrary: fc.constant({ label: 'huge truncated', body: Buffer.from(JSON.stringify({ pad: 'p'.repeat(limits.hugeBodyBytes) })).subarray(0, limits.hugeBodyBytes - 3) }) },
  );
}

export function fuzzMessage(limits: FuzzLimits): fc.Arbitrary<FuzzMessage> {
  return fc.record({ key: headerValue(limits), extra: extraHeaders(limits), body: body(limits) }).map(({ key, extra, body: b }) => ({
    label: `key ${key.label} / body ${b.label}`,
    header: key.header,
    ...(key.messageId === undefined ? {} : { messageId: key.messageId }),
    extraHeaders: extra,
    body: b.body,
  }));
}

/** The headers to publish for `m` (the key header only when present), plus a tracking id. */
export function headersOf(m: FuzzMessage, trackingHeader: string, trackingId: string): Record<string, unknown> {
  const headers: Record<string, unknown> = { ...m.extraHeaders, [trackingHeader]: trackingId };
  if (m.header !== undefined) headers['idempotency-key'] = m.header;
  return headers;
}

/**
 * fast-check parameters for adapter fuzz runs: on failure, report the seed, the path and each
 * message's label instead of the counterexample itself (whose bodies can be megabytes).
 */
export function labelledReport<T extends readonly { label: string }[]>(): Pick<fc.Parameters<[T]>, 'asyncReporter'> {
  return {
    asyncReporter: async (details) => {
      if (!details.failed) return;
      const labels = details.counterexample?.[0]?.map((m) => m.label) ?? [];
      const error = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
      throw new Error(`fuzz run failed after ${details.numRuns} runs (seed ${details.seed}, path "${details.counterexamplePath}")\nmessages: ${JSON.stringify(labels)}\n${error}`);
    },
  };
}
