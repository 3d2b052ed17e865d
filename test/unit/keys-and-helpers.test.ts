import { digestKey, InvalidKeyError, isDisposition, isRetriable, ack, reject, requeue, ClaimerUnavailableError, ConfigurationError, LeaseLostError, namespaceKey } from '../../src';
import { backoffDelay, validateKey } from '../../src/adapter-kit';

describe('keys', () => {
  test('namespaceKey joins namespace and key, escaping ":" so namespaces cannot collide', () => {
    expect(namespaceKey('billing', 'order-7')).toBe('billing:order-7');
    expect(namespaceKey('a:b', 'c')).not.toBe(namespaceKey('a', 'b:c'));
    expect(namespaceKey('group-a', 'k')).not.toBe(namespaceKey('group-b', 'k'));
    expect(() => namespaceKey('', 'k')).toThrow(InvalidKeyError);
  });

  test('digestKey gives a fixed-length SHA-256 key that passes validation', () => {
    const long = 'x'.repeat(10_000);
    const d = digestKey(long);
    expect(d).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(digestKey(long)).toBe(d);
    expect(digestKey(Buffer.from([0, 1, 2]))).toMatch(/^sha256:/);
    expect(() => validateKey(d)).not.toThrow();
  });

  test('validateKey counts UTF-8 bytes, not characters, at the MAX_KEY_BYTES (512) bound', () => {
    expect(() => validateKey('\u20ac'.repeat(170))).not.toThrow(); // 510 bytes in 170 units
    expect(() => validateKey('\u20ac'.repeat(171))).toThrow(/513 bytes, more than 512/);
    expect(() => validateKey('\u00e9'.repeat(256))).not.toThrow(); // 512 bytes
    expect(() => validateKey('\u00e9'.repeat(257))).toThrow(/514 bytes/);
    expect(() => validateKey('\u{1F600}'.repeat(128))).not.toThrow(); // 512 bytes in 256 units
    expect(() => validateKey('\u{1F600}'.repeat(128) + 'x')).toThrow(/513 bytes/);
    expect(() => validateKey('k'.repeat(512))).not.toThrow();
    expect(() => validateKey('k'.repeat(513))).toThrow(InvalidKeyError);
  });

  test('validateKey refuses NUL characters', () => {
    expect(() => validateKey('a\u0000b')).toThrow(InvalidKeyError);
  });
});

describe('dispositions', () => {
  test('only the three shapes are dispositions', () => {
    expect(isDisposition(ack())).toBe(true);
    expect(isDisposition(ack({ id: 1 }))).toBe(true);
    expect(isDisposition(requeue({ delayMs: 5 }))).toBe(true);
    expect(isDisposition(reject('bad'))).toBe(true);
    expect(isDisposition(undefined)).toBe(false);
    expect(isDisposition(true)).toBe(false);
    expect(isDisposition({ type: 'requeue', delayMs: -1 })).toBe(false);
    expect(isDisposition({ type: 'reject' })).toBe(false);
  });
});

describe('errors and backoff', () => {
  test('isRetriable: store outages are, programmer and lease errors are not', () => {
    expect(isRetriable(new ClaimerUnavailableError('down'))).toBe(true);
    expect(isRetriable(new ConfigurationError('bad'))).toBe(false);
    expect(isRetriable(new LeaseLostError('k', 1, 'commit'))).toBe(false);
    expect(isRetriable(new Error('plain'))).toBe(false);
  });

  test('errors carry code, name and cause', () => {
    const cause = new Error('ECONNREFUSED');
    const e = new ClaimerUnavailableError('down', { cause });
    expect(e).toMatchObject({ name: 'ClaimerUnavailableError', code: 'CLAIMER_UNAVAILABLE', retriable: true, cause });
  });

  test('backoff grows exponentially, is capped, and jitters within bounds', () => {
    const p = { initialDelayMs: 100, maxDelayMs: 1000, multiplier: 2, jitter: 0 };
    expect([1, 2, 3, 4, 5, 6].map((r) => backoffDelay(p, r))).toEqual([100, 200, 400, 800, 1000, 1000]);
    const j = { ...p, jitter: 0.5 };
    expect(backoffDelay(j, 1, () => 0)).toBe(50);
    expect(backoffDelay(j, 1, () => 1)).toBe(150);
  });
});
