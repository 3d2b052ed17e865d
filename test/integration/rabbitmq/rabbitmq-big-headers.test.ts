/**
 * A message whose headers are too large to republish with twophase's own headers added: its
 * largest foreign headers are dropped (and named), it still reaches the DLQ with its reason, and
 * the channel keeps working for the messages after it. When even that cannot be sent (the kept
 * headers alone are too large, or amqplib cannot encode a header), a copy with the dead-letter
 * headers only goes to the DLQ.
 */
import { ack, PermanentError } from '../../../src';
import { HEADERS } from '../../../adapters/rabbitmq';
import { describeWithServices } from '../../support/services';
import { applying, EffectLog, Harness } from './support/harness';
import { waitFor } from '../../support/wait';

describeWithServices(['rabbitmq'], 'RabbitMQ: oversized headers', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  test('a 64 KiB header table is dead-lettered with its reason, the big header dropped and named; later messages still flow', async () => {
    const queue = h.queue('bighdr');
    const effects = new EffectLog();
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, async (m) => {
      if (m.body.poison) throw new PermanentError('poison');
      effects.apply(m.key);
      return ack();
    });
    await consumer.start();
    // No key and ~64 KB of headers: missing_key, dead-lettered by republishing with reason headers.
    await h.admin.publish('', queue, { x: 1 }, { headers: { blob: 'b'.repeat(64_500) } });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'oversized message in DLQ' });
    const [dead] = await h.admin.drain(`${queue}.dlq`);
    expect(dead!.properties.headers?.[HEADERS.reason]).toBe('missing_key');
    expect(dead!.properties.headers?.['twophase-headers-dropped']).toBe('blob');
    // The channel's publisher confirms are still aligned: a normal dead-letter and a normal message work.
    await h.admin.publish('', queue, { poison: true }, { messageId: 'p-1' });
    await h.admin.publish('', queue, { ok: true }, { messageId: 'ok-1' });
    await waitFor(() => effects.count('test:ok-1') === 1, { what: 'normal message processed' });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'poison in DLQ' });
    const [poison] = await h.admin.drain(`${queue}.dlq`);
    expect(poison!.properties.headers?.[HEADERS.reason]).toBe('permanent_error');
    expect(source.stats.generation).toBe(1);
  });

  test('an idempotency-key header too long to republish (65 200 bytes, invalid_key) is dead-lettered with the dead-letter headers only; the channel keeps working', async () => {
    const queue = h.queue('bigkey');
    const effects = new EffectLog();
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, applying(effects));
    await consumer.start();
    // The key is over the key length limit (invalid_key, dead-letter), and the copy with the
    // reason headers added would not fit amqplib's 65 536-byte header table.
    await h.admin.publish('', queue, { x: 1 }, { messageId: 'big-key', headers: { 'idempotency-key': 'k'.repeat(65_200), note: 'kept?' } });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'oversized message in DLQ' });
    const [dead] = await h.admin.drain(`${queue}.dlq`);
    expect(dead!.properties.messageId).toBe('big-key');
    expect(dead!.properties.headers).toMatchObject({ [HEADERS.reason]: 'invalid_key', [HEADERS.originalQueue]: queue });
    expect(dead!.properties.headers?.['idempotency-key']).toBeUndefined();
    expect(String(dead!.properties.headers?.['twophase-headers-dropped']).split(',').sort()).toEqual(['idempotency-key', 'note']);
    // The broker routes the copy before its publisher confirm reaches the source, which counts on the confirm.
    await waitFor(() => source.stats.rejects === 1, { what: 'the reject counted once its publish was confirmed' });
    expect(source.stats).toMatchObject({ strippedDeadLetters: 1, rejects: 1, publishFailures: 0, fallbackNacks: 0 });
    // Nothing went back to the work queue, and the channel still acks.
    await h.admin.publish('', queue, { ok: true }, { messageId: 'ok-1' });
    await waitFor(() => effects.count('test:ok-1') === 1, { what: 'normal message processed' });
    expect(await h.admin.messageCount(queue)).toBe(0);
    expect(source.stats.generation).toBe(1);
  });

  test('a header amqplib can decode but not encode (a typed-value look-alike table) reaches the DLQ once with its reason, not a republish loop', async () => {
    const queue = h.queue('oddhdr');
    const source = h.source({ queue, failedPublishRequeueDelayMs: 50 });
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, async () => ack());
    await consumer.start();
    // No key: missing_key, dead-lettered. The table {'!': 'object', …} decodes, but amqplib reads
    // it back as a typed value and cannot encode it again.
    await h.admin.publish('', queue, { x: 1 }, { messageId: undefined, headers: { meta: { '!': 'object', value: { '!': 'hello' } } } });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'message in DLQ' });
    const [dead] = await h.admin.drain(`${queue}.dlq`);
    expect(dead!.properties.headers?.[HEADERS.reason]).toBe('missing_key');
    expect(dead!.properties.headers?.['twophase-headers-dropped']).toBe('meta');
    await waitFor(() => source.stats.rejects === 1, { what: 'the reject counted once its publish was confirmed' });
    expect(source.stats).toMatchObject({ deliveries: 1, strippedDeadLetters: 1, fallbackNacks: 0 });
  });
});
