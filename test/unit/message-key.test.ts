/**
 * Issue 12 item 1: the default key function. Distinct key bytes never give one key; valid UTF-8
 * bytes give the same key as that text; bytes lost before twophase saw them (U+FFFD in text) and
 * repeated headers with differing values are `invalid_key`.
 */
import fc from 'fast-check';
import { BINARY_KEY_PREFIX, defaultMessageKey, type Delivery, IDEMPOTENCY_KEY_HEADER, InvalidKeyError, InvalidMessageError, messageKeyOf } from '../../src';
import { keyFromHeaderValue, validateKey } from '../../src/adapter-kit';

function deliveryWith(headers: Record<string, unknown>, messageId?: string): Delivery {
  return {
    body: Buffer.from('{}'),
    headers,
    messageId,
    metadata: { system: 'test', destination: 'q', redelivered: false },
    settler: { ack: async () => undefined, requeue: async () => undefined, reject: async () => undefined },
  };
}

function refusal(fn: () => unknown): InvalidMessageError {
  try {
    fn();
  } catch (error) {
    if (error instanceof InvalidMessageError) return error;
    throw error;
  }
  throw new Error('expected an InvalidMessageError');
}

describe('defaultMessageKey: byte keys', () => {
  test("the issue's smallest input: [0xff,0x41], [0xfe,0x41], [0xc3,0x28] give three distinct keys", () => {
    const keys = [[0xff, 0x41], [0xfe, 0x41], [0xc3, 0x28]].map((bytes) => defaultMessageKey(deliveryWith({ [IDEMPOTENCY_KEY_HEADER]: Buffer.from(bytes) })));
    expect(new Set(keys).size).toBe(3);
    expect(keys[0]).toBe(`${BINARY_KEY_PREFIX}_0E`);
    for (const key of keys) expect(key.startsWith(BINARY_KEY_PREFIX)).toBe(true);
  });

  test('the encoding is lossless: the bytes come back from the key', () => {
    const bytes = Buffer.from([0x00, 0xff, 0x80, 0x41, 0xc3]);
    const key = keyFromHeaderValue(bytes);
    expect(Buffer.from(key.slice(BINARY_KEY_PREFIX.length), 'base64url')).toEqual(bytes);
  });

  test('valid UTF-8 bytes are the same key as that text (String, LongString and byte[] give one key)', () => {
    expect(keyFromHeaderValue(Buffer.from('order-7 é €', 'utf8'))).toBe('order-7 é €');
    expect(keyFromHeaderValue(new Uint8Array(Buffer.from('order-7')))).toBe('order-7');
    expect(keyFromHeaderValue('order-7')).toBe('order-7');
  });

  test('a leading byte-order mark is kept: [EF BB BF 41] and "A" are different keys', () => {
    expect(keyFromHeaderValue(Buffer.from([0xef, 0xbb, 0xbf, 0x41]))).not.toBe(keyFromHeaderValue(Buffer.from('A')));
  });

  test('valid UTF-8 bytes that spell U+FFFD are encoded, never taken as text (U+FFFD is reserved for encoded keys)', () => {
    const key = keyFromHeaderValue(Buffer.from('\uFFFDbase64url:_0E', 'utf8'));
    expect(key).not.toBe(keyFromHeaderValue(Buffer.from([0xff, 0x41])));
    expect(key.startsWith(BINARY_KEY_PREFIX)).toBe(true);
  });

  test('property: two byte strings give the same key only when they are equal', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 16 }), fc.uint8Array({ maxLength: 16 }), (a, b) => {
        const same = Buffer.from(a).equals(Buffer.from(b));
        if (a.length === 0 || b.length === 0) return;
        expect(keyFromHeaderValue(Buffer.from(a)) === keyFromHeaderValue(Buffer.from(b))).toBe(same);
      }),
      { numRuns: 500 },
    );
  });

  test('property: a text key equals a byte key only when the bytes are that text in UTF-8', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', minLength: 1, maxLength: 8 }), fc.uint8Array({ minLength: 1, maxLength: 16 }), (text, bytes) => {
        let textKey: string;
        try {
          textKey = keyFromHeaderValue(text);
        } catch {
          expect(text).toContain('\uFFFD');
          return;
        }
        const same = Buffer.from(text, 'utf8').equals(Buffer.from(bytes));
        expect(keyFromHeaderValue(Buffer.from(bytes)) === textKey).toBe(same);
        expect(keyFromHeaderValue(Buffer.from(text, 'utf8'))).toBe(textKey);
      }),
      { numRuns: 500 },
    );
  });
});

describe('defaultMessageKey: bytes lost before twophase saw them', () => {
  test('a text key containing U+FFFD is invalid_key, and the reason says the bytes were replaced', () => {
    // What amqplib hands over for a Java LongString made of the bytes [0xff, 0x41].
    const error = refusal(() => defaultMessageKey(deliveryWith({ [IDEMPOTENCY_KEY_HEADER]: Buffer.from([0xff, 0x41]).toString('utf8') })));
    expect(error.reason).toBe('invalid_key');
    expect(error.message).toMatch(/U\+FFFD/);
    expect(error.message).toMatch(/not valid UTF-8 and were replaced before twophase saw them/);
  });

  test('a message id containing U+FFFD is invalid_key too', () => {
    expect(refusal(() => defaultMessageKey(deliveryWith({}, 'id-\uFFFD'))).reason).toBe('invalid_key');
  });
});

describe('defaultMessageKey: repeated headers (kafkajs gives an array)', () => {
  test('identical values are one key, whatever their form', () => {
    expect(keyFromHeaderValue([Buffer.from('k-1'), Buffer.from('k-1')])).toBe('k-1');
    expect(keyFromHeaderValue([Buffer.from('k-1'), 'k-1'])).toBe('k-1');
    expect(keyFromHeaderValue([Buffer.from([0xff]), Buffer.from([0xff])])).toBe(keyFromHeaderValue(Buffer.from([0xff])));
  });

  test('differing values are invalid_key', () => {
    const error = refusal(() => defaultMessageKey(deliveryWith({ [IDEMPOTENCY_KEY_HEADER]: [Buffer.from('a'), Buffer.from('b')] })));
    expect(error.reason).toBe('invalid_key');
    expect(error.message).toMatch(/repeated 2 times with differing values/);
    // Bytes that differ only where UTF-8 decoding would have replaced them.
    expect(refusal(() => keyFromHeaderValue([Buffer.from([0xff, 0x41]), Buffer.from([0xfe, 0x41])])).reason).toBe('invalid_key');
  });

  test('an empty list or a list holding another type is invalid_key', () => {
    expect(refusal(() => keyFromHeaderValue([])).reason).toBe('invalid_key');
    expect(refusal(() => keyFromHeaderValue(['x', 1])).reason).toBe('invalid_key');
  });
});

describe('defaultMessageKey: header names and fallbacks', () => {
  test('"Idempotency-Key" (other case) is not the key header; missing_key says so', () => {
    const error = refusal(() => defaultMessageKey(deliveryWith({ 'Idempotency-Key': 'k-1' })));
    expect(error.reason).toBe('missing_key');
    expect(error.message).toMatch(/"Idempotency-Key" is present, but header names are case-sensitive/);
    expect(defaultMessageKey(deliveryWith({ 'Idempotency-Key': 'k-1' }, 'm-1'))).toBe('m-1');
  });

  test('no header: the message id; neither: missing_key; another type: invalid_key', () => {
    expect(messageKeyOf({}, 'm-1')).toBe('m-1');
    expect(refusal(() => messageKeyOf({}, undefined)).reason).toBe('missing_key');
    expect(refusal(() => messageKeyOf({ [IDEMPOTENCY_KEY_HEADER]: 42 }, 'm-1')).reason).toBe('invalid_key');
  });
});

describe('validateKey: keys that would collide in a store', () => {
  test('a key holding a lone surrogate is refused (UTF-8 has no form for it, so "a\\uD800" and "a\\uDBFF" would be one stored key)', () => {
    expect(() => validateKey('a\uD800')).toThrow(InvalidKeyError);
    expect(() => validateKey('a\uDBFF')).toThrow(/lone surrogate/);
    expect(() => validateKey('a\uD83D\uDD11')).not.toThrow();
  });
});
