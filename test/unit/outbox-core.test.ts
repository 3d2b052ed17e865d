/**
 * The outbox core without a store: the id scheme (a known vector, recomputed here from its
 * definition), message validation, and the relay's option checks.
 */
import type { Pool } from 'pg';
import { PostgresOutboxStore } from '../../adapters/postgres';
import { createHash } from 'node:crypto';
import { ConfigurationError, InMemoryClaimer, InvalidOutboxMessageError, OutboxRelay, outboxMessageId, runOnce, toOutboxEnvelope, type OutboxPublisher, type OutboxStore } from '../../src';

describe('outboxMessageId', () => {
  test('is the first 16 bytes of SHA-256("twophase-outbox-v1\\n" + scope + "\\n" + position) as a UUIDv8', () => {
    const id = outboxMessageId('orders:order-1', 0);
    const digest = createHash('sha256').update('twophase-outbox-v1\norders:order-1\n0').digest();
    const hex = digest.subarray(0, 16).toString('hex');
    expect(id.replace(/-/g, '').slice(0, 12)).toBe(hex.slice(0, 12));
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(id.replace(/-/g, '').slice(13, 16)).toBe(hex.slice(13, 16));
    expect(id.replace(/-/g, '').slice(17)).toBe(hex.slice(17));
  });

  test('the same scope and position give the same id; another scope or position another id', () => {
    expect(outboxMessageId('s', 1)).toBe(outboxMessageId('s', 1));
    expect(new Set([outboxMessageId('s', 0), outboxMessageId('s', 1), outboxMessageId('t', 0), outboxMessageId('s\n0', 0)]).size).toBe(4);
  });

  test('refuses an empty scope or a negative position', () => {
    expect(() => outboxMessageId('', 0)).toThrow(InvalidOutboxMessageError);
    expect(() => outboxMessageId('s', -1)).toThrow(InvalidOutboxMessageError);
  });
});

describe('toOutboxEnvelope', () => {
  const id = outboxMessageId('s', 0);

  test('RabbitMQ: bytes kept, JSON bodies get application/json, no ordering key by default', () => {
    const bytes = toOutboxEnvelope(id, { to: { exchange: 'x', routingKey: 'r' }, body: Buffer.from([1, 2]) });
    expect(bytes).toMatchObject({ system: 'rabbitmq', orderingKey: null, properties: {} });
    expect(bytes.body).toEqual(Buffer.from([1, 2]));
    const json = toOutboxEnvelope(id, { to: { exchange: 'x', routingKey: 'r' }, body: { a: 1 } });
    expect(json.body.toString()).toBe('{"a":1}');
    expect(json.properties).toEqual({ contentType: 'application/json' });
  });

  test('Kafka: the record key is the default ordering key; properties are refused', () => {
    expect(toOutboxEnvelope(id, { to: { topic: 't', key: 'k' }, body: 'v' })).toMatchObject({ system: 'kafka', orderingKey: 'k', destination: { topic: 't', key: 'k' } });
    expect(toOutboxEnvelope(id, { to: { topic: 't', key: 'k' }, body: 'v', orderingKey: null }).orderingKey).toBeNull();
    expect(() => toOutboxEnvelope(id, { to: { topic: 't' }, body: 'v', properties: { type: 'x' } })).toThrow(/Kafka message carries headers only/);
  });

  test.each([
    ['an unknown field', { to: { exchange: 'x', routingKey: 'r' }, body: 'b', header: {} }, /unknown field "header"/],
    ['no destination', { body: 'b' }, /"to" must be/],
    ['a destination of neither broker', { to: { queue: 'q' }, body: 'b' }, /"exchange" and "routingKey".*"topic"/],
    ['a header that is not a string', { to: { exchange: 'x', routingKey: 'r' }, body: 'b', headers: { n: 1 } }, /header "n" must be a string/],
    ['the reserved idempotency-key header', { to: { exchange: 'x', routingKey: 'r' }, body: 'b', headers: { 'Idempotency-Key': 'k' } }, /reserved/],
    ['an undefined body', { to: { exchange: 'x', routingKey: 'r' }, body: undefined }, /body must be/],
    ['a priority out of range', { to: { exchange: 'x', routingKey: 'r' }, body: 'b', properties: { priority: 300 } }, /priority/],
    ['a body holding a bigint', { to: { exchange: 'x', routingKey: 'r' }, body: { amount: 10n } }, /cannot be serialised as JSON.*BigInt/],
    ['a body with a circular reference', { to: { exchange: 'x', routingKey: 'r' }, body: (() => { const o: Record<string, unknown> = {}; o.self = o; return o; })() }, /cannot be serialised as JSON.*circular/],
    ['a top-level NaN body', { to: { exchange: 'x', routingKey: 'r' }, body: Number.NaN }, /holds NaN at body,.*sent as null/],
    ['a NaN inside an object', { to: { exchange: 'x', routingKey: 'r' }, body: { order: { amount: Number.NaN } } }, /holds NaN at body\.order\.amount,/],
    ['an Infinity inside an array', { to: { topic: 't' }, body: { items: [1, 2, Infinity] } }, /holds Infinity at body\.items\[2\],/],
    ['a -Infinity under a key that is not an identifier', { to: { exchange: 'x', routingKey: 'r' }, body: [{ 'unit price': -Infinity }] }, /holds -Infinity at body\[0\]\["unit price"\],/],
    ['a NaN Number object', { to: { exchange: 'x', routingKey: 'r' }, body: { n: new Number(Number.NaN) } }, /holds NaN at body\.n,/],
    ['a NaN returned by toJSON', { to: { exchange: 'x', routingKey: 'r' }, body: { when: { toJSON: () => Number.NaN } } }, /holds NaN at body\.when,/],
    ['a toJSON that returns nothing', { to: { exchange: 'x', routingKey: 'r' }, body: { toJSON: () => undefined } }, /toJSON\(\) returned nothing/],
  ])('refuses %s (InvalidOutboxMessageError naming the field)', (_name, message, pattern) => {
    expect(() => toOutboxEnvelope(id, message as never)).toThrow(InvalidOutboxMessageError);
    expect(() => toOutboxEnvelope(id, message as never)).toThrow(pattern);
  });
});

describe('toOutboxEnvelope: JSON bodies', () => {
  const id = outboxMessageId('s', 0);
  test('a body of finite numbers, nulls and the text "null" is kept as JSON writes it', () => {
    const body = { a: null, b: [null, 0, -1.5, 1e300], c: 'null', d: new Date(0), shared: [1] };
    const envelope = toOutboxEnvelope(id, { to: { exchange: 'x', routingKey: 'r' }, body: { ...body, again: body.shared } });
    expect(envelope.body.toString()).toBe('{"a":null,"b":[null,0,-1.5,1e+300],"c":"null","d":"1970-01-01T00:00:00.000Z","shared":[1],"again":[1]}');
  });

  test('the path of a value under an object met twice (not a cycle) is its latest place', () => {
    const shared = { x: Number.NaN };
    expect(() => toOutboxEnvelope(id, { to: { exchange: 'x', routingKey: 'r' }, body: { first: [0], second: shared } })).toThrow(/at body\.second\.x,/);
    expect(() => toOutboxEnvelope(id, { to: { exchange: 'x', routingKey: 'r' }, body: { list: [shared, shared] } })).toThrow(/at body\.list\[0\]\.x,/);
  });
});

describe('OutboxRelay construction', () => {
  const store = { claim: async () => ({ lease: { owner: '', fencingToken: 0 }, records: [] }) } as unknown as OutboxStore;
  const publisher: OutboxPublisher = { system: 'rabbitmq', publish: async () => undefined };

  test('a misspelled option, an out-of-range value or extendIntervalMs ≥ leaseMs is a ConfigurationError naming it', () => {
    expect(() => new OutboxRelay({ store, publisher }, { batchsize: 10 } as never)).toThrow(/batchsize/);
    expect(() => new OutboxRelay({ store, publisher }, { leaseMs: 10 })).toThrow(/leaseMs/);
    expect(() => new OutboxRelay({ store, publisher }, { leaseMs: 1000, extendIntervalMs: 1000 })).toThrow(/extendIntervalMs/);
    expect(() => new OutboxRelay({ store, publisher }, { deadKeyPolicy: 'skip' as never })).toThrow(/deadKeyPolicy/);
    expect(() => new OutboxRelay({ store, publisher: [publisher, publisher] })).toThrow(ConfigurationError);
    expect(() => new OutboxRelay({ store, publisher, notifer: {} } as never)).toThrow(/notifer/);
  });

  test('an option passed among the dependencies is an error pointing to the second argument', () => {
    expect(() => new OutboxRelay({ store, publisher, batchSize: 10 } as never)).toThrow(/"batchSize" is an option, not a dependency: pass options as the second argument/);
  });

  test('retryBackoff may set only some fields; the others come from the defaults', () => {
    const relay = new OutboxRelay({ store, publisher }, { retryBackoff: { initialDelayMs: 200, maxDelayMs: 400 } });
    expect(relay.options.retryBackoff).toEqual({ initialDelayMs: 200, maxDelayMs: 400, multiplier: 2, jitter: 0.2 });
    expect(new OutboxRelay({ store, publisher }, { retryBackoff: { jitter: 0 } }).options.retryBackoff).toEqual({ initialDelayMs: 1000, maxDelayMs: 60_000, multiplier: 2, jitter: 0 });
    expect(new OutboxRelay({ store, publisher }, { retryBackoff: {} }).options.retryBackoff).toEqual({ initialDelayMs: 1000, maxDelayMs: 60_000, multiplier: 2, jitter: 0.2 });
  });

  test('retryBackoff: an unknown field or a value out of range is still a ConfigurationError naming it', () => {
    expect(() => new OutboxRelay({ store, publisher }, { retryBackoff: { initialDelay: 5 } } as never)).toThrow(/retryBackoff: unknown option "initialDelay" \(did you mean "initialDelayMs"\?\)/);
    expect(() => new OutboxRelay({ store, publisher }, { retryBackoff: { multiplier: 0.5 } })).toThrow(/retryBackoff\.multiplier/);
    expect(() => new OutboxRelay({ store, publisher }, { retryBackoff: { initialDelayMs: 5000, maxDelayMs: 400 } })).toThrow(/retryBackoff\.maxDelayMs/);
    expect(() => new OutboxRelay({ store, publisher }, { retryBackoff: 1000 } as never)).toThrow(ConfigurationError);
  });

  test('defaults: extendIntervalMs is a third of leaseMs', () => {
    expect(new OutboxRelay({ store, publisher }, { leaseMs: 9000 }).options.extendIntervalMs).toBe(3000);
  });
});

describe('stagedIds', () => {
  test('a runOnce function can return ctx.outbox.stagedIds in its JSON result as the docs say (it type-checks and is a copy)', async () => {
    const claimer = new InMemoryClaimer();
    const outcome = await runOnce({ claimer, scope: { operation: 'job', actor: 'tests' }, key: 'k-1', leaseTtlMs: 1000, doneTtlMs: 60_000 }, async ({ outbox }) => {
      const ids = outbox.stagedIds;
      ids.push('not staged');
      return { ids: outbox.stagedIds };
    });
    expect(outcome).toMatchObject({ status: 'ran', result: { ids: [] } });
  });
});

describe('PostgresOutboxStore construction', () => {
  test('a store option placed among the dependencies points to the second argument', () => {
    const pool = { query: async () => ({ rows: [] }) } as unknown as Pool;
    expect(() => new PostgresOutboxStore({ pool, schema: 'app' } as never)).toThrow(/unknown option "schema" \(an option, which goes in the second argument: new PostgresOutboxStore\(\{ pool \}, \{ … \}\)\)/);
    expect(() => new PostgresOutboxStore({ pool }, { schema: 'app' })).not.toThrow();
  });
});
