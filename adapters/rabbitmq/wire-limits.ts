/**
 * What amqplib can put on the wire: a pre-flight check of a publish, so a publish amqplib would
 * refuse fails alone with a typed error and never reaches the channel.
 *
 * amqplib 2.x encodes a publish before it registers the confirm callback, and 2.3.1 throws a
 * `RangeError` for a header table over its 65 536-byte encoding buffer, so a refused publish no
 * longer shifts later confirms on a bare `ConfirmChannel`. Through amqp-connection-manager,
 * though, the publish is encoded later, in its send loop: a throw there is reported as a channel
 * wrapper `error` while the publish waits for a confirm that never comes (it times out), so the
 * check still runs first, here.
 *
 * amqplib 2.x exposes no encoder (its `exports` map closes `amqplib/lib/*`), so this module
 * computes the encoded sizes itself: the AMQP 0-9-1 field-table layout as RabbitMQ reads it
 * ("AMQP 0-9-1 Errata", field types), the basic.publish and content-header frame layouts
 * ("AMQP 0-9-1 specification", section 4.2.6), and amqplib's documented choice of field type for
 * each JavaScript value (a number becomes the smallest signed integer type that holds it, or a
 * double; `{ '!': type, value }` names the type). A unit test checks the sizes against amqplib's
 * own encoder on random tables.
 */
import type { Options } from 'amqplib';
import { ConfigurationError } from '../../src';
import { MessageTooLargeError } from './errors';

/** Largest `headers` table amqplib can encode, bytes of AMQP field-table encoding (its encoding buffer). */
export const MAX_HEADER_TABLE_BYTES = 65_536;

/**
 * RabbitMQ's default `max_message_size` (largest message body a broker accepts, bytes) for a
 * broker version, as the server announces it in `connection.start` (`serverProperties.version`).
 * AMQP 0-9-1 does not tell a client the configured limit, so this is the documented default:
 * 16 MiB from RabbitMQ 4.0 (rabbitmq-server pull request 11455, "Reduce default maximum message
 * size to 16MB"; "Configuration" docs, `max_message_size`), 128 MiB in 3.8 – 3.13 (rabbitmq-server
 * issue 11187; a 3.10.8 broker refuses 134 217 729 bytes, "larger than configured max size 134217728").
 * A broker refuses a larger body by closing the channel (406 PRECONDITION_FAILED), which fails every publish waiting on
 * that channel. An unknown or unparsable version gives the 4.x default, the smaller one.
 */
export function defaultMaxMessageBytes(serverVersion: string | undefined): number {
  const major = Number.parseInt(serverVersion?.split('.')[0] ?? '', 10);
  return Number.isInteger(major) && major < 4 ? MAX_MESSAGE_BYTES_3X : MAX_MESSAGE_BYTES_4X;
}

/** RabbitMQ 3.8 – 3.13's default `max_message_size`, bytes (128 MiB). */
const MAX_MESSAGE_BYTES_3X = 128 * 1024 * 1024;
/** RabbitMQ 4.x's default `max_message_size`, bytes (16 MiB). */
const MAX_MESSAGE_BYTES_4X = 16 * 1024 * 1024;

/** Longest AMQP short string (names, message id, routing key, …), bytes of UTF-8. */
const SHORT_STRING_MAX_BYTES = 255;

/** Fixed part of a content-header frame: frame header 7, class 2, weight 2, body size 8, flags 2, frame end 1. */
const HEADER_FRAME_FIXED_BYTES = 22;

/** Short-string properties of basic.publish's content header, in wire order. */
const SHORT_STRING_PROPERTIES = ['contentType', 'contentEncoding', 'correlationId', 'replyTo', 'messageId', 'type', 'userId', 'appId', 'clusterId'] as const;

/**
 * Checks that amqplib can encode a publish of `contentBytes` bytes to `exchange` with
 * `routingKey` and `options` (as given to `ConfirmChannel.publish`).
 * @param what names the publish in the error message
 * @param frameMax the connection's negotiated frame_max, bytes, when known
 * @throws MessageTooLargeError when the header table encodes to more than
 *   {@link MAX_HEADER_TABLE_BYTES} bytes, or the properties frame is over `frameMax` (nothing was sent)
 * @throws ConfigurationError when amqplib cannot encode it otherwise: a header value with no AMQP
 *   type, a header name, message id, routing key or other short string over 255 bytes, a
 *   priority or delivery mode out of range (nothing was sent)
 */
export function assertPublishable(exchange: string, routingKey: string, contentBytes: number, options: Options.Publish, what: string, frameMax?: number): void {
  const headerBytes = tableOrFail(headersOnWire(options), what);
  if (headerBytes > MAX_HEADER_TABLE_BYTES) throw tooLarge(what, headerBytes);
  let frameBytes = HEADER_FRAME_FIXED_BYTES + headerBytes;
  try {
    shortString('exchange', exchange);
    shortString('routing key', routingKey);
    for (const name of SHORT_STRING_PROPERTIES) {
      const value = (options as Record<string, unknown>)[name];
      if (value !== undefined && value !== null) frameBytes += 1 + shortString(name, value);
    }
    if (options.expiration !== undefined && options.expiration !== null) frameBytes += 1 + shortString('expiration', String(options.expiration));
    const deliveryMode = options.persistent !== undefined ? 2 : options.deliveryMode;
    if (deliveryMode !== undefined && deliveryMode !== null) frameBytes += typeof deliveryMode === 'number' ? octet('deliveryMode', deliveryMode) : deliveryMode ? 1 : 0;
    if (options.priority !== undefined && options.priority !== null) frameBytes += octet('priority', options.priority);
    if (options.timestamp !== undefined && options.timestamp !== null) {
      if (!Number.isInteger(options.timestamp) || options.timestamp < 0) throw new Error(`timestamp must be a non-negative integer (seconds), got ${String(options.timestamp)}`);
      frameBytes += 8;
    }
    if (!Number.isInteger(contentBytes) || contentBytes < 0) throw new Error(`content size must be a non-negative integer, got ${String(contentBytes)}`);
  } catch (error) {
    throw new ConfigurationError(`${what} was not sent: amqplib cannot encode it (${(error as Error).message})`, { cause: error });
  }
  // amqplib splits the body into frames of frameMax but sends the properties as one frame; the
  // broker closes the whole connection (FRAME_ERROR) for a frame over the negotiated frame_max.
  if (frameMax !== undefined && frameMax > 0 && frameBytes > frameMax) {
    throw new MessageTooLargeError(`${what} was not sent: its properties frame is ${frameBytes} bytes, more than the connection's negotiated frame_max of ${frameMax} bytes`);
  }
}

/**
 * Checks that amqplib can encode `headers` alone and returns the table's encoded size in bytes.
 * @throws MessageTooLargeError over {@link MAX_HEADER_TABLE_BYTES} bytes; ConfigurationError for
 *   a table amqplib cannot encode at any size (see {@link assertPublishable})
 */
export function assertEncodableHeaders(headers: Readonly<Record<string, unknown>> | undefined, what: string): number {
  if (headers === undefined || headers === null) return 0;
  const size = tableOrFail(headers, what);
  if (size > MAX_HEADER_TABLE_BYTES) throw tooLarge(what, size);
  return size;
}

/**
 * The encoded size of one header table, bytes, as amqplib encodes it: a 4-byte length, then per
 * entry a 1-byte name length, the UTF-8 name and the tagged value. Entries whose value is
 * `undefined` are left out; inherited enumerable names count (amqplib walks them with `for…in`).
 * @throws Error naming the entry when amqplib cannot encode it
 */
export function fieldTableSize(table: object, path = ''): number {
  let size = 4;
  for (const name in table) {
    const value = (table as Record<string, unknown>)[name];
    if (value === undefined) continue;
    const nameBytes = Buffer.byteLength(name);
    if (nameBytes > SHORT_STRING_MAX_BYTES) throw new Error(`header name ${JSON.stringify(name.slice(0, 40))}… is ${nameBytes} bytes, over AMQP's 255`);
    size += 1 + nameBytes + fieldValueSize(value, path === '' ? name : `${path}.${name}`);
  }
  return size;
}

/** The encoded size of one tagged field value, bytes (tag included). */
function fieldValueSize(value: unknown, path: string): number {
  if (value !== null && typeof value === 'object' && Object.hasOwn(value, '!')) {
    const typed = value as { '!': unknown; value?: unknown };
    return typedValueSize(typed['!'], typed.value, path);
  }
  switch (typeof value) {
    case 'number':
      return typedValueSize(inferredNumberType(value), value, path);
    case 'string':
      return 1 + 4 + Buffer.byteLength(value);
    case 'boolean':
      return 2;
    case 'object':
      return objectSize(value, path);
    default:
      throw new Error(`header ${path} is a ${typeof value}, which has no AMQP field type`);
  }
}

/** A table, array, byte array or void (`null`). */
function objectSize(value: object | null, path: string): number {
  if (value === null) return 1;
  if (Array.isArray(value)) return 1 + 4 + value.reduce((n: number, item: unknown, i) => n + fieldValueSize(item, `${path}[${i}]`), 0);
  if (Buffer.isBuffer(value)) return 1 + 4 + value.length;
  return 1 + fieldTableSize(value, path);
}

/** amqplib's choice for a plain number: a double when it has a fraction (below 2^50) or is ≥ 2^63, else the smallest signed integer. */
function inferredNumberType(n: number): string {
  if (n >= 2 ** 63 || (Math.abs(n) < 2 ** 50 && Math.floor(n) !== n)) return 'double';
  if (n >= -128 && n < 128) return 'byte';
  if (n >= -0x8000 && n < 0x8000) return 'short';
  if (n >= -0x80000000 && n < 0x80000000) return 'int';
  return 'long';
}

/** Integer field types: [size in bytes, lowest, highest]. */
const INTEGER_TYPES: Readonly<Record<string, readonly [number, bigint, bigint]>> = {
  byte: [1, -(2n ** 7n), 2n ** 7n - 1n],
  int8: [1, -(2n ** 7n), 2n ** 7n - 1n],
  unsignedbyte: [1, 0n, 2n ** 8n - 1n],
  uint8: [1, 0n, 2n ** 8n - 1n],
  short: [2, -(2n ** 15n), 2n ** 15n - 1n],
  int16: [2, -(2n ** 15n), 2n ** 15n - 1n],
  unsignedshort: [2, 0n, 2n ** 16n - 1n],
  uint16: [2, 0n, 2n ** 16n - 1n],
  int: [4, -(2n ** 31n), 2n ** 31n - 1n],
  int32: [4, -(2n ** 31n), 2n ** 31n - 1n],
  unsignedint: [4, 0n, 2n ** 32n - 1n],
  uint32: [4, 0n, 2n ** 32n - 1n],
  long: [8, -(2n ** 63n), 2n ** 63n - 1n],
  int64: [8, -(2n ** 63n), 2n ** 63n - 1n],
  timestamp: [8, 0n, 2n ** 64n - 1n],
};

/** The size of a value of a named field type (amqplib's names for `{ '!': type, value }`). */
function typedValueSize(type: unknown, value: unknown, path: string): number {
  if (typeof type !== 'string') throw new Error(`header ${path} is a table with a "!" entry, which amqplib reads as a field type name, not a string`);
  const integer = INTEGER_TYPES[type];
  if (integer !== undefined) {
    const [bytes, lowest, highest] = integer;
    // 64-bit types go through BigInt (a bigint or an integral number) and a range-checked write;
    // narrower ones through Buffer's integer writes, which take a number and check only its range
    // (a fraction is dropped, NaN is written as 0).
    const inRange =
      bytes === 8
        ? (typeof value === 'bigint' || (typeof value === 'number' && Number.isInteger(value))) && BigInt(value) >= lowest && BigInt(value) <= highest
        : typeof value === 'number' && !(value < Number(lowest) || value > Number(highest));
    if (!inRange) throw new Error(`header ${path} of type ${type} must be an integer in [${lowest}, ${highest}], got ${describe(value)}`);
    return 1 + bytes;
  }
  switch (type) {
    case 'double':
    case 'float64':
    case 'float':
      if (typeof value !== 'number') throw new Error(`header ${path} of type ${type} must be a number, got ${describe(value)}`);
      return type === 'float' ? 5 : 9;
    case 'boolean':
      return 2;
    case 'string':
      if (typeof value !== 'string') throw new Error(`header ${path} of type string must be a string, got ${describe(value)}`);
      return 1 + 4 + Buffer.byteLength(value);
    case 'object':
      // amqplib encodes any other value named `object` as a table of its enumerable names (`for…in`).
      return value !== null && typeof value !== 'object' ? 1 + fieldTableSize(Object(value), path) : objectSize(value, path);
    case 'decimal': {
      const d = value as { places?: unknown; digits?: unknown } | null | undefined;
      const places = d?.places;
      const digits = d?.digits;
      if (typeof places !== 'number' || places < 0 || places > 255 || typeof digits !== 'number' || !Number.isInteger(digits) || digits < 0 || digits > 0xffffffff) {
        throw new Error(`header ${path} of type decimal must be { places: 0…255, digits: uint32 }, got ${describe(value)}`);
      }
      return 6;
    }
    default:
      throw new Error(`header ${path} names field type ${JSON.stringify(type)}, which amqplib cannot encode`);
  }
}

function describe(value: unknown): string {
  if (typeof value === 'bigint') return `${value}n`;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** The headers as amqplib sends them (its `CC`/`BCC` options become headers). */
function headersOnWire(options: Options.Publish): object {
  const headers: Record<string, unknown> = Object.create(options.headers ?? null) as Record<string, unknown>;
  const list = (v: unknown): string[] | undefined => (v === undefined ? undefined : Array.isArray(v) ? v.map(String) : [String(v)]);
  if (options.CC !== undefined) headers.CC = list(options.CC);
  if (options.BCC !== undefined) headers.BCC = list(options.BCC);
  return headers;
}

function tableOrFail(headers: object, what: string): number {
  if (typeof headers !== 'object') throw new ConfigurationError(`${what} was not sent: its headers must be an object, got ${typeof headers}`);
  try {
    return fieldTableSize(headers);
  } catch (error) {
    throw new ConfigurationError(`${what} was not sent: its headers cannot be encoded as an AMQP table (${(error as Error).message})`, { cause: error });
  }
}

/** The UTF-8 length of a short string, bytes. */
function shortString(name: string, value: unknown): number {
  if (typeof value !== 'string') throw new Error(`${name} must be a string, got ${describe(value)}`);
  const bytes = Buffer.byteLength(value);
  if (bytes > SHORT_STRING_MAX_BYTES) throw new Error(`${name} is ${bytes} bytes, over AMQP's 255 for a short string`);
  return bytes;
}

/** One octet property (priority, delivery mode): an integer in [0, 255]. */
function octet(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 255) throw new Error(`${name} must be an integer in [0, 255], got ${describe(value)}`);
  return 1;
}

function tooLarge(what: string, bytes: number): MessageTooLargeError {
  return new MessageTooLargeError(`${what} was not sent: its headers encode to ${bytes} bytes, more than amqplib's ${MAX_HEADER_TABLE_BYTES}-byte limit for a header table`);
}
