/**
 * The Kafka adapter's own logic without a broker: option validation, the dead-letter and replay
 * headers, the producer helper, the CLI's broker parsing, and, on an in-process fake client,
 * group generations, commit fencing, in-place retries and dead-letter retries. Needs no service.
 */
import { ack, ConfigurationError, type Delivery, InMemoryClaimer, InvalidKeyError, PermanentError, RetryableError, ShutdownError, silentLogger } from '../../../src';
import { deadLetterRecord, HEADERS, KafkaSource, type KafkaSourceOptions, KeyedProducer, readHeader, replayRecord, withIdempotencyKey } from '../../../adapters/kafka';
import { type DeliverySink, settledSubmission } from '../../../src/adapter-kit';
import { parseBrokers } from '../../../adapters/cli/backends/kafka';
import { FakeKafka } from './support/fake-client';
import { GatedCommitClaimer } from '../../unit/helpers';
import { TestConsumer, type TestHandler } from './support/kafka-helpers';
import { waitFor } from '../../support/wait';

const base: KafkaSourceOptions = { topics: ['orders'], groupId: 'billing', logger: silentLogger };

describe('KafkaSource options', () => {
  const make = (options: Partial<KafkaSourceOptions>) => new KafkaSource({ client: new FakeKafka([]) }, { ...base, ...options } as KafkaSourceOptions);

  test.each([
    ['no topics', { topics: [] }, /topics must be a non-empty array/],
    ['a repeated topic', { topics: ['a', 'a'] }, /must not repeat/],
    ['an empty groupId', { groupId: '' }, /groupId must be a non-empty string/],
    ['heartbeatInterval ≥ sessionTimeout', { consumer: { sessionTimeout: 6000, heartbeatInterval: 6000 } }, /heartbeatInterval \(6000\) must be below consumer.sessionTimeout \(6000\)/],
    ['claimBatchSize 0', { claimBatchSize: 0 }, /claimBatchSize must be an integer in \[1, 1000\], got 0/],
    ['a fractional preclaimMaxAgeMs', { preclaimMaxAgeMs: 1.5 }, /preclaimMaxAgeMs must be an integer/],
    ['commitIntervalMs 5', { commitIntervalMs: 5 }, /commitIntervalMs must be an integer in \[10, 600000\], got 5/],
    ['a dead-letter topic that is consumed', { deadLetterTopic: () => 'orders' }, /a topic this source consumes/],
    ['an empty dead-letter topic', { deadLetterTopic: () => '' }, /must return a topic name/],
    ['an unknown deadLetterTopicCheck', { deadLetterTopicCheck: 'maybe' as never }, /deadLetterTopicCheck must be/],
    ['partitionConcurrency 0', { partitionConcurrency: 0 }, /partitionConcurrency must be an integer/],
  ])('%s is refused at construction', (_label, options, message) => {
    expect(() => make(options)).toThrow(ConfigurationError);
    expect(() => make(options)).toThrow(message);
  });

  test('defaults: <topic>.dlq, maxWaitTimeInMs 250, kafkajs session defaults, a copy of the input', () => {
    const input = { ...base, consumer: { sessionTimeout: 9000 } };
    const source = new KafkaSource({ client: new FakeKafka([]) }, input);
    expect(source.settings.deadLetterTopic('orders')).toBe('orders.dlq');
    expect(source.settings.consumer).toEqual({ groupId: 'billing', maxWaitTimeInMs: 250, sessionTimeout: 9000 });
    expect(source.settings.heartbeatIntervalMs).toBe(3000);
    expect(input.consumer).toEqual({ sessionTimeout: 9000 });
  });

  test('heartbeats off: start warns unless the handler timeout is at most sessionTimeout', async () => {
    const warnings: string[] = [];
    const logger = { ...silentLogger, warn: (_: object, msg?: string) => void warnings.push(msg ?? '') };
    const sink = { dispatch: () => Promise.reject(new Error('unused')), submit: () => settledSubmission(Promise.reject(new Error('unused'))), claimBatch: () => Promise.resolve([]) };
    const quiet = new KafkaSource({ client: new FakeKafka(['orders', 'orders.dlq']) }, { ...base, heartbeatWhileProcessing: false, logger, consumer: { sessionTimeout: 6000, heartbeatInterval: 2000 } });
    await quiet.start(sink, { concurrency: 1, handlerTimeoutMs: 5000 });
    await quiet.close();
    expect(warnings).toEqual([]);
    const loud = new KafkaSource({ client: new FakeKafka(['orders', 'orders.dlq']) }, { ...base, heartbeatWhileProcessing: false, logger, consumer: { sessionTimeout: 6000, heartbeatInterval: 2000 } });
    await loud.start(sink, { concurrency: 1 });
    await loud.close();
    expect(warnings.join()).toMatch(/heartbeatWhileProcessing is off and the handler timeout \(none\) exceeds sessionTimeout \(6000 ms\)/);
  });

  test('a claim made ahead is never older than a third of the lease the consumer passes', async () => {
    const kafka = new FakeKafka(['orders', 'orders.dlq']);
    const source = new KafkaSource({ client: kafka }, { ...base, preclaimMaxAgeMs: 5000 });
    const sink = { dispatch: () => Promise.reject(new Error('unused')), submit: () => settledSubmission(Promise.reject(new Error('unused'))), claimBatch: () => Promise.resolve([]) };
    await source.start(sink, { concurrency: 1, leaseTtlMs: 900 });
    expect((source as unknown as { host: { preclaimMaxAgeMs: number } }).host.preclaimMaxAgeMs).toBe(300);
    await source.close();
  });
});

describe('KafkaSource closed while it starts', () => {
  const sink = { dispatch: () => Promise.reject(new Error('unused')), submit: () => settledSubmission(Promise.reject(new Error('unused'))), claimBatch: () => Promise.resolve([]) };
  function gated(kafka: FakeKafka, step: 'listTopics' | 'connect'): { release: () => void; reached: () => boolean } {
    let release!: () => void;
    let reached = false;
    const gate = new Promise<void>((resolve) => (release = resolve));
    if (step === 'listTopics') {
      const list = kafka.adminClient.listTopics.bind(kafka.adminClient);
      kafka.adminClient.listTopics = async () => {
        reached = true;
        await gate;
        return list();
      };
    } else {
      const make = kafka.consumer.bind(kafka);
      kafka.consumer = (config) => {
        const consumer = make(config);
        consumer.connect = async () => {
          reached = true;
          await gate;
        };
        return consumer;
      };
    }
    return { release, reached: () => reached };
  }

  test.each(['listTopics', 'connect'] as const)('close() during %s: start() rejects with ShutdownError, nothing is left connected or running', async (step) => {
    const kafka = new FakeKafka(['orders', 'orders.dlq']);
    const gate = gated(kafka, step);
    const source = new KafkaSource({ client: kafka }, base);
    const starting = source.start(sink, { concurrency: 1 });
    await waitFor(() => gate.reached(), { what: `start reached ${step}` });
    await source.close();
    gate.release();
    await expect(starting).rejects.toBeInstanceOf(ShutdownError);
    expect(kafka.consumers.every((c) => c.disconnected && !c.running)).toBe(true);
    expect(kafka.consumers).toHaveLength(step === 'connect' ? 1 : 0);
    expect(source.isConsuming()).toBe(false);
  });
});

describe('dead-letter and replay headers', () => {
  const record = {
    key: Buffer.from('k'),
    value: Buffer.from('{"a":1}'),
    offset: '41',
    timestamp: '1700000000000',
    headers: { 'idempotency-key': Buffer.from('pay-1'), traceparent: 'x', [HEADERS.reason]: 'stale' },
  };

  test('the dead-letter copy keeps key, value and headers and describes the dead-lettering', () => {
    const copy = deadLetterRecord(record, { topic: 'orders', partition: 2, groupId: 'billing' }, { reason: 'retry_exhausted', attempts: 5, errorMessage: 'boom', errorType: 'RetryableError' }, 123);
    expect(copy.key).toBe(record.key);
    expect(copy.value).toBe(record.value);
    const h = copy.headers!;
    expect(readHeader(h, 'idempotency-key')).toBe('pay-1');
    expect(readHeader(h, 'traceparent')).toBe('x');
    expect([HEADERS.originalTopic, HEADERS.originalPartition, HEADERS.originalOffset, HEADERS.reason, HEADERS.attempts, HEADERS.errorMessage, HEADERS.errorType, HEADERS.rejectedAt, HEADERS.originalMessageId].map((n) => readHeader(h, n))).toEqual([
      'orders',
      '2',
      '41',
      'retry_exhausted',
      '5',
      'boom',
      'RetryableError',
      '123',
      'orders:2:41',
    ]);
    expect(record.headers[HEADERS.reason]).toBe('stale');
  });

  test('a replay goes to the original topic without dead-letter headers, counting replays; an offset-keyed record gets its original key as header', () => {
    const dead = deadLetterRecord({ ...record, headers: {} }, { topic: 'orders', partition: 0, groupId: 'g' }, { reason: 'permanent_error', attempts: 1 }, 1);
    const plan = replayRecord({ key: null, value: dead.value as Buffer, offset: '7', timestamp: '0', headers: dead.headers }, 2)!;
    expect(plan.topic).toBe('orders');
    expect(plan.idempotencyKey).toBe('orders:0:41');
    expect(readHeader(plan.record.headers, 'idempotency-key')).toBe('orders:0:41');
    expect(readHeader(plan.record.headers, HEADERS.reason)).toBeUndefined();
    expect(readHeader(plan.record.headers, HEADERS.replayCount)).toBe('1');
    const twice = replayRecord({ key: null, value: null, offset: '8', timestamp: '0', headers: { ...plan.record.headers, [HEADERS.originalTopic]: 'orders' } }, 3)!;
    expect(readHeader(twice.record.headers, HEADERS.replayCount)).toBe('2');
    expect(replayRecord({ ...record, headers: {} }, 0)).toBeUndefined();
  });

  test('readHeader takes the last of repeated headers and decodes Buffers', () => {
    expect(readHeader({ h: [Buffer.from('a'), 'b'] }, 'h')).toBe('b');
    expect(readHeader({ h: Buffer.from('é') }, 'h')).toBe('é');
    expect(readHeader({}, 'h')).toBeUndefined();
  });
});

describe('producer helper', () => {
  test('sets the idempotency-key header and, by default, the record key; keeps other headers; never mutates', () => {
    const input = { idempotencyKey: 'pay-9', value: 'v', headers: { a: '1', 'idempotency-key': 'stale' } };
    const message = withIdempotencyKey(input);
    expect(message).toEqual({ key: 'pay-9', value: 'v', headers: { a: '1', 'idempotency-key': 'pay-9' } });
    expect(withIdempotencyKey({ ...input, key: null }).key).toBeNull();
    expect(input.headers['idempotency-key']).toBe('stale');
  });

  test('an invalid key is refused before anything is sent', () => {
    expect(() => withIdempotencyKey({ idempotencyKey: '', value: 'v' })).toThrow(InvalidKeyError);
  });

  test('a value that is not a Buffer, a string or null is refused before anything is sent, naming the fix', () => {
    expect(() => withIdempotencyKey({ idempotencyKey: 'pay-1', value: { a: 1 } as never })).toThrow(ConfigurationError);
    expect(() => withIdempotencyKey({ idempotencyKey: 'pay-1', value: 42 as never })).toThrow(/value must be a Buffer, a string or null \(serialise objects first, e.g. JSON.stringify\), got 42 \(a number\)/);
    expect(withIdempotencyKey({ idempotencyKey: 'pay-1', value: null }).value).toBeNull();
  });

  test('a misspelled message field is refused by name, never sent without the header', () => {
    const message = { idempotencyKey: 'pay-1', value: 'v', header: { a: '1' } };
    expect(() => withIdempotencyKey(message)).toThrow(ConfigurationError);
    expect(() => withIdempotencyKey(message)).toThrow(/header.*headers/s);
  });

  test('send refuses a single message instead of an array, and unknown send options, before anything is sent', () => {
    const sent: unknown[] = [];
    const producer = new KeyedProducer({ producer: { send: async (record: unknown) => { sent.push(record); return []; } } as never });
    expect(() => producer.send('t', { idempotencyKey: 'k', value: 'v' } as never)).toThrow(ConfigurationError);
    const options = { acks: -1, timeout: 5000 };
    expect(() => producer.send('t', [{ idempotencyKey: 'k', value: 'v' }], options)).toThrow(/timeout.*timeoutMs/s);
    expect(sent).toEqual([]);
  });
});

describe('CLI broker list', () => {
  test('host:port lists, kafka:// prefix, AMQP URLs ignored, junk refused', () => {
    expect(parseBrokers('kafka://a:9092,b:9093')).toEqual(['a:9092', 'b:9093']);
    expect(parseBrokers('127.0.0.1:9092')).toEqual(['127.0.0.1:9092']);
    expect(parseBrokers('amqp://guest:guest@h:5672')).toBeUndefined();
    expect(parseBrokers(undefined)).toBeUndefined();
    expect(() => parseBrokers('nohost')).toThrow(/invalid Kafka broker/);
  });
});

describe('KafkaSource on a fake client', () => {
  const consumers: TestConsumer[] = [];
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.stop()));
  });

  async function setup(handler: TestHandler, options: Partial<KafkaSourceOptions> = {}, existing = ['orders', 'orders.dlq']) {
    const kafka = new FakeKafka(existing);
    const source = new KafkaSource({ client: kafka }, { ...base, commitIntervalMs: 10, ...options });
    const consumer = new TestConsumer({ name: 'billing', claimer: new InMemoryClaimer(), source, retryBackoff: { initialDelayMs: 10, maxDelayMs: 10, jitter: 0 }, maxAttempts: 3 }, handler);
    consumers.push(consumer);
    return { kafka, source, consumer };
  }

  /** A started consumer on partition 0 of `orders` whose claim commits wait until the test opens them. */
  async function gatedSetup(commitIntervalMs: number) {
    const kafka = new FakeKafka(['orders', 'orders.dlq']);
    const source = new KafkaSource({ client: kafka }, { ...base, commitIntervalMs });
    const claimer = new GatedCommitClaimer(new InMemoryClaimer());
    const handled: string[] = [];
    const consumer = new TestConsumer({ name: 'billing', claimer, source }, async (message) => {
      handled.push(message.body.id);
      return ack();
    });
    consumers.push(consumer);
    await consumer.start();
    const client = kafka.consumers[0]!;
    client.join({ orders: [0] });
    const open = (offset: number) => claimer.open(`billing:orders-0-${offset}`);
    return { client, consumer, handled, open };
  }

  test('start fails closed when a dead-letter topic is missing; `create` creates it', async () => {
    const a = await setup(async () => ack(), {}, ['orders']);
    await expect(a.consumer.start()).rejects.toThrow(/dead-letter topic\(s\) missing: "orders.dlq"/);
    const b = await setup(async () => ack(), { deadLetterTopicCheck: 'create' }, ['orders']);
    await b.consumer.start();
    expect(b.kafka.adminClient.created).toEqual(['orders.dlq']);
  });

  test('a partition revoked while its record is in the handler: the record finishes, its claim commits, its offset is never committed', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const handled: string[] = [];
    const { kafka, consumer } = await setup(async (message, context) => {
      if (context.metadata.attributes?.partition === 1) await gate;
      handled.push(message.body.id);
      return ack();
    });
    await consumer.start();
    const client = kafka.consumers[0]!;
    client.join({ orders: [0, 1] });
    await client.deliver('orders', 0, [0, 1]);
    await client.deliver('orders', 1, [0, 1]);
    await waitFor(() => client.committedOffsets('orders', 0).includes('2'), { what: 'partition 0 committed' });
    client.join({ orders: [0] }); // partition 1 moved to another member
    release();
    await waitFor(() => handled.includes('1-0'), { what: 'the in-flight record finished' });
    await client.deliver('orders', 0, [2]);
    await waitFor(() => client.committedOffsets('orders', 0).includes('3'), { what: 'partition 0 goes on' });
    expect(client.committedOffsets('orders', 1)).toEqual([]);
    expect(handled).not.toContain('1-1'); // queued behind the revoked record: dropped, not run
    expect(consumer.count('committed')).toBe(4);
  });

  test('a partition kept across a rebalance: its new worker starts after the old in-flight record and skips it, settled (not dispatched again)', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const handled: string[] = [];
    let started = 0;
    const { kafka, consumer } = await setup(async (message) => {
      started++;
      if (message.body.seq === 0) await gate;
      handled.push(message.body.id);
      return ack();
    });
    await consumer.start();
    const client = kafka.consumers[0]!;
    client.join({ orders: [0] });
    await client.deliver('orders', 0, [0, 1]);
    await waitFor(() => started === 1, { what: 'offset 0 in the handler' });
    client.join({ orders: [0] }); // new generation, same partition: fetched again from the committed offset (none)
    await client.deliver('orders', 0, [0, 1, 2]);
    release();
    await waitFor(() => client.committedOffsets('orders', 0).includes('3'), { what: 'all three committed in the new generation' });
    expect(handled).toEqual(['0-0', '0-1', '0-2']);
    // Offset 0 was settled by the previous worker on this member: skipped, not claimed again.
    expect(started).toBe(3);
    expect(consumer.count('done_duplicate')).toBe(0);
    expect(client.commits.every((c) => c.generation === 2)).toBe(true);
  });

  test('a record claimed ahead and dropped by a rebalance did not run: its attempt does not count, so it runs next as attempt 1', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const attempts = new Map<number, number[]>();
    const { kafka, source, consumer } = await setup(async (message, context) => {
      attempts.set(message.body.seq, [...(attempts.get(message.body.seq) ?? []), context.attempt]);
      if (message.body.seq === 1) await gate;
      return ack();
    });
    await consumer.start();
    const client = kafka.consumers[0]!;
    client.join({ orders: [0] });
    await client.deliver('orders', 0, [0, 1, 2]);
    // Offset 0 ran alone; then 1 and 2 were claimed together, and 1 waits in its handler.
    await waitFor(() => attempts.has(1) && source.stats.preclaimed === 3, { what: 'offset 2 claimed ahead while offset 1 runs' });
    client.join({ orders: [0] }); // a rebalance: offset 2's claim is released, its handler never ran
    await waitFor(() => source.stats.preclaimReleased === 1, { what: 'the claim made ahead released' });
    release();
    await client.deliver('orders', 0, [1, 2]);
    await waitFor(() => client.committedOffsets('orders', 0).includes('3'), { what: 'offset 2 committed in the new generation' });
    expect(attempts.get(2)).toEqual([1]);
  });

  test('requeue in place pauses the partition, retries the same record, keeps order, and dead-letters at maxAttempts', async () => {
    const calls: string[] = [];
    const { kafka, consumer } = await setup(async (message) => {
      calls.push(message.body.id);
      if (message.body.seq === 1) throw new RetryableError('always failing');
      return ack();
    });
    await consumer.start();
    const client = kafka.consumers[0]!;
    const pausedSeen: boolean[] = [];
    client.join({ orders: [0] });
    const watcher = setInterval(() => pausedSeen.push(client.pausedSet.has('orders/0')), 1);
    await client.deliver('orders', 0, [0, 1, 2]);
    await waitFor(() => client.committedOffsets('orders', 0).includes('3'), { what: 'all settled and committed' });
    clearInterval(watcher);
    expect(calls).toEqual(['0-0', '0-1', '0-1', '0-1', '0-2']);
    expect(pausedSeen).toContain(true);
    expect(client.pausedSet.has('orders/0')).toBe(false);
    const producer = kafka.producers[0]!;
    expect(producer.sent.map((s) => [s.topic, readHeader(s.record.headers, HEADERS.reason), readHeader(s.record.headers, HEADERS.attempts)])).toEqual([['orders.dlq', 'retry_exhausted', '3']]);
  });

  test('a dead letter that cannot be written blocks its partition (never skipped) and is retried until written', async () => {
    const { kafka, consumer, source } = await setup(
      async (message) => {
        if (message.body.seq === 0) throw new PermanentError('poison');
        return ack();
      },
      { deadLetterBackoff: { initialDelayMs: 5, maxDelayMs: 5 } },
    );
    await consumer.start();
    const client = kafka.consumers[0]!;
    kafka.producers[0]!.failures = 3;
    client.join({ orders: [0] });
    await client.deliver('orders', 0, [0, 1]);
    await waitFor(() => client.committedOffsets('orders', 0).includes('2'), { what: 'both settled after the dead letter was written' });
    expect(source.stats.deadLetterFailures).toBe(3);
    expect(source.stats.deadLettered).toBe(1);
    // No commit ever covered offset 0 before its dead letter existed.
    expect(client.committedOffsets('orders', 0)).toEqual(['2']);
  });

  test('commits are pipelined: later records run while earlier commits are held, and the committed offset never passes a record whose commit has not ended', async () => {
    const { client, consumer, handled, open } = await gatedSetup(10);
    await client.deliver('orders', 0, [0, 1, 2, 3]);
    await waitFor(() => handled.length === 4, { what: 'all four handled with every commit held' });
    expect(handled).toEqual(['0-0', '0-1', '0-2', '0-3']);
    open(2);
    open(1);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(client.committedOffsets('orders', 0)).toEqual([]); // offset 0's commit still held
    open(0);
    await waitFor(() => client.committedOffsets('orders', 0).includes('3'), { what: 'offsets 0-2 settled' });
    open(3);
    await waitFor(() => client.committedOffsets('orders', 0).includes('4'), { what: 'offset 3 settled' });
    expect(client.committedOffsets('orders', 0)).toEqual(['3', '4']);
    expect(consumer.count('committed')).toBe(4);
  });

  test('at most 256 commits per partition are in flight; the worker waits for one to end before the next handler', async () => {
    const { client, handled, open } = await gatedSetup(10);
    await client.deliver('orders', 0, Array.from({ length: 300 }, (_, i) => i));
    await waitFor(() => handled.length === 256, { what: '256 handled' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(handled.length).toBe(256);
    open(0);
    await waitFor(() => handled.length === 257, { what: 'one more after one commit ended' });
    for (let i = 1; i < 300; i++) open(i);
    await waitFor(() => client.committedOffsets('orders', 0).includes('300'), { what: 'all 300 committed' });
  });

  test('graceful stop waits for commits in flight, then commits their offsets', async () => {
    const { client, consumer, handled, open } = await gatedSetup(60_000);
    await client.deliver('orders', 0, [0, 1, 2]);
    await waitFor(() => handled.length === 3, { what: 'three handled, commits held' });
    let stopped = false;
    const stopping = consumer.stop().then(() => (stopped = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(stopped).toBe(false);
    expect(client.committedOffsets('orders', 0)).toEqual([]);
    for (const offset of [0, 1, 2]) open(offset);
    await stopping;
    expect(client.committedOffsets('orders', 0)).toEqual(['3']);
    expect(client.disconnected).toBe(true);
  });

  test('a duplicate right behind its original (same key, commit still in flight) waits for the commit, not for the busy delay', async () => {
    class SameKeyConsumer extends TestConsumer {
      protected override messageKey(): string {
        return 'same-key';
      }
    }
    const kafka = new FakeKafka(['orders', 'orders.dlq']);
    const source = new KafkaSource({ client: kafka }, { ...base, commitIntervalMs: 10 });
    const claimer = new GatedCommitClaimer(new InMemoryClaimer());
    let runs = 0;
    const consumer = new SameKeyConsumer({ name: 'billing', claimer, source, busyRequeueDelayMs: 60_000 }, async () => {
      runs++;
      return ack();
    });
    consumers.push(consumer);
    await consumer.start();
    const client = kafka.consumers[0]!;
    client.join({ orders: [0] });
    await client.deliver('orders', 0, [0, 1]);
    await waitFor(() => claimer.waiting.length === 1 && consumer.count('busy') === 1, { what: 'offset 1 busy behind the held commit of offset 0' });
    claimer.open('billing:same-key');
    // With the 60 s busy delay this would time out; it settles as soon as the commit ended.
    await waitFor(() => client.committedOffsets('orders', 0).includes('2'), { what: 'both settled', timeoutMs: 5000 });
    expect(runs).toBe(1);
    expect(consumer.count('done_duplicate')).toBe(1);
  });

  test('a sink whose dispatch rejects (a bug) stops only its partition, paused, and reports the consumer not live: the slot is freed, other partitions go on, close() returns', async () => {
    const kafka = new FakeKafka(['orders', 'orders.dlq']);
    const errors: string[] = [];
    const logger = { ...silentLogger, error: (_: object, msg?: string) => void errors.push(msg ?? '') };
    const source = new KafkaSource({ client: kafka }, { ...base, commitIntervalMs: 10, logger });
    const dispatched: string[] = [];
    const failures: Error[] = [];
    const sink: DeliverySink = {
      fail: (error) => void failures.push(error),
      submit: (delivery) => settledSubmission(sink.dispatch(delivery)),
      dispatch: async (delivery: Delivery) => {
        const partition = Number(delivery.metadata.attributes?.partition);
        if (partition === 0) throw new Error('sink bug');
        await delivery.settler.ack({ duplicate: false });
        dispatched.push(`${partition}-${String(delivery.metadata.attributes?.offset)}`);
        return { action: 'ack' as const, outcome: 'committed' as const, handled: true, durationMs: 0 };
      },
      claimBatch: async (deliveries: readonly Delivery[]) => deliveries.map(() => ({ kind: 'skipped' as const })),
    };
    await source.start(sink, { concurrency: 1 });
    const client = kafka.consumers[0]!;
    client.join({ orders: [0, 1] });
    await client.deliver('orders', 0, [0, 1]);
    await client.deliver('orders', 1, [0]);
    await waitFor(() => client.committedOffsets('orders', 1).includes('1'), { what: 'partition 1 processed with the one slot' });
    expect(dispatched).toEqual(['1-0']);
    // Nothing in a stable group would start partition 0 again: the consumer must hear of it once.
    await waitFor(() => failures.length > 0, { what: 'the sink told the source failed' });
    expect(failures).toHaveLength(1);
    expect(failures[0]!.message).toMatch(/the partition worker failed: sink bug/);
    expect(client.pausedSet.has('orders/0')).toBe(true);
    expect(errors).toEqual([expect.stringMatching(/worker of orders partition 0 failed; the partition stays paused .* \(it now reports not live\)/)]);
    await source.close();
    expect(client.committedOffsets('orders', 0)).toEqual([]);
  });

  test.each([
    ['partitionConcurrency 1 below the consumer concurrency 4: one partition dispatches at a time', 1, 1],
    ['no partitionConcurrency: the consumer concurrency is the one bound, both partitions dispatch at once', undefined, 2],
  ])('%s', async (_name, partitionConcurrency, expectedMax) => {
    const kafka = new FakeKafka(['orders', 'orders.dlq']);
    const source = new KafkaSource({ client: kafka }, { ...base, commitIntervalMs: 10, ...(partitionConcurrency === undefined ? {} : { partitionConcurrency }) });
    let inFlight = 0;
    let maxInFlight = 0;
    const held: Array<() => void> = [];
    const sink: DeliverySink = {
      submit: (delivery) => settledSubmission(sink.dispatch(delivery)),
      dispatch: async (delivery: Delivery) => {
        maxInFlight = Math.max(maxInFlight, ++inFlight);
        await new Promise<void>((resolve) => held.push(resolve));
        inFlight--;
        await delivery.settler.ack({ duplicate: false });
        return { action: 'ack' as const, outcome: 'committed' as const, handled: true, durationMs: 0 };
      },
      claimBatch: async (deliveries: readonly Delivery[]) => deliveries.map(() => ({ kind: 'skipped' as const })),
    };
    await source.start(sink, { concurrency: 4 });
    const client = kafka.consumers[0]!;
    client.join({ orders: [0, 1] });
    await client.deliver('orders', 0, [0]);
    await client.deliver('orders', 1, [0]);
    let released = 0;
    while (released < 2) {
      await waitFor(() => held.length > 0, { what: `dispatch ${released + 1} of 2` });
      if (expectedMax === 2 && released === 0) await waitFor(() => held.length === 2, { what: 'both partitions in flight at once' });
      for (const release of held.splice(0)) {
        release();
        released++;
      }
    }
    await waitFor(() => client.committedOffsets('orders', 0).includes('1') && client.committedOffsets('orders', 1).includes('1'), { what: 'both records committed' });
    expect(maxInFlight).toBe(expectedMax);
    await source.close();
  });

  test('graceful stop pauses everything, finishes the in-flight record, commits it, and disconnects', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { kafka, consumer } = await setup(async () => {
      await gate;
      return ack();
    });
    await consumer.start();
    const client = kafka.consumers[0]!;
    client.join({ orders: [0, 1] });
    await client.deliver('orders', 0, [0, 1, 2]);
    await waitFor(() => consumer.health().inFlight === 1, { what: 'one record in flight' });
    const stopping = consumer.stop();
    await waitFor(() => client.pausedSet.has('orders/0') && client.pausedSet.has('orders/1'), { what: 'intake paused' });
    release();
    await stopping;
    expect(client.committedOffsets('orders', 0)).toEqual(['1']);
    expect(client.disconnected).toBe(true);
  });

  test('crash(): nothing more is committed or dead-lettered; the client disconnects', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { kafka, consumer, source } = await setup(async () => {
      await gate;
      throw new PermanentError('poison after the crash');
    });
    await consumer.start();
    const client = kafka.consumers[0]!;
    client.join({ orders: [0] });
    await client.deliver('orders', 0, [0]);
    await waitFor(() => consumer.health().inFlight === 1, { what: 'one record in flight' });
    await source.crash();
    release();
    await waitFor(() => consumer.health().inFlight === 0, { what: 'the in-flight record ended' });
    expect(client.commits).toEqual([]);
    expect(kafka.producers[0]!.sent).toEqual([]);
    expect(client.disconnected).toBe(true);
    expect(source.isConsuming()).toBe(false);
  });
});
