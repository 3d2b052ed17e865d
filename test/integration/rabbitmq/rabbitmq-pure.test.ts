/**
 * Pure parts of the RabbitMQ adapter (no broker needed): option validation, the topology plan,
 * delay tiers, header mapping, and the settler's stale/repeat rules on a fake channel.
 */
import type { ConsumeMessage } from 'amqplib';
import { ConfigurationError } from '../../../src';
import {
  MessageTooLargeError,
  HEADERS,
  buildPublish,
  delayQueueName,
  pickDelayTier,
  planTopology,
  priorAttempts,
  deadLetteredMessage,
  matchPublished,
  type PublishedMessage,
  replayProperties,
  replayRoute,
  resolveSourceOptions,
  StaleDeliveryError,
} from '../../../adapters/rabbitmq';
import { ChannelGeneration } from '../../../adapters/rabbitmq/channel-generation';
import { redact } from '../../../adapters/rabbitmq/connections';
import { deadLetterProperties, requeueProperties } from '../../../adapters/rabbitmq/headers';
import { DeliverySettler, type SettlementContext } from '../../../adapters/rabbitmq/settler';
import { SourceReporter } from '../../../adapters/rabbitmq/reporting';
import type { RabbitMqSourceEvent } from '../../../adapters/rabbitmq';
import { silentLogger } from '../../../src';
import { assertEncodableHeaders, assertPublishable, MAX_HEADER_TABLE_BYTES } from '../../../adapters/rabbitmq/wire-limits';

const url = 'amqp://guest:guest@127.0.0.1:5672';

describe('RabbitMQ source options', () => {
  test('defaults follow the queue name', () => {
    const o = resolveSourceOptions({ url, queue: 'orders' });
    expect(o).toMatchObject({ deadLetterExchange: 'orders.dlx', deadLetterQueue: 'orders.dlq', deadLetterRoutingKey: 'orders', queueType: 'classic', topology: 'declare', onCancel: 'resubscribe' });
  });

  test('a URL that is not amqp:// is named without its password', () => {
    const wrong = () => resolveSourceOptions({ url: 'http://admin:S3cret@h:5672', queue: 'q' });
    expect(wrong).toThrow(/url must be an amqp.*got "http:\/\/admin:\*\*\*@h:5672"/);
    expect(wrong).not.toThrow(/S3cret/);
  });

  test.each([
    [{ url: 'http://x', queue: 'q' }, /url must be an amqp/],
    [{ url, queue: '' }, /queue must be a non-empty string/],
    [{ url, queue: 'amq.q' }, /must not start with "amq\."/],
    [{ url, queue: 'q', delayTiersMs: [5000, 1000] }, /strictly increasing/],
    [{ url, queue: 'q', delayTiersMs: [] }, /1 to 20 tiers/],
    [{ url, queue: 'q', deliveryLimit: 3 }, /quorum queues only/],
    [{ url, queue: 'q', queueArguments: { 'x-dead-letter-exchange': 'x' } }, /must not set "x-dead-letter-exchange"/],
    [{ url, queue: 'q', deadLetterQueue: 'q' }, /must differ from queue/],
    [{ url, queue: 'q', reconnectDelayMs: 0 }, /reconnectDelayMs must be an integer in \[10, 600000\], got 0/],
    [{ url, queue: 'q', onCancel: 'ignore' }, /onCancel must be one of/],
    [{ url, queue: 'q', batchClaims: true, batchWindowMs: -1 }, /batchWindowMs must be an integer in \[0, 1000\], got -1/],
    [{ url, queue: 'q', batchClaims: true, batchWindowMs: 1001 }, /batchWindowMs must be an integer in \[0, 1000\], got 1001/],
    [{ url, queue: 'q', batchClaims: true, batchWindowMs: 1.5 }, /batchWindowMs must be an integer in \[0, 1000\], got 1.5/],
    [{ url, queue: 'q', batchClaims: true, batchWindowMs: '2' }, /batchWindowMs must be an integer/],
    [{ url, queue: 'q', batchWindowMs: 2 }, /batchWindowMs \(2\) applies only with batchClaims: true/],
    [{ url, queue: 'q', batchClaims: false, batchWindowMs: 2 }, /applies only with batchClaims: true/],
    [{ url, queue: 'q', batchClaims: true, batchWindowMS: 2 }, /batchWindowMS/],
  ])('rejects %j', (options, message) => {
    expect(() => resolveSourceOptions(options as never)).toThrow(ConfigurationError);
    expect(() => resolveSourceOptions(options as never)).toThrow(message);
  });

  test('batchWindowMs: default 0 (the event-loop turn); a window needs batchClaims; 0 is accepted alone', () => {
    expect(resolveSourceOptions({ url, queue: 'q' })).toMatchObject({ batchClaims: false, batchWindowMs: 0 });
    expect(resolveSourceOptions({ url, queue: 'q', batchClaims: true, batchWindowMs: 2 })).toMatchObject({ batchClaims: true, batchWindowMs: 2 });
    expect(resolveSourceOptions({ url, queue: 'q', batchClaims: true, batchWindowMs: 1000 }).batchWindowMs).toBe(1000);
    expect(resolveSourceOptions({ url, queue: 'q', batchWindowMs: 0 })).toMatchObject({ batchClaims: false, batchWindowMs: 0 });
  });

  test('does not mutate the caller\'s options', () => {
    const options = { url, queue: 'q', delayTiersMs: [1000], queueArguments: { 'x-max-length': 10 } };
    const o = resolveSourceOptions(options);
    expect(o.delayTiersMs).not.toBe(options.delayTiersMs);
    expect(o.queueArguments).not.toBe(options.queueArguments);
  });
});

describe('topology plan', () => {
  test('work queue dead-letters to the DLX; delay queues expire back into the work queue', () => {
    const plan = planTopology(resolveSourceOptions({ url, queue: 'pay', queueType: 'quorum', deliveryLimit: 5, delayTiersMs: [100, 1000] }));
    expect(plan.workQueue.arguments).toEqual({ 'x-queue-type': 'quorum', 'x-dead-letter-exchange': 'pay.dlx', 'x-dead-letter-routing-key': 'pay', 'x-delivery-limit': 5 });
    expect(plan.delayQueues).toEqual([
      { name: 'pay.delay.100ms', delayMs: 100, arguments: { 'x-queue-type': 'classic', 'x-message-ttl': 100, 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': 'pay' } },
      { name: 'pay.delay.1000ms', delayMs: 1000, arguments: { 'x-queue-type': 'classic', 'x-message-ttl': 1000, 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': 'pay' } },
    ]);
  });

  test('deadLetterViaPolicy leaves the x-dead-letter-* arguments out', () => {
    const plan = planTopology(resolveSourceOptions({ url, queue: 'pay', deadLetterViaPolicy: true }));
    expect(plan.workQueue.arguments).toEqual({ 'x-queue-type': 'classic' });
  });

  test('delay tiers: nearest on a log scale, 0 goes straight back', () => {
    const tiers = [1000, 5000, 15000, 60000];
    expect(pickDelayTier(tiers, 0)).toBeUndefined();
    expect(pickDelayTier(tiers, 1)).toBe(1000);
    expect(pickDelayTier(tiers, 1200)).toBe(1000);
    expect(pickDelayTier(tiers, 2000)).toBe(1000);
    expect(pickDelayTier(tiers, 4000)).toBe(5000);
    expect(pickDelayTier(tiers, 32000)).toBe(60000);
    expect(pickDelayTier(tiers, 10 ** 7)).toBe(60000);
    expect(delayQueueName('q', 500)).toBe('q.delay.500ms');
  });
});

function message(headers: Record<string, unknown> = {}, fields: Partial<ConsumeMessage['fields']> = {}): ConsumeMessage {
  return {
    content: Buffer.from('{}'),
    fields: { deliveryTag: 7, redelivered: false, exchange: 'orders', routingKey: 'order.created', consumerTag: 'c', ...fields },
    properties: { headers, messageId: 'm-1', deliveryMode: 2, contentType: 'application/json', userId: 'guest', expiration: '60000' } as unknown as ConsumeMessage['properties'],
  };
}

describe('header mapping', () => {
  test('attempts: twophase header (only back from a delay queue) plus quorum x-delivery-count', () => {
    const quorum = { queue: 'q', queueType: 'quorum' } as const;
    const classic = { queue: 'q', queueType: 'classic' } as const;
    const delayed = { 'x-death': [{ queue: 'q.delay.1000ms', reason: 'expired', count: 1, exchange: '', 'routing-keys': ['q.delay.1000ms'] }] };
    // How a delay queue hands a message back: dead-lettered through the default exchange, routing key = the work queue.
    const back = { exchange: '', routingKey: 'q' };
    expect(priorAttempts({}, quorum, back)).toBeUndefined();
    expect(priorAttempts({ ...delayed, [HEADERS.attempts]: 2 }, quorum, back)).toBe(2);
    expect(priorAttempts({ 'x-delivery-count': 1 }, quorum, back)).toBe(1);
    expect(priorAttempts({ ...delayed, [HEADERS.attempts]: '2', 'x-delivery-count': 1 }, quorum, back)).toBe(3);
    expect(priorAttempts({ ...delayed, [HEADERS.attempts]: 'junk' }, quorum, back)).toBeUndefined();
    // Set by a producer, not proven by the broker's dead-letter history: not counted.
    expect(priorAttempts({ [HEADERS.attempts]: 4 }, quorum, back)).toBeUndefined();
    expect(priorAttempts({ [HEADERS.attempts]: 4, 'x-death': [{ queue: 'other.delay.1000ms', reason: 'expired' }] }, classic, back)).toBeUndefined();
    expect(priorAttempts({ [HEADERS.attempts]: 4, 'x-death': [{ queue: 'q.delay.1000ms', reason: 'rejected' }] }, classic, back)).toBeUndefined();
    expect(priorAttempts({ [HEADERS.attempts]: 4, 'x-death': [{ queue: 'q', reason: 'expired' }] }, classic, back)).toBeUndefined();
    // A delay-queue x-death on a message published to the work exchange: written by its producer (RabbitMQ 3.x delivers it as sent).
    expect(priorAttempts({ ...delayed, [HEADERS.attempts]: 2 }, classic, { exchange: 'orders', routingKey: 'order.created' })).toBeUndefined();
    expect(priorAttempts({ ...delayed, [HEADERS.attempts]: 2 }, classic)).toBeUndefined();
    // Only the newest x-death entry counts.
    expect(priorAttempts({ 'x-death': [{ queue: 'q', reason: 'rejected' }, ...delayed['x-death']], [HEADERS.attempts]: 2 }, classic, back)).toBeUndefined();
    // An absurd count (more than any maxAttempts) is treated as absent.
    expect(priorAttempts({ ...delayed, [HEADERS.attempts]: 1e300 }, classic, back)).toBeUndefined();
    expect(priorAttempts({ ...delayed, [HEADERS.attempts]: 1001 }, classic, back)).toBeUndefined();
    expect(priorAttempts({ ...delayed, [HEADERS.attempts]: 1000 }, classic, back)).toBe(1000);
    // x-delivery-count is the broker's only on quorum queues.
    expect(priorAttempts({ 'x-delivery-count': 9 }, classic)).toBeUndefined();
  });

  test('requeue copy: keeps the first route, drops expiration/userId and the broker delivery count', () => {
    const first = requeueProperties(message({ 'x-delivery-count': 2 }), 1, 'retry', 'orders-queue');
    expect(first.headers).toEqual({ [HEADERS.originalExchange]: 'orders', [HEADERS.originalRoutingKey]: 'order.created', [HEADERS.attempts]: 1, [HEADERS.requeueCause]: 'retry' });
    expect(first).toMatchObject({ messageId: 'm-1', persistent: true, contentType: 'application/json' });
    expect(first).not.toHaveProperty('expiration');
    expect(first).not.toHaveProperty('userId');
    // Back from the delay queue (the broker's x-death says so): the recorded route is kept.
    const back = { ...first.headers, 'x-death': [{ queue: 'orders-queue.delay.1000ms', reason: 'expired', count: 1 }] };
    const second = requeueProperties(message(back, { exchange: '', routingKey: 'orders-queue' }), 1, 'busy', 'orders-queue');
    expect(second.headers).toMatchObject({ [HEADERS.originalExchange]: 'orders', [HEADERS.originalRoutingKey]: 'order.created', [HEADERS.requeueCause]: 'busy' });
  });

  test('a route a producer wrote on a fresh message is not recorded on its copies (the replay tool would send it there)', () => {
    const forged = { [HEADERS.originalExchange]: 'payments-admin', [HEADERS.originalRoutingKey]: 'refund.all' };
    const requeued = requeueProperties(message(forged), 1, 'retry', 'orders-queue');
    expect(requeued.headers).toMatchObject({ [HEADERS.originalExchange]: 'orders', [HEADERS.originalRoutingKey]: 'order.created' });
    const dead = deadLetterProperties(message(forged), { reason: 'permanent_error', attempts: 1 }, 'orders-queue', 1);
    expect(dead.headers).toMatchObject({ [HEADERS.originalExchange]: 'orders', [HEADERS.originalRoutingKey]: 'order.created' });
  });

  test('dead-letter copy carries reason, attempts, route, queue, error; replay strips them and counts replays', () => {
    const dead = deadLetterProperties(message({ [HEADERS.publishId]: 'x' }), { reason: 'retry_exhausted', attempts: 3, errorMessage: 'boom', errorType: 'Error' }, 'orders-queue', 1234);
    expect(dead.headers).toEqual({
      [HEADERS.reason]: 'retry_exhausted',
      [HEADERS.attempts]: 3,
      [HEADERS.originalExchange]: 'orders',
      [HEADERS.originalRoutingKey]: 'order.created',
      [HEADERS.originalQueue]: 'orders-queue',
      [HEADERS.rejectedAt]: 1234,
      [HEADERS.errorMessage]: 'boom',
      [HEADERS.errorType]: 'Error',
    });
    const dlqMessage = message({ ...dead.headers, 'x-death': [{ queue: 'x' }], [HEADERS.replayId]: 'left-by-an-earlier-version:1' }, { exchange: 'orders.dlx', routingKey: 'orders-queue' });
    expect(replayRoute(dlqMessage)).toEqual({ exchange: 'orders', routingKey: 'order.created' });
    const replay = replayProperties(dlqMessage, 99);
    expect(replay.headers).toEqual({ [HEADERS.originalExchange]: 'orders', [HEADERS.originalRoutingKey]: 'order.created', [HEADERS.replayCount]: 1, [HEADERS.replayedAt]: 99 });
  });

  test('replay route falls back to the newest x-death entry', () => {
    const m = message({ 'x-death': [{ exchange: 'ex', 'routing-keys': ['rk'], queue: 'q', reason: 'delivery_limit' }] });
    expect(replayRoute(m)).toEqual({ exchange: 'ex', routingKey: 'rk' });
    expect(replayRoute(message())).toBeUndefined();
  });

  test('publisher helper: message id defaults to the key, JSON bodies get a content type', () => {
    const { content, properties, receipt } = buildPublish({ a: 1 }, { idempotencyKey: 'k' });
    expect(content.toString()).toBe('{"a":1}');
    expect(properties).toMatchObject({ messageId: 'k', persistent: true, contentType: 'application/json', headers: { 'idempotency-key': 'k' } });
    expect(receipt).toEqual({ messageId: 'k', idempotencyKey: 'k' });
    expect(() => buildPublish({}, { messageId: '' })).toThrow(ConfigurationError);
  });

  test('a body JSON cannot encode (a BigInt, a cycle) is a ConfigurationError naming the cause, not a raw TypeError', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    for (const body of [{ n: 1n }, cyclic]) {
      expect(() => buildPublish(body as never, { idempotencyKey: 'k' })).toThrow(ConfigurationError);
      expect(() => buildPublish(body as never, { idempotencyKey: 'k' })).toThrow(/body must be a Buffer, a string or a JSON-serialisable value: .*(BigInt|circular)/i);
    }
  });

  test('a misspelled publish option is refused by name (a lost idempotencyKey would give each retry a new random key)', () => {
    // Held in a variable, the object escapes TypeScript's excess-property check, as in user code.
    const options = { persistent: true, idempotencykey: 'payment-42' };
    expect(() => buildPublish({}, options)).toThrow(ConfigurationError);
    expect(() => buildPublish({}, options)).toThrow(/idempotencykey.*idempotencyKey/s);
  });
});

describe('DeliverySettler (fake channel)', () => {
  function setup() {
    const wire: string[] = [];
    const events: string[] = [];
    const channel = {
      ack: (m: ConsumeMessage, allUpTo: boolean) => wire.push(`ack:${m.fields.deliveryTag}:${allUpTo}`),
      nack: (m: ConsumeMessage, allUpTo: boolean, requeue: boolean) => wire.push(`nack:${m.fields.deliveryTag}:${allUpTo}:${requeue}`),
    };
    const generation = new ChannelGeneration(1, channel as never);
    const published: { exchange: string; routingKey: string }[] = [];
    let failPublish: false | Error = false;
    let failPublishTimes = Number.POSITIVE_INFINITY;
    const publishedHeaders: Record<string, unknown>[] = [];
    const context: SettlementContext = {
      queue: 'q',
      queueType: 'classic',
      deadLetterExchange: 'q.dlx',
      deadLetterRoutingKey: 'q',
      delayTiersMs: [100, 1000],
      failedPublishRequeueDelayMs: 0,
      publish: async (exchange, routingKey, _content, options) => {
        if (failPublish && failPublishTimes-- > 0) throw failPublish;
        published.push({ exchange, routingKey });
        publishedHeaders.push(options.headers ?? {});
      },
      pause: async () => undefined,
      now: () => 1,
      onSettled: (action, cause) => events.push(`settled:${action}${cause ? `:${cause}` : ''}`),
      onStale: (e) => events.push(`stale:${e.action}`),
      onRepeated: (action, first) => events.push(`repeated:${action}:${first}`),
      onPublishFailed: (action) => events.push(`publish_failed:${action}`),
      onFallbackNack: () => events.push('fallback_nack'),
      onStripped: () => events.push('stripped'),
    };
    return {
      wire,
      events,
      generation,
      published,
      publishedHeaders,
      context,
      setFailPublish: (v: boolean | Error, times = Number.POSITIVE_INFINITY) => {
        failPublish = v === true ? new Error('nacked') : v;
        failPublishTimes = times;
      },
    };
  }

  test('ack once, never allUpTo; repeats ignored', async () => {
    const s = setup();
    s.generation.begin();
    const settler = new DeliverySettler(s.context, s.generation, message());
    await settler.ack({ duplicate: false });
    await settler.ack({ duplicate: false });
    await settler.reject({ reason: 'x', attempts: 1 });
    expect(s.wire).toEqual(['ack:7:false']);
    expect(s.events).toEqual(['settled:ack', 'repeated:ack:ack', 'repeated:reject:ack']);
    expect(s.generation.inFlight).toBe(0);
  });

  test('requeue publishes to the nearest delay queue, then acks; retry raises attempts, busy does not', async () => {
    const s = setup();
    s.generation.begin();
    await new DeliverySettler(s.context, s.generation, message({ [HEADERS.attempts]: 1 })).requeue(900, { cause: 'busy' });
    s.generation.begin();
    await new DeliverySettler(s.context, s.generation, message()).requeue(0, { cause: 'shutdown' });
    expect(s.published).toEqual([
      { exchange: '', routingKey: 'q.delay.1000ms' },
      { exchange: '', routingKey: 'q' },
    ]);
    expect(s.wire).toEqual(['ack:7:false', 'ack:7:false']);
  });

  test('a 0 ms requeue that carries attempts goes through the shortest delay queue, so its count comes back proven', async () => {
    const s = setup();
    s.generation.begin();
    await new DeliverySettler(s.context, s.generation, message()).requeue(0, { cause: 'retry', attempt: 1 });
    expect(s.published).toEqual([{ exchange: '', routingKey: 'q.delay.100ms' }]);
    expect(s.publishedHeaders[0]).toMatchObject({ [HEADERS.attempts]: 1 });
  });

  test('a settle after the channel closed is skipped with StaleDeliveryError, nothing is published', async () => {
    const s = setup();
    s.generation.begin();
    s.generation.open = false;
    const settler = new DeliverySettler(s.context, s.generation, message());
    await expect(settler.requeue(100, { cause: 'retry', attempt: 1 })).rejects.toBeInstanceOf(StaleDeliveryError);
    expect(s.published).toEqual([]);
    expect(s.wire).toEqual([]);
    expect(s.events).toEqual(['stale:requeue']);
    expect(s.generation.inFlight).toBe(0);
  });

  test('a failed dead-letter publish returns the original with nack(requeue=true) and fails the settle', async () => {
    const s = setup();
    s.generation.begin();
    s.setFailPublish(true);
    await expect(new DeliverySettler(s.context, s.generation, message()).reject({ reason: 'r', attempts: 1 })).rejects.toThrow('nacked');
    expect(s.wire).toEqual(['nack:7:false:true']);
    expect(s.events).toEqual(['publish_failed:reject', 'fallback_nack']);
  });

  test('a dead-letter copy that cannot be encoded is sent again with the dead-letter headers only, then the original is acked', async () => {
    const s = setup();
    s.generation.begin();
    s.setFailPublish(new MessageTooLargeError('too large'), 1);
    const big = message({ 'idempotency-key': 'k'.repeat(2000), blob: 'b', [HEADERS.originalExchange]: 'x'.repeat(300), [HEADERS.originalRoutingKey]: 'rk' });
    await new DeliverySettler(s.context, s.generation, big).reject({ reason: 'invalid_key', attempts: 0, errorMessage: 'key too long' });
    expect(s.wire).toEqual(['ack:7:false']);
    expect(s.events).toEqual(['stripped', 'settled:reject']);
    expect(s.published).toEqual([{ exchange: 'q.dlx', routingKey: 'q' }]);
    const headers = s.publishedHeaders[0]!;
    expect(headers).toMatchObject({ [HEADERS.reason]: 'invalid_key', [HEADERS.errorMessage]: 'key too long', [HEADERS.originalQueue]: 'q' });
    expect(headers['idempotency-key']).toBeUndefined(); // over 1024 bytes
    expect(String(headers['twophase-headers-dropped']).split(',')).toEqual(expect.arrayContaining(['idempotency-key', 'blob']));
    // A recorded route longer than AMQP allows is not trusted: the delivery's own route is used.
    expect(headers[HEADERS.originalExchange]).toBe(big.fields.exchange);
  });

  test('when the stripped copy fails too, the usual fallback runs: nack(requeue=true) after the pause', async () => {
    const s = setup();
    s.generation.begin();
    s.setFailPublish(new MessageTooLargeError('too large'), 2);
    await expect(new DeliverySettler(s.context, s.generation, message()).reject({ reason: 'r', attempts: 1 })).rejects.toBeInstanceOf(MessageTooLargeError);
    expect(s.wire).toEqual(['nack:7:false:true']);
  });

  test('a delay copy too large to encode takes the usual fallback: nack(requeue=true) after the pause', async () => {
    const s = setup();
    s.generation.begin();
    s.setFailPublish(new MessageTooLargeError('too large'));
    await expect(new DeliverySettler(s.context, s.generation, message()).requeue(100, { cause: 'retry', attempt: 1 })).rejects.toBeInstanceOf(MessageTooLargeError);
    expect(s.wire).toEqual(['nack:7:false:true']);
  });
});

describe('assertEncodableHeaders (amqplib codec)', () => {
  test('returns the encoded size of a table amqplib can send', () => {
    expect(assertEncodableHeaders({ a: 'bc' }, 'p')).toBe(4 + 1 + 1 + 1 + 4 + 2);
    expect(assertEncodableHeaders(undefined, 'p')).toBe(0);
  });

  test('a table over 65 536 bytes is MessageTooLargeError, also as many small headers; what amqplib cannot encode at any size is ConfigurationError', () => {
    expect(() => assertEncodableHeaders({ big: 'x'.repeat(MAX_HEADER_TABLE_BYTES) }, 'publish to "q"')).toThrow(MessageTooLargeError);
    expect(() => assertEncodableHeaders({ big: 'x'.repeat(MAX_HEADER_TABLE_BYTES) }, 'publish to "q"')).toThrow(/publish to "q" was not sent: its headers encode to 65549 bytes, more than amqplib's 65536-byte limit/);
    const many = Object.fromEntries(Array.from({ length: 8000 }, (_, i) => [`h${i}`, i]));
    expect(() => assertEncodableHeaders(many, 'p')).toThrow(MessageTooLargeError);
    expect(() => assertEncodableHeaders({ f: () => 1 }, 'p')).toThrow(ConfigurationError);
    expect(() => assertEncodableHeaders({ ['k'.repeat(300)]: 1 }, 'p')).toThrow(ConfigurationError); // a name over 255 bytes: not a size problem
    expect(() => assertEncodableHeaders({ n: { '!': 'uint32', value: -1 } }, 'p')).toThrow(ConfigurationError);
    expect(assertEncodableHeaders({ big: 'x'.repeat(MAX_HEADER_TABLE_BYTES - 100) }, 'p')).toBeLessThanOrEqual(MAX_HEADER_TABLE_BYTES);
  });

  test('assertPublishable runs amqplib\'s own encoders: short strings over 255 bytes and out-of-range properties are ConfigurationError', () => {
    expect(() => assertPublishable('', 'q', 10, { messageId: 'm'.repeat(300) }, 'p')).toThrow(ConfigurationError);
    expect(() => assertPublishable('', 'r'.repeat(300), 10, {}, 'p')).toThrow(ConfigurationError);
    expect(() => assertPublishable('', 'q', 10, { priority: 300 }, 'p')).toThrow(ConfigurationError);
    expect(() => assertPublishable('', 'q', 10, { headers: { big: 'x'.repeat(70_000) } }, 'p')).toThrow(MessageTooLargeError);
    expect(() => assertPublishable('ex', 'q', 10, { messageId: 'm'.repeat(255), headers: { a: 1 }, expiration: 1000, persistent: true }, 'p')).not.toThrow();
  });
});

describe('matching a copy the broker hands back to its publish (no correlation header)', () => {
  const sent = (n: number, headers: Record<string, unknown>, over: Partial<PublishedMessage> = {}) => ({ n, exchange: 'ex', routingKey: 'rk', content: Buffer.from('body'), messageId: 'm', headers, ...over });

  test('the oldest waiting publish with the same exchange, routing key, message id and body; equal headers break ties; eligibility filters', () => {
    const waiting = [sent(1, { a: 1 }, { routingKey: 'other' }), sent(2, { a: 2 }), sent(3, { a: 3 }), sent(4, { a: 3 }, { content: Buffer.from('else') })];
    const seen = { exchange: 'ex', routingKey: 'rk', content: Buffer.from('body'), messageId: 'm', headers: { a: 3 } };
    expect(matchPublished(waiting, seen)?.n).toBe(3);
    expect(matchPublished(waiting, { ...seen, headers: { a: 9 } })?.n).toBe(2);
    expect(matchPublished(waiting, seen, (p) => p.n !== 3)?.n).toBe(2);
    expect(matchPublished(waiting, { ...seen, messageId: undefined })).toBeUndefined();
  });

  test('a dead-lettered copy is read as its publish: route from the newest x-death entry, headers without the broker\'s death headers', () => {
    const copy = {
      content: Buffer.from('body'),
      properties: {
        messageId: 'm',
        headers: {
          a: 1,
          'x-death': [
            { count: 1, reason: 'maxlen' as const, queue: 'work', time: { '!': 'timestamp' as const, value: 2 }, exchange: '', 'routing-keys': ['work'] },
            { count: 1, reason: 'rejected' as const, queue: 'q', time: { '!': 'timestamp' as const, value: 1 }, exchange: 'old', 'routing-keys': ['old'] },
          ],
          'x-first-death-exchange': 'old',
          'x-first-death-queue': 'q',
          'x-first-death-reason': 'rejected',
          'x-last-death-exchange': '',
          'x-last-death-queue': 'work',
          'x-last-death-reason': 'maxlen',
        },
      },
    };
    expect(deadLetteredMessage(copy)).toEqual({ exchange: '', routingKey: 'work', content: Buffer.from('body'), messageId: 'm', headers: { a: 1 } });
    expect(deadLetteredMessage({ content: Buffer.from('body'), properties: { headers: { a: 1 } } })).toBeUndefined();
  });
});

describe('RabbitMQ source events', () => {
  test('on(listener) gets every event as { type, ...payload }; the named form gets its own only; off and the remover remove', () => {
    const reporter = new SourceReporter('q', silentLogger, () => false);
    const all: RabbitMqSourceEvent[] = [];
    const named: unknown[] = [];
    const remove = reporter.on((e) => void all.push(e));
    const listener = (p: { readonly generation: number }) => void named.push(p);
    reporter.onNamed('channel_opened', listener);
    reporter.emit('channel_opened', { generation: 1 });
    reporter.emit('unblocked', {});
    expect(all).toEqual([{ type: 'channel_opened', generation: 1 }, { type: 'unblocked' }]);
    expect(named).toEqual([{ type: 'channel_opened', generation: 1 }]);
    reporter.offNamed('channel_opened', listener);
    remove();
    reporter.emit('channel_opened', { generation: 2 });
    expect(all).toHaveLength(2);
    expect(named).toHaveLength(1);
  });
});

describe('redact', () => {
  test('hides the password with a user, with an empty user, and with an unescaped @ in it; a URL without one is unchanged', () => {
    expect(redact('amqp://guest:guest@host:5672/vh')).toBe('amqp://guest:***@host:5672/vh');
    expect(redact('amqp://:s3cret@host')).toBe('amqp://:***@host');
    expect(redact('amqps://u:p@ss@host/v')).toBe('amqps://u:***@host/v');
    expect(redact('amqp://host:5672')).toBe('amqp://host:5672');
    expect(redact({ url: 'amqp://:pw@h' })).toBe('amqp://:***@h');
  });
});
