/**
 * What amqplib can put on the wire: a pre-flight check of a publish's headers, so an oversized or
 * unencodable header table fails that one publish with a typed error and never reaches the channel.
 *
 * amqplib encodes the `headers` table of every publish into one fixed scratch buffer of 65 536
 * bytes (`SCRATCH` in amqplib's generated `lib/defs.js`, 0.10.x) and throws a `RangeError` past
 * it, after the channel registered the publish's confirm callback, so later confirms on the
 * channel can be matched to the wrong publish. Through amqp-connection-manager the error shows as
 * a channel error while the publish waits for a confirm that never comes (measured: a 70 KB header
 * gave a channel error, then a confirm timeout). The check encodes the table with amqplib's own
 * codec, so its verdict is amqplib's.
 */
import { ConfigurationError } from '../../src';
import { MessageTooLargeError } from './errors';

// amqplib has no public encoder; its codec module has been part of the package through 0.10.x.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const codec = require('amqplib/lib/codec') as { encodeTable(buffer: Buffer, value: unknown, offset: number): number };

/** Largest `headers` table amqplib can encode, bytes of AMQP field-table encoding. */
export const MAX_HEADER_TABLE_BYTES = 65_536;

let scratch: Buffer | undefined;

/**
 * Checks that amqplib can encode `headers` (the publish's full header table) and returns its
 * encoded size in bytes.
 * @param what names the publish in the error message (exchange and routing key)
 * @throws MessageTooLargeError when the table encodes to more than {@link MAX_HEADER_TABLE_BYTES}
 *   bytes (nothing was sent)
 * @throws ConfigurationError when a value has no AMQP field type (a symbol, a function, a bigint)
 */
export function assertEncodableHeaders(headers: Readonly<Record<string, unknown>> | undefined, what: string): number {
  if (headers === undefined) return 0;
  scratch ??= Buffer.allocUnsafe(MAX_HEADER_TABLE_BYTES);
  let size: number;
  try {
    // Fixed-width writes past the buffer throw a RangeError; a long string is cut short by
    // Buffer.write, and the size returned is then larger than the buffer. Both mean too large.
    size = codec.encodeTable(scratch, headers, 0);
  } catch (error) {
    // By name: the RangeError comes from Node's Buffer, whose realm may differ from ours (jest).
    if ((error as Error | undefined)?.name === 'RangeError') throw tooLarge(what, error);
    throw new ConfigurationError(`${what} was not sent: its headers cannot be encoded as an AMQP table (${error instanceof Error ? error.message : String(error)})`, {
      cause: error,
    });
  }
  if (size > MAX_HEADER_TABLE_BYTES) throw tooLarge(what);
  return size;
}

function tooLarge(what: string, cause?: unknown): MessageTooLargeError {
  return new MessageTooLargeError(`${what} was not sent: its headers encode to more than ${MAX_HEADER_TABLE_BYTES} bytes, amqplib's limit for a header table`, { cause });
}
