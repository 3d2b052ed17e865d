import type { Producer } from 'kafkajs';
import { InvalidKeyError, defaultMessageKey } from '../../src';
import { validateKey } from '../../src/adapter-kit';
import { KeyedProducer } from '../../adapters/kafka';

describe('KeyedProducer', () => {
  test('sets the idempotency-key header, and injectContext adds trace headers without replacing it', async () => {
    const sent: { topic: string; messages: { headers?: Record<string, unknown> }[] }[] = [];
    const producer = { send: async (req: (typeof sent)[number]) => (sent.push(req), []) } as unknown as Producer;
    const keyed = new KeyedProducer({ producer }, {}, { injectContext: (h) => ({ ...h, traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', 'idempotency-key': 'hijacked' }) });
    await keyed.send('payments', [{ idempotencyKey: 'pay-1', value: '{}' }]);
    expect(sent[0]!.topic).toBe('payments');
    expect(sent[0]!.messages[0]!.headers).toMatchObject({ 'idempotency-key': 'pay-1', traceparent: expect.stringMatching(/^00-/) });
  });

  test('refuses, before sending, a key the Kafka consumer would dead-letter: one whose header bytes derive a key over the limit', async () => {
    const sent: unknown[] = [];
    const producer = { send: async (req: unknown) => (sent.push(req), []) } as unknown as Producer;
    const keyed = new KeyedProducer({ producer });
    // 403 bytes of text with U+FFFD: a valid key as text, but the consumer reads header bytes and
    // encodes such bytes as a base64url key, which is over 512 bytes.
    const key = '\uFFFD' + 'a'.repeat(400);
    expect(() => validateKey(key)).not.toThrow();
    expect(() => validateKey(defaultMessageKey({ headers: { 'idempotency-key': Buffer.from(key) }, body: Buffer.alloc(0) } as never))).toThrow(InvalidKeyError);
    for (const bad of [key, 'a\u0000b', 'lone\uD800', 'k'.repeat(600)]) {
      await expect(Promise.resolve().then(() => keyed.send('payments', [{ idempotencyKey: bad, value: '{}' }]))).rejects.toBeInstanceOf(InvalidKeyError);
    }
    expect(sent).toHaveLength(0);
  });
});
