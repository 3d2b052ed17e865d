/**
 * Issue #12 item 5: every public constructor refuses unknown option names with a
 * ConfigurationError naming the field and the closest known name, nested objects included, and
 * `deployment.replicas` is checked at construction. Options are passed through `as never`, as a
 * JavaScript caller (or a non-literal object in TypeScript) would.
 */
import { Kafka } from 'kafkajs';
import Redis from 'ioredis';
import { runCli } from '../../adapters/cli';
import { RabbitMqReplayBackend, replayDeadLetters } from '../../adapters/cli';
import { KafkaSource, KeyedProducer } from '../../adapters/kafka';
import { MemoryBroker, MemorySource } from '../../adapters/memory';
import { createOtelObserver } from '../../adapters/otel';
import { RabbitMqPublisher, RabbitMqSource } from '../../adapters/rabbitmq';
import { Pool } from 'pg';
import { PostgresClaimer } from '../../adapters/postgres';
import { RedisClaimer } from '../../adapters/redis';
import { ConfigurationError, InMemoryClaimer, runConsumers, TtlPolicy } from '../../src';
import { checkKnownOptions, closestName } from '../../src/adapter-kit';
import { FnConsumer, fastOptions } from './helpers';

const handler = async () => ({ type: 'ack' }) as never;

function refused(build: () => unknown, field: string, closest?: string): void {
  let error: unknown;
  try {
    build();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(ConfigurationError);
  const message = (error as Error).message;
  expect(message).toContain(`"${field}"`);
  if (closest !== undefined) expect(message).toContain(`did you mean "${closest}"?`);
}

describe('checkKnownOptions', () => {
  it('names the unknown field and the closest known name', () => {
    expect(() => checkKnownOptions('x options', { concurency: 3 }, ['concurrency', 'maxAttempts'])).toThrow(
      'x options: unknown option "concurency" (did you mean "concurrency"?); known options: concurrency, maxAttempts',
    );
  });

  it('finds the closest name across case, swaps and prefixes', () => {
    expect(closestName('leaseTTLMs', ['leaseTtlMs', 'doneTtlMs'])).toBe('leaseTtlMs');
    expect(closestName('replica', ['replicas'])).toBe('replicas');
    expect(closestName('prefetch', ['prefetchCount', 'queue'])).toBe('prefetchCount');
    expect(closestName('maxAttemtps', ['maxAttempts', 'claimRetries'])).toBe('maxAttempts');
    expect(closestName('zzzzzzzz', ['queue', 'url'])).toBeUndefined();
  });

  it('accepts undefined options and refuses a non-object', () => {
    expect(() => checkKnownOptions('x', undefined, ['a'])).not.toThrow();
    expect(() => checkKnownOptions('x', 'a', ['a'])).toThrow("x must be an object, got 'a' (a string)");
  });
  it('refuses an instance passed where the options object belongs, naming its class (not its private fields)', () => {
    expect(() => new (MemorySource as unknown as new (...args: unknown[]) => unknown)(new MemoryBroker(), 'q')).toThrow(
      'MemorySource options must be a plain options object, got an instance of MemoryBroker; known options: broker, queue',
    );
    expect(() => checkKnownOptions('x', Object.assign(Object.create(null) as object, { a: 1 }), ['a'])).not.toThrow();
  });
});

describe('ConsumerBase options', () => {
  const claimer = new InMemoryClaimer();
  it('refuses a misspelled top-level option', () => {
    refused(() => new FnConsumer({ ...fastOptions(claimer), concurency: 5 } as never, handler), 'concurency', 'concurrency');
    refused(() => new FnConsumer({ ...fastOptions(claimer), leaseTTLMs: 5000 } as never, handler), 'leaseTTLMs', 'leaseTtlMs');
  });

  it('refuses unknown names in retryBackoff and claimBackoff', () => {
    refused(() => new FnConsumer({ ...fastOptions(claimer), retryBackoff: { initialDelay: 5 } } as never, handler), 'initialDelay', 'initialDelayMs');
    refused(() => new FnConsumer({ ...fastOptions(claimer), claimBackoff: { jiter: 0 } } as never, handler), 'jiter', 'jitter');
  });

  it('refuses deployment: { replica: 3 }, which would turn the replicas check off', () => {
    refused(() => new FnConsumer({ ...fastOptions(claimer), deployment: { replica: 3 } } as never, handler), 'replica', 'replicas');
  });

  it.each([
    ['3', "'3' (a string)"],
    [0, '0 (a number)'],
    [1.5, '1.5 (a number)'],
    [null, 'null'],
  ])('checks deployment.replicas = %p at construction, printing its JavaScript type', (replicas, printed) => {
    expect(() => new FnConsumer({ ...fastOptions(claimer), deployment: { replicas } } as never, handler)).toThrow(
      `deployment.replicas must be an integer ≥ 1, got ${printed}`,
    );
  });

  it('refuses unknown names in ttlPolicy, typeTtls and a type\'s TTLs, and the misspelt option names themselves', () => {
    refused(() => new TtlPolicy({ maxDoneTtl: 1 } as never), 'maxDoneTtl', 'maxDoneTtlMs');
    refused(() => new FnConsumer({ ...fastOptions(claimer), ttlPolcy: new TtlPolicy() } as never, handler), 'ttlPolcy', 'ttlPolicy');
    refused(() => new FnConsumer({ ...fastOptions(claimer), typeTtls: { typeOf: () => undefined, type: {} } } as never, handler), 'type', 'types');
    refused(() => new FnConsumer({ ...fastOptions(claimer), typeTtls: { typeOf: () => undefined, types: { a: { doneTtl: 1 } } } } as never, handler), 'doneTtl', 'doneTtlMs');
  });

  it('accepts every documented option', () => {
    expect(() => new FnConsumer({ ...fastOptions(claimer), deployment: { replicas: 1 }, keepAlive: true, failOpen: false }, handler)).not.toThrow();
  });
});

describe('adapter constructors', () => {
  it('InMemoryClaimer', () => {
    refused(() => new InMemoryClaimer({ maxResultByte: 10 } as never), 'maxResultByte', 'maxResultBytes');
  });

  it('RedisClaimer: an option among the dependencies, and unknown names in either argument', () => {
    const redis = new Redis({ lazyConnect: true });
    try {
      expect(() => new RedisClaimer({ redis, prefix: 'billing' } as never)).toThrow('"prefix" is an option, not a dependency');
      refused(() => new RedisClaimer({ redis, loger: console } as never), 'loger', 'logger');
      refused(() => new RedisClaimer({ redis }, { prefx: 'billing' } as never), 'prefx', 'prefix');
      refused(() => new RedisClaimer({ redis }, { coalesce: { window: 1 } } as never), 'window', 'windowMs');
    } finally {
      redis.disconnect();
    }
  });

  it('PostgresClaimer: unknown names in either argument name the closest one; an option among the dependencies points to the second argument', async () => {
    const pool = new Pool(); // connects only when used
    try {
      refused(() => new PostgresClaimer({ pool }, { mdoe: 'transactional' } as never), 'mdoe', 'mode');
      refused(() => new PostgresClaimer({ pool }, { operationTimeout: 500 } as never), 'operationTimeout', 'operationTimeoutMs');
      expect(() => new PostgresClaimer({ pool }, { schemaa: 'x' } as never)).toThrow('PostgresClaimer options: unknown option "schemaa" (did you mean "schema"?); known options: schema, mode,');
      refused(() => new PostgresClaimer({ pool, loger: console } as never), 'loger', 'logger');
      expect(() => new PostgresClaimer({ pool, mode: 'transactional' } as never)).toThrow(
        'PostgresClaimer dependencies: "mode" is an option, not a dependency; pass it in the second argument: new PostgresClaimer({ pool }, { mode })',
      );
    } finally {
      await pool.end();
    }
  });

  it('RabbitMqSource: prefetch, and a binding field', () => {
    expect(() => new RabbitMqSource({ url: 'amqp://localhost', queue: 'q', prefetch: 10 } as never)).toThrow(
      `RabbitMqSource options: unknown option "prefetch" (the prefetch is the consumer's concurrency option)`,
    );
    refused(() => new RabbitMqSource({ url: 'amqp://localhost', queue: 'q', delayTierMs: [1000] } as never), 'delayTierMs', 'delayTiersMs');
    refused(() => new RabbitMqSource({ url: 'amqp://localhost', queue: 'q', bindings: [{ exchange: 'x', routingkey: 'k' }] } as never), 'routingkey', 'routingKey');
  });

  it('RabbitMqPublisher', () => {
    refused(() => new RabbitMqPublisher({ url: 'amqp://localhost', publishTimeout: 10 } as never), 'publishTimeout', 'publishTimeoutMs');
  });

  it('KafkaSource: options, nested consumer settings and backoffs, and dependencies', () => {
    const kafka = new Kafka({ brokers: ['127.0.0.1:9092'], logLevel: 0 });
    const base = { topics: ['t'], groupId: 'g' };
    refused(() => new KafkaSource({ kafka }, { ...base, fromBegining: true } as never), 'fromBegining', 'fromBeginning');
    refused(() => new KafkaSource({ kafka }, { ...base, consumer: { sessionTimout: 10_000 } } as never), 'sessionTimout', 'sessionTimeout');
    refused(() => new KafkaSource({ kafka }, { ...base, deadLetterBackoff: { maxDelay: 10 } } as never), 'maxDelay', 'maxDelayMs');
    refused(() => new KafkaSource({ kafka, kafa: 1 } as never, base), 'kafa', 'kafka');
  });

  it('KeyedProducer', () => {
    const kafka = new Kafka({ brokers: ['127.0.0.1:9092'], logLevel: 0 });
    refused(() => new KeyedProducer({ kafka }, {}, { injectContxt: () => ({}) } as never), 'injectContxt', 'injectContext');
    refused(() => new KeyedProducer({ kafka, producr: 1 } as never), 'producr', 'producer');
  });

  it('MemorySource', () => {
    refused(() => new MemorySource({ broker: new MemoryBroker(), queue: 'q', que: 'r' } as never), 'que', 'queue');
  });

  it('OpenTelemetry observer', () => {
    refused(() => createOtelObserver({ recordKeys: true } as never), 'recordKeys', 'recordKey');
  });

  it('DLQ replay: the RabbitMQ backend and replayDeadLetters', async () => {
    refused(() => new RabbitMqReplayBackend({ toExchnage: 'x' } as never), 'toExchnage', 'toExchange');
    const backend = new RabbitMqReplayBackend();
    await expect(replayDeadLetters(backend, { source: 'q.dlq', dryRun: true, limt: 1 } as never, () => undefined)).rejects.toThrow('"limt" (did you mean "limit"?)');
  });

  it('the CLI refuses an unknown flag, naming the closest one', async () => {
    let stderr = '';
    const code = await runCli(['dlq', 'replay', 'q.dlq', '--dryrun'], { io: { stdout: () => undefined, stderr: (t) => void (stderr += t) } });
    expect(code).toBe(2);
    expect(stderr).toContain("unknown option '--dryrun'");
    expect(stderr).toContain('--dry-run');
  });

  it('runConsumers', async () => {
    await expect(runConsumers([], { signal: ['SIGTERM'] } as never)).rejects.toThrow('"signal" (did you mean "signals"?)');
  });
});
