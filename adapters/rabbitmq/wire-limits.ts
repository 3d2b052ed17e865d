/**
 * What amqplib can put on the wire: a pre-flight check of a publish, so a publish amqplib would
 * fail to encode fails alone with a typed error and never reaches the channel.
 *
 * amqplib's `ConfirmChannel.publish` registers the publish's confirm callback first and encodes
 * the frames after. When encoding throws (a header table over its fixed 65 536-byte scratch
 * buffer, a message id or routing key over 255 bytes, a priority over 255, a value with no AMQP
 * type), the callback stays registered and every later confirm on the channel is matched to the
 * wrong publish; through amqp-connection-manager the error shows as a channel error while the
 * publish waits for a confirm that never comes (measured: a 70 KB header gave a channel error,
 * then a confirm timeout; a 300-byte message id left later publishes timing out). The check runs
 * amqplib's own argument conversion and encoders (`lib/api_args.js`, `lib/defs.js`,
 * `lib/codec.js`; amqplib has no public encoder, and these modules have been part of the package
 * through 0.10.x), so its verdict is amqplib's.
 */
import type { Options } from 'amqplib';
import { ConfigurationError } from '../../src';
import { MessageTooLargeError } from './errors';

/* eslint-disable @typescript-eslint/no-require-imports */
const codec = require('amqplib/lib/codec') as { encodeTable(buffer: Buffer, value: unknown, offset: number): number };
const defs = require('amqplib/lib/defs') as {
  readonly BasicPublish: number;
  readonly BasicProperties: number;
  encodeMethod(id: number, channel: number, fields: unknown): Buffer;
  encodeProperties(id: number, channel: number, size: number, fields: unknown): Buffer;
};
const apiArgs = require('amqplib/lib/api_args') as { publish(exchange: string, routingKey: string, options: Options.Publish): Record<string, unknown> };
/* eslint-enable @typescript-eslint/no-require-imports */

/** Largest `headers` table amqplib can encode, bytes of AMQP field-table encoding. */
export const MAX_HEADER_TABLE_BYTES = 65_536;

let scratch: Buffer | undefined;

/**
 * Checks that amqplib can encode a publish of `contentBytes` bytes to `exchange` with
 * `routingKey` and `options` (as given to `ConfirmChannel.publish`).
 * @param what names the publish in the error message
 * @param frameMax the connection's negotiated frame_max, bytes, when known
 * @throws MessageTooLargeError when the header table encodes to more than
 *   {@link MAX_HEADER_TABLE_BYTES} bytes, or the properties frame is over `frameMax` (nothing was sent)
 * @throws ConfigurationError when amqplib cannot encode it otherwise: a header value with no AMQP
 *   type, a header name, message id, routing key or other short string over 255 bytes, a
 *   priority out of range (nothing was sent)
 */
export function assertPublishable(exchange: string, routingKey: string, contentBytes: number, options: Options.Publish, what: string, frameMax?: number): void {
  const headerBytes = headerTableSize(options.headers, what);
  if (headerBytes > MAX_HEADER_TABLE_BYTES) throw tooLarge(what, headerBytes);
  let headerFrame: Buffer;
  try {
    const fields = apiArgs.publish(exchange, routingKey, options);
    defs.encodeMethod(defs.BasicPublish, 1, fields);
    headerFrame = defs.encodeProperties(defs.BasicProperties, 1, contentBytes, fields);
  } catch (error) {
    throw new ConfigurationError(`${what} was not sent: amqplib cannot encode it (${error instanceof Error ? error.message : String(error)})`, { cause: error });
  }
  // amqplib splits the body into frames of frameMax but sends the properties as one frame; the
  // broker closes the whole connection (FRAME_ERROR) for a frame over the negotiated frame_max.
  if (frameMax !== undefined && frameMax > 0 && headerFrame.length > frameMax) {
    throw new MessageTooLargeError(
      `${what} was not sent: its properties frame is ${headerFrame.length} bytes, more than the connection's negotiated frame_max of ${frameMax} bytes`,
    );
  }
}

/**
 * Checks that amqplib can encode `headers` alone and returns the table's encoded size in bytes.
 * @throws MessageTooLargeError over {@link MAX_HEADER_TABLE_BYTES} bytes; ConfigurationError for
 *   a table amqplib cannot encode at any size (see {@link assertPublishable})
 */
export function assertEncodableHeaders(headers: Readonly<Record<string, unknown>> | undefined, what: string): number {
  const size = headerTableSize(headers, what);
  if (size > MAX_HEADER_TABLE_BYTES) throw tooLarge(what, size);
  return size;
}

/**
 * The encoded size of a header table, as amqplib encodes it. A table over the scratch buffer is
 * measured again in a buffer large enough for it, so "too large" and "not encodable" (a name over
 * 255 bytes, a typed value out of range, a value with no AMQP type) are told apart.
 */
function headerTableSize(headers: Readonly<Record<string, unknown>> | undefined, what: string): number {
  if (headers === undefined || headers === null) return 0;
  scratch ??= Buffer.allocUnsafe(MAX_HEADER_TABLE_BYTES);
  try {
    // A long string is cut short by Buffer.write, and the size returned is then larger than the
    // buffer; fixed-width writes past it throw a RangeError.
    return codec.encodeTable(scratch, headers, 0);
  } catch (error) {
    let cause = error;
    // By name: the RangeError comes from Node's Buffer, whose realm may differ from ours (jest).
    if ((error as Error | undefined)?.name === 'RangeError') {
      try {
        return codec.encodeTable(Buffer.allocUnsafe(roughTableBytes(headers)), headers, 0);
      } catch (again) {
        cause = again;
      }
    }
    throw new ConfigurationError(`${what} was not sent: its headers cannot be encoded as an AMQP table (${cause instanceof Error ? cause.message : String(cause)})`, { cause });
  }
}

/** An upper bound of a table's encoded size (strings at 4 bytes per character), bytes. */
function roughTableBytes(value: unknown): number {
  if (typeof value === 'string') return 16 + value.length * 4;
  if (Buffer.isBuffer(value)) return 16 + value.length;
  if (Array.isArray(value)) return value.reduce((n: number, v) => n + roughTableBytes(v), 16);
  if (value !== null && typeof value === 'object') {
    return Object.entries(value as object).reduce((n, [k, v]) => n + 1 + k.length * 4 + roughTableBytes(v), 16);
  }
  return 16;
}

function tooLarge(what: string, bytes: number): MessageTooLargeError {
  return new MessageTooLargeError(`${what} was not sent: its headers encode to ${bytes} bytes, more than amqplib's ${MAX_HEADER_TABLE_BYTES}-byte limit for a header table`);
}
