import type { Producer } from 'kafkajs';
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
});
