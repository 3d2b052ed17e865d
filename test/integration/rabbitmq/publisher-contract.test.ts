/**
 * The publisher agrees with the consumer: a string body travels as its UTF-8 bytes (an amqplib
 * user's `JSON.stringify(order)` reaches the handler as the order), keys pass the consumer's own
 * rule before anything is sent, a key written in the headers instead of `idempotencyKey` is
 * refused, and a message over the broker's size limit fails at once without harming other
 * publishes.
 */
import { ack, ConfigurationError, IDEMPOTENCY_KEY_HEADER, InvalidKeyError, type Message } from '../../../src';
import { MessageTooLargeError, RabbitMqPublisher } from '../../../adapters/rabbitmq';
import { describeWithServices } from '../../support/services';
import { AMQP_URL } from './support/amqp';
import { Harness } from './support/harness';
import { waitFor } from '../../support/wait';

describeWithServices(['rabbitmq'], 'RabbitMqPublisher agrees with the consumer (real broker)', () => {
  let h: Harness;
  let publisher: RabbitMqPublisher;
  beforeEach(async () => {
    h = new Harness();
    publisher = new RabbitMqPublisher({ url: AMQP_URL, publishTimeoutMs: 5000 });
    await publisher.connect();
  });
  afterEach(async () => {
    await publisher.close();
    await h.cleanup();
  });

  test('a JSON string body is sent as its UTF-8 bytes with contentType application/json, and the handler reads the object', async () => {
    const queue = h.queue('str-body');
    const seen: Array<Message<Record<string, unknown>>> = [];
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, async (message) => {
      seen.push(message);
      return ack();
    });
    await consumer.start();
    const order = { orderId: 'o-1', amountCents: 500 };
    await publisher.sendToQueue(queue, JSON.stringify(order), { idempotencyKey: 'o-1' });
    await waitFor(() => seen.length === 1, { what: 'the order handled' });
    expect(seen[0]!.body).toEqual(order);
    expect(seen[0]!.raw.toString('utf8')).toBe(JSON.stringify(order));
    await consumer.stop();
  });

  test('content types: a JSON string gets application/json, other text gets text/plain; charset=utf-8, a caller contentType wins', async () => {
    const queue = h.queue('str-types');
    await (await h.admin.ch()).assertQueue(queue, { durable: false });
    await publisher.sendToQueue(queue, '{"a":1}', { idempotencyKey: 's-1' });
    await publisher.sendToQueue(queue, 'héllo', { idempotencyKey: 's-2' });
    await publisher.sendToQueue(queue, 'a,b', { idempotencyKey: 's-3', contentType: 'text/csv' });
    await publisher.sendToQueue(queue, { a: 1 }, { idempotencyKey: 's-4' });
    const [m1, m2, m3, m4] = await h.admin.drain(queue);
    expect([m1!.content.toString('utf8'), m1!.properties.contentType]).toEqual(['{"a":1}', 'application/json']);
    expect([m2!.content.toString('utf8'), m2!.properties.contentType]).toEqual(['héllo', 'text/plain; charset=utf-8']);
    expect([m3!.content.toString('utf8'), m3!.properties.contentType]).toEqual(['a,b', 'text/csv']);
    expect([m4!.content.toString('utf8'), m4!.properties.contentType]).toEqual(['{"a":1}', 'application/json']);
  });

  test('keys every consumer refuses (NUL, a lone surrogate, 600 bytes, U+FFFD) are refused before sending, with InvalidKeyError', async () => {
    const queue = h.queue('bad-keys');
    await (await h.admin.ch()).assertQueue(queue, { durable: false });
    for (const key of ['a\u0000b', 'lone\uD800', 'k'.repeat(600), 'bad\uFFFDkey']) {
      await expect(publisher.sendToQueue(queue, { n: 1 }, { idempotencyKey: key })).rejects.toBeInstanceOf(InvalidKeyError);
    }
    // A message id used as the key follows the same rule.
    await expect(publisher.sendToQueue(queue, { n: 1 }, { messageId: 'a\u0000b' })).rejects.toBeInstanceOf(InvalidKeyError);
    expect(await h.admin.messageCount(queue)).toBe(0);
  });

  test('a key put in the headers (any case) with no idempotencyKey is refused, naming the option to use', async () => {
    const queue = h.queue('hdr-key');
    await (await h.admin.ch()).assertQueue(queue, { durable: false });
    for (const name of ['Idempotency-Key', 'IDEMPOTENCY-KEY', IDEMPOTENCY_KEY_HEADER]) {
      const attempt = publisher.sendToQueue(queue, { n: 1 }, { headers: { [name]: 'hdr-1' } });
      await expect(attempt).rejects.toBeInstanceOf(ConfigurationError);
      await expect(publisher.sendToQueue(queue, { n: 1 }, { headers: { [name]: 'hdr-1' } })).rejects.toThrow(/idempotencyKey: "hdr-1"/);
    }
    expect(await h.admin.messageCount(queue)).toBe(0);
  });

  test('a body over the broker limit fails at once naming the limit; publishes beside it are confirmed', async () => {
    const queue = h.queue('too-big');
    await (await h.admin.ch()).assertQueue(queue, { durable: false });
    const small = new RabbitMqPublisher({ url: AMQP_URL, publishTimeoutMs: 5000, maxMessageBytes: 1024 });
    await small.connect();
    try {
      const results = await Promise.allSettled([
        small.sendToQueue(queue, { n: 1 }, { idempotencyKey: 'before' }),
        small.sendToQueue(queue, Buffer.alloc(1025), { idempotencyKey: 'big' }),
        small.sendToQueue(queue, { n: 2 }, { idempotencyKey: 'after' }),
      ]);
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      const error = (results[1] as PromiseRejectedResult).reason as Error;
      expect(error).toBeInstanceOf(MessageTooLargeError);
      expect(error.message).toMatch(/1025 bytes.*1024 bytes/);
      expect((await h.admin.drain(queue)).map((m) => m.properties.messageId)).toEqual(['before', 'after']);
    } finally {
      await small.close();
    }
  });

  test("by default the limit is the broker's documented max_message_size for its version: one byte over fails at once, the channel stays open", async () => {
    const queue = h.queue('too-big-default');
    await (await h.admin.ch()).assertQueue(queue, { durable: false });
    const limit = publisher.maxMessageBytes;
    expect([16 * 1024 * 1024, 128 * 1024 * 1024]).toContain(limit);
    await expect(publisher.sendToQueue(queue, Buffer.alloc(limit! + 1), { idempotencyKey: 'huge' })).rejects.toThrow(new RegExp(`max_message_size.*${limit}`));
    await publisher.sendToQueue(queue, { ok: 1 }, { idempotencyKey: 'ok' });
    expect((await h.admin.drain(queue)).map((m) => m.properties.messageId)).toEqual(['ok']);
  });
});
