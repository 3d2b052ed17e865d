/**
 * The pre-publish check computes AMQP encodings itself (amqplib 2.x exposes no encoder). These
 * tests hold its verdict to amqplib's: random header tables get the size amqplib's own encoder
 * gives them, and what amqplib refuses is refused. amqplib's codec is loaded by file path here,
 * in the test only; the adapter never does that.
 */
import { dirname, join } from 'node:path';
import fc from 'fast-check';
import { ConfigurationError } from '../../../src';
import { MessageTooLargeError } from '../../../adapters/rabbitmq';
import { assertEncodableHeaders, assertPublishable, fieldTableSize, MAX_HEADER_TABLE_BYTES } from '../../../adapters/rabbitmq/wire-limits';

/* eslint-disable @typescript-eslint/no-require-imports */
const amqplibDir = dirname(require.resolve('amqplib'));
const codec = require(join(amqplibDir, 'lib', 'codec.js')) as { encodeTable(buffer: Buffer, value: unknown, offset: number): number };
/* eslint-enable @typescript-eslint/no-require-imports */

/** amqplib's verdict: the encoded size, or the error it throws (in a buffer large enough not to matter). */
function amqplibSize(table: object): number | Error {
  try {
    return codec.encodeTable(Buffer.alloc(4 * MAX_HEADER_TABLE_BYTES), table, 0);
  } catch (error) {
    return error as Error;
  }
}

function ourSize(table: object): number | Error {
  try {
    return fieldTableSize(table);
  } catch (error) {
    return error as Error;
  }
}

const name = fc.string({ maxLength: 12 });
const leaf = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.maxSafeInteger(),
  fc.constantFrom(2 ** 50 + 0.5, 2 ** 63, 2 ** 64, -(2 ** 63), -(2 ** 64), Number.NaN, Infinity, -Infinity, -0),
  fc.string({ maxLength: 20 }),
  fc.boolean(),
  fc.constant(null),
  fc.uint8Array({ maxLength: 8 }).map((a) => Buffer.from(a)),
  fc.record({ '!': fc.constantFrom('float', 'double', 'long', 'int', 'short', 'byte', 'uint8', 'uint16', 'uint32', 'int64', 'timestamp'), value: fc.oneof(fc.integer(), fc.double(), fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n })) }),
  fc.record({ '!': fc.constant('decimal'), value: fc.record({ places: fc.integer({ min: -1, max: 300 }), digits: fc.integer({ min: -1, max: 2 ** 33 }) }) }),
  fc.record({ '!': fc.constantFrom('string', 'boolean', 'object', 'nosuch'), value: fc.oneof(fc.string(), fc.integer(), fc.constant(null)) }),
  fc.constantFrom<unknown>(undefined, () => 1, Symbol('s'), 1n),
);
const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, leaf, fc.array(tie('value'), { maxLength: 4 }), fc.dictionary(name, tie('value'), { maxKeys: 4 })),
})).value;

describe('wire limits: sizes and refusals match amqplib 2.x', () => {
  test('random header tables: the same encoded size as amqplib, or both refuse', () => {
    fc.assert(
      fc.property(fc.dictionary(name, value, { maxKeys: 6 }), (table) => {
        const theirs = amqplibSize(table);
        const ours = ourSize(table);
        if (typeof theirs === 'number') expect(ours).toBe(theirs);
        else expect(ours).toBeInstanceOf(Error);
      }),
      { numRuns: 3000 },
    );
  });

  test('the header values Java and other clients send round-trip in size: typed values, long names, big strings', () => {
    const tables: object[] = [
      { f: { '!': 'float', value: 1 }, l: { '!': 'long', value: 2n ** 63n - 1n }, t: { '!': 'timestamp', value: 1_700_000_000 }, d: { '!': 'decimal', value: { places: 2, digits: 12345 } } },
      { nested: { a: [1, 'x', null, true, Buffer.from([0xff])], b: { c: { d: 2 ** 40 } } } },
      { ['n'.repeat(255)]: 1 },
      { s: 'é'.repeat(1000) },
    ];
    for (const table of tables) expect(ourSize(table)).toBe(amqplibSize(table));
    expect(ourSize({ ['n'.repeat(256)]: 1 })).toBeInstanceOf(Error);
  });

  test('over 65 536 bytes amqplib 2.3.1 throws a RangeError on publish; the check refuses the same table as MessageTooLargeError', () => {
    const table = { big: 'x'.repeat(MAX_HEADER_TABLE_BYTES) };
    expect(() => codec.encodeTable(Buffer.alloc(MAX_HEADER_TABLE_BYTES), table, 0)).toThrow(RangeError);
    expect(() => assertEncodableHeaders(table, 'p')).toThrow(MessageTooLargeError);
    const fits = { big: 'x'.repeat(MAX_HEADER_TABLE_BYTES - 13) };
    expect(codec.encodeTable(Buffer.alloc(MAX_HEADER_TABLE_BYTES), fits, 0)).toBe(MAX_HEADER_TABLE_BYTES);
    expect(assertEncodableHeaders(fits, 'p')).toBe(MAX_HEADER_TABLE_BYTES);
  });

  test('properties amqplib refuses (short strings over 255 bytes, octets out of range, a bad timestamp) are ConfigurationError; CC/BCC count as headers', () => {
    for (const options of [{ correlationId: 'c'.repeat(256) }, { appId: 5 as unknown as string }, { deliveryMode: 300 }, { timestamp: -1 }, { expiration: 'e'.repeat(256) }]) {
      expect(() => assertPublishable('', 'q', 1, options, 'p')).toThrow(ConfigurationError);
    }
    expect(() => assertPublishable('e'.repeat(256), 'q', 1, {}, 'p')).toThrow(ConfigurationError);
    expect(() => assertPublishable('', 'q', 1, { headers: { big: 'x'.repeat(MAX_HEADER_TABLE_BYTES - 100) }, CC: 'c'.repeat(200) }, 'p')).toThrow(MessageTooLargeError);
  });
});
