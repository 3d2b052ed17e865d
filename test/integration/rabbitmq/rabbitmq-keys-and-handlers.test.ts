/**
 * Issue 12 on the real RabbitMQ with the Redis claimer:
 * - item 1: byte-array `idempotency-key` headers (a Java `byte[]`, amqplib's Buffer) never share a
 *   claim; valid UTF-8 bytes are the same key as that text; a text key holding U+FFFD (bytes lost
 *   before twophase saw them, as amqplib hands over a non-UTF-8 long string) is dead-lettered as
 *   `invalid_key` with a reason saying so.
 * - item 2: a synchronous handler returning something that is not a disposition is dead-lettered
 *   once as `invalid_disposition`, never retried.
 */
import { ConsumerBase, type ConsumerOptions, type Disposition } from '../../../src';
import { HEADERS } from '../../../adapters/rabbitmq';
import { describeWithServices } from '../../support/services';
import { applying, EffectLog, Harness } from './support/harness';
import { waitFor } from '../../support/wait';

/** A consumer whose `handle()` is synchronous (not `async`). */
class SyncConsumer extends ConsumerBase<unknown> {
  runs = 0;
  constructor(
    options: ConsumerOptions,
    private readonly result: () => unknown,
  ) {
    super(options);
  }
  handle(): Disposition {
    this.runs++;
    return this.result() as Disposition;
  }
}

describeWithServices(['rabbitmq', 'redis'], 'RabbitMQ + Redis: keys from foreign producers and synchronous handlers (issue 12)', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  test('byte-array keys [0xff,0x41], [0xfe,0x41], [0xc3,0x28] are three keys: three effects; a copy of one is a duplicate', async () => {
    const queue = h.queue('keys-bin');
    const effects = new EffectLog();
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('redis') }, applying(effects));
    await consumer.start();
    for (const bytes of [[0xff, 0x41], [0xfe, 0x41], [0xc3, 0x28], [0xff, 0x41]]) {
      await h.admin.publish('', queue, { bytes }, { headers: { 'idempotency-key': Buffer.from(bytes) } });
    }
    await waitFor(() => source.stats.acks === 4, { what: 'all 4 deliveries acked' });
    expect(effects.keys).toBe(3);
    expect(effects.duplicated()).toEqual([]);
    expect(await h.admin.messageCount(`${queue}.dlq`)).toBe(0);
  });

  test('the same text as a string header and as a byte array is one key: one effect', async () => {
    const queue = h.queue('keys-text');
    const effects = new EffectLog();
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('redis') }, applying(effects));
    await consumer.start();
    await h.admin.publish('', queue, { n: 1 }, { headers: { 'idempotency-key': 'pay-é-7' } });
    await h.admin.publish('', queue, { n: 2 }, { headers: { 'idempotency-key': Buffer.from('pay-é-7', 'utf8') } });
    await waitFor(() => source.stats.acks === 2, { what: 'both deliveries acked' });
    expect(effects.keys).toBe(1);
    expect(effects.count('test:pay-é-7')).toBe(1);
  });

  test('a text key holding U+FFFD (its bytes were replaced before twophase saw them) is dead-lettered as invalid_key, saying so', async () => {
    const queue = h.queue('keys-fffd');
    const effects = new EffectLog();
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('redis') }, applying(effects));
    await consumer.start();
    // What amqplib hands over for a Java LongString made of the bytes [0xff, 0x41].
    await h.admin.publish('', queue, { n: 1 }, { headers: { 'idempotency-key': Buffer.from([0xff, 0x41]).toString('utf8') } });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'the message dead-lettered' });
    const [dead] = await h.admin.drain(`${queue}.dlq`);
    expect(dead!.properties.headers?.[HEADERS.reason]).toBe('invalid_key');
    expect(String(dead!.properties.headers?.[HEADERS.errorMessage])).toMatch(/U\+FFFD.*not valid UTF-8 and were replaced before twophase saw them/);
    expect(effects.total).toBe(0);
  });

  test('a synchronous handler returning undefined is dead-lettered once as invalid_disposition, never retried', async () => {
    const queue = h.queue('sync-handler');
    const source = h.source({ queue });
    const consumer = new SyncConsumer(
      { name: 'test', source, claimer: h.claimer('redis'), maxAttempts: 5, retryBackoff: { initialDelayMs: 100, maxDelayMs: 100, jitter: 0 }, logger: h.logger },
      () => undefined,
    );
    try {
      await consumer.start();
      await h.admin.publish('', queue, { n: 1 }, { headers: { 'idempotency-key': 'sync-1' } });
      await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'the message dead-lettered' });
      const [dead] = await h.admin.drain(`${queue}.dlq`);
      expect(dead!.properties.headers?.[HEADERS.reason]).toBe('invalid_disposition');
      expect(consumer.runs).toBe(1);
    } finally {
      await consumer.stop();
    }
  });
});
