/**
 * The publisher helper on the real broker: message id and idempotency-key header, confirms,
 * unroutable messages, and retried publishes deduplicated by the consumer.
 */
import { ConfigurationError, IDEMPOTENCY_KEY_HEADER, InvalidKeyError, silentLogger } from '../../../src';
import { MessageTooLargeError, RabbitMqPublisher, UnroutableError } from '../../../adapters/rabbitmq';
import { describeWithServices } from '../../support/services';
import { AMQP_URL } from './support/amqp';
import { applying, EffectLog, Harness } from './support/harness';
import { waitFor } from '../../support/wait';

describeWithServices(['rabbitmq'], 'RabbitMqPublisher (real broker)', () => {
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

  test('a publish without idempotencyKey (nor messageId) logs one warning per publisher: its retries are not deduplicated', async () => {
    const queue = h.queue('pub-nokey');
    await (await h.admin.ch()).assertQueue(queue);
    const warnings: { obj: object; msg?: string }[] = [];
    const logger = { debug: () => undefined, info: () => undefined, error: () => undefined, warn: (obj: object, msg?: string) => void warnings.push({ obj, msg }) };
    const keyed = new RabbitMqPublisher({ url: AMQP_URL, logger });
    await keyed.connect();
    try {
      await keyed.sendToQueue(queue, { n: 0 }, { idempotencyKey: 'k-0' });
      await keyed.sendToQueue(queue, { n: 0 }, { messageId: 'm-0' });
      expect(warnings).toEqual([]);
      const first = await keyed.sendToQueue(queue, { n: 1 });
      const second = await keyed.sendToQueue(queue, { n: 1 });
      expect(first.idempotencyKey).not.toBe(second.idempotencyKey);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.msg).toMatch(/a publish without idempotencyKey gets a random key per call, so a retry of such a publish is not deduplicated.*pass idempotencyKey/);
    } finally {
      await keyed.close();
    }
  });

  test('a publish after close() says so (not "before connect()"); connect() again makes the publisher usable', async () => {
    const queue = h.queue('pub-closed');
    await (await h.admin.ch()).assertQueue(queue);
    await publisher.close();
    await expect(publisher.sendToQueue(queue, { n: 1 })).rejects.toThrow(/called after close\(\)/);
    const fresh = new RabbitMqPublisher({ url: AMQP_URL });
    await expect(fresh.sendToQueue(queue, { n: 1 })).rejects.toThrow(/called before connect\(\)/);
    await publisher.connect();
    await expect(publisher.sendToQueue(queue, { n: 2 })).resolves.toMatchObject({ idempotencyKey: expect.any(String) });
  });

  test('a key over 255 bytes travels whole in idempotency-key, with its SHA-256 as the message id; a U+FFFD key is refused', async () => {
    const queue = h.queue('pub-long');
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, applying(new EffectLog()));
    await consumer.start();
    await consumer.stop();
    const key = 'k'.repeat(400);
    const receipt = await publisher.sendToQueue(queue, { n: 1 }, { idempotencyKey: key });
    expect(receipt.idempotencyKey).toBe(key);
    expect(receipt.messageId).toMatch(/^sha256:[0-9a-f]{64}$/);
    const [m] = await h.admin.drain(queue);
    expect(m!.properties.headers?.[IDEMPOTENCY_KEY_HEADER]).toBe(key);
    expect(m!.properties.messageId).toBe(receipt.messageId);
    await expect(publisher.sendToQueue(queue, { n: 2 }, { idempotencyKey: 'bad\uFFFDkey' })).rejects.toThrow(/U\+FFFD/);
  });

  test('sets message id and idempotency-key, resolves after the confirm; a retried publish is one effect', async () => {
    const queue = h.queue('pub');
    const effects = new EffectLog();
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, applying(effects));
    await consumer.start();
    await consumer.stop(); // keep the messages in the queue to inspect them first
    const r1 = await publisher.sendToQueue(queue, { paymentId: 'p-1' }, { idempotencyKey: 'p-1' });
    const r2 = await publisher.sendToQueue(queue, { paymentId: 'p-1' }, { idempotencyKey: 'p-1' }); // producer retry
    const r3 = await publisher.sendToQueue(queue, Buffer.from('raw'));
    expect(r1).toEqual({ messageId: 'p-1', idempotencyKey: 'p-1' });
    expect(r2.messageId).toBe('p-1');
    expect(r3.messageId).toMatch(/^[0-9a-f-]{36}$/);
    const [m1, , m3] = await h.admin.drain(queue);
    expect(m1!.properties.messageId).toBe('p-1');
    expect(m1!.properties.headers?.[IDEMPOTENCY_KEY_HEADER]).toBe('p-1');
    expect(m1!.properties.contentType).toBe('application/json');
    expect(m1!.properties.deliveryMode).toBe(2);
    expect(m3!.properties.headers?.[IDEMPOTENCY_KEY_HEADER]).toBe(r3.messageId);
    expect(m3!.properties.contentType).toBeUndefined();

    const source2 = h.source({ queue });
    const consumer2 = h.consumer({ source: source2, claimer: h.claimer('memory') }, applying(effects));
    await consumer2.start();
    await publisher.sendToQueue(queue, { paymentId: 'p-2' }, { idempotencyKey: 'p-2' });
    await publisher.sendToQueue(queue, { paymentId: 'p-2' }, { idempotencyKey: 'p-2' });
    await waitFor(() => source2.stats.acks === 2, { what: 'both copies acked' });
    expect(effects.count('test:p-2')).toBe(1);
  });

  test('concurrent publishes, some unroutable: each return reaches its own publish, and no twophase-publish-id header is sent', async () => {
    const queue = h.queue('mixed');
    const ch = await h.admin.ch();
    await ch.assertQueue(queue, { durable: false });
    await ch.bindQueue(queue, 'amq.direct', queue);
    const nobody = `nobody-${queue}`;
    // Same body and key for routable and unroutable publishes, and identical unroutable ones:
    // only the route tells them apart.
    const outcomes = await Promise.allSettled(
      Array.from({ length: 40 }, (_, i) => publisher.publish('amq.direct', i % 3 === 0 ? nobody : queue, { same: true }, { idempotencyKey: 'k', headers: { n: i % 3 === 0 ? 0 : 1 } })),
    );
    outcomes.forEach((outcome, i) => {
      if (i % 3 === 0) expect(outcome.status === 'rejected' && outcome.reason instanceof UnroutableError).toBe(true);
      else expect(outcome.status).toBe('fulfilled');
    });
    const delivered = await h.admin.drain(queue);
    expect(delivered).toHaveLength(26);
    for (const m of delivered) expect(Object.keys(m.properties.headers ?? {}).sort()).toEqual([IDEMPOTENCY_KEY_HEADER, 'n']);
  });

  test('heartbeatSeconds 0 turns heartbeats off (amqplib 2 honours 0; 0.10 took the server\'s 60 s)', async () => {
    const negotiated = (p: RabbitMqPublisher) => (p as unknown as { manager: { connection: { connection: { heartbeat: number } } } }).manager.connection.connection.heartbeat;
    const off = new RabbitMqPublisher({ url: AMQP_URL, heartbeatSeconds: 0 });
    await off.connect();
    try {
      expect(negotiated(off)).toBe(0);
      expect(negotiated(publisher)).toBe(5);
    } finally {
      await off.close();
    }
  });

  test('an unroutable message is reported, not silently dropped', async () => {
    await expect(publisher.publish('amq.direct', `nobody-${h.queue('unroutable')}`, { a: 1 })).rejects.toBeInstanceOf(UnroutableError);
    // The channel stays usable.
    const queue = h.queue('after-unroutable');
    const ch = await h.admin.ch();
    await ch.assertQueue(queue, { durable: false });
    await publisher.sendToQueue(queue, { ok: true });
    expect(await h.admin.messageCount(queue)).toBe(1);
  });

  test('sendToQueue to a queue that does not exist: UnroutableError says no queue has that name, and the fix', async () => {
    const missing = h.queue('no-such-queue');
    const failed = await publisher.sendToQueue(missing, { a: 1 }, { idempotencyKey: 'k-noq' }).then(() => undefined, (error: unknown) => error as Error);
    expect(failed).toBeInstanceOf(UnroutableError);
    expect(failed?.message).toMatch(new RegExp(`no queue named "${missing.replace(/\./g, '\\.')}" exists \\(the default exchange routes by queue name\\): declare the queue`));
  });

  test('a publish to an exchange that does not exist names the broker\'s reason (404, no exchange), not only "channel closed"; the publisher recovers', async () => {
    const missing = `${h.queue('no-such-exchange')}.x`;
    const failed = await publisher.publish(missing, 'rk', { a: 1 }, { idempotencyKey: 'k-missing' }).then(() => undefined, (error: unknown) => error as Error);
    expect(failed?.message).toMatch(new RegExp(`publish to exchange "${missing.replace(/\./g, '\\.')}" with routing key "rk" was not confirmed: .*the broker closed the channel: .*404.*no exchange`));
    const queue = h.queue('after-missing-exchange');
    await (await h.admin.ch()).assertQueue(queue, { durable: false });
    await waitFor(async () => publisher.sendToQueue(queue, { ok: true }).then(() => true, () => false), { what: 'a publish on the new channel' });
    expect(await h.admin.messageCount(queue)).toBeGreaterThanOrEqual(1);
  });

  test('after a publish to a missing exchange closed the channel, a publish made 100 ms later goes through at once (default reconnectDelayMs)', async () => {
    const own = new RabbitMqPublisher({ url: AMQP_URL, publishTimeoutMs: 5000, logger: silentLogger });
    await own.connect();
    try {
      const queue = h.queue('right-after-missing-exchange');
      await (await h.admin.ch()).assertQueue(queue, { durable: false });
      await expect(own.publish(`${h.queue('gone')}.x`, 'rk', { a: 1 }, { idempotencyKey: 'k-gone' })).rejects.toThrow(/no exchange/);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const started = Date.now();
      await own.sendToQueue(queue, { ok: true }, { idempotencyKey: 'k-after' });
      expect(Date.now() - started).toBeLessThan(500);
      expect(await h.admin.messageCount(queue)).toBe(1);
    } finally {
      await own.close();
    }
  });

  test('what amqplib cannot encode fails that publish at once (headers over 65 536 bytes: MessageTooLargeError; a 300-byte message id, a function header: ConfigurationError); nothing is sent and later confirms stay in step', async () => {
    const queue = h.queue('big-headers');
    const ch = await h.admin.ch();
    await ch.assertQueue(queue, { durable: false });
    const started = Date.now();
    await expect(publisher.sendToQueue(queue, { a: 1 }, { headers: { blob: 'x'.repeat(70_000) } })).rejects.toBeInstanceOf(MessageTooLargeError);
    await expect(publisher.sendToQueue(queue, { a: 1 }, { headers: { f: () => 1 } })).rejects.toBeInstanceOf(ConfigurationError);
    // A message id over AMQP's 255-byte short string: amqplib would fail it after registering its confirm.
    await expect(publisher.sendToQueue(queue, { a: 1 }, { idempotencyKey: 'long-id', messageId: 'm'.repeat(300) })).rejects.toBeInstanceOf(ConfigurationError);
    expect(Date.now() - started).toBeLessThan(1000); // refused up front, not after the 5 s confirm deadline
    // The confirms of later publishes still line up.
    await Promise.all([1, 2, 3].map((i) => publisher.sendToQueue(queue, { ok: i }, { idempotencyKey: `after-${i}` })));
    await publisher.sendToQueue(queue, { ok: 4 }, { idempotencyKey: 'after-4' });
    const messages = await h.admin.drain(queue);
    expect(messages.map((m) => m.properties.messageId)).toEqual(['after-1', 'after-2', 'after-3', 'after-4']);
  });

  test('with a frameMax below the header size, a publish fails at once with MessageTooLargeError instead of the broker closing the connection', async () => {
    const queue = h.queue('small-frames');
    const ch = await h.admin.ch();
    await ch.assertQueue(queue, { durable: false });
    const small = new RabbitMqPublisher({ url: `${AMQP_URL}?frameMax=8192`, publishTimeoutMs: 5000 });
    await small.connect();
    try {
      await expect(small.sendToQueue(queue, { a: 1 }, { headers: { blob: 'x'.repeat(20_000) } })).rejects.toThrow(/negotiated frame_max of 8192 bytes/);
      await small.sendToQueue(queue, { ok: 1 }, { idempotencyKey: 'after' }); // same connection, still open
      const messages = await h.admin.drain(queue);
      expect(messages.map((m) => m.properties.messageId)).toEqual(['after']);
    } finally {
      await small.close();
    }
  });

  test('publish before connect is a configuration error; an empty key is an invalid key', async () => {
    const idle = new RabbitMqPublisher({ url: AMQP_URL });
    await expect(idle.publish('', 'q', {})).rejects.toBeInstanceOf(ConfigurationError);
    await expect(publisher.sendToQueue('q', {}, { idempotencyKey: '' })).rejects.toBeInstanceOf(InvalidKeyError);
  });
});
