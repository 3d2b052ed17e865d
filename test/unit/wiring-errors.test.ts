/**
 * A consumer or runOnce given something other than a claimer or a source says what it got and
 * names the fix: an ioredis client or a pg Pool goes inside a claimer; an amqplib connection or a
 * kafkajs client goes inside a source. ("claimer is required" for a Redis client sent users
 * looking for a missing option.)
 */
import Redis from 'ioredis';
import { Kafka } from 'kafkajs';
import { Pool } from 'pg';
import { ConfigurationError, InMemoryClaimer } from '../../src';
import { resolveConsumerOptions } from '../../src/config/consumer-options';
import { resolveRunOnceOptions } from '../../src/run-once/run-once-options';
import { silentLogger } from '../../src/util/logger';
import { ManualSource } from './helpers';

const consumer = (claimer: unknown, source: unknown) => () =>
  resolveConsumerOptions({ name: 'c', claimer: claimer as never, source: source as never, leaseTtlMs: 30_000, doneTtlMs: 60_000 }, silentLogger);
const runOnce = (claimer: unknown) => () => resolveRunOnceOptions({ claimer, leaseTtlMs: 30_000, doneTtlMs: 60_000 } as never);

// Clients never connected: only their shape is read.
const redis = new Redis({ lazyConnect: true });
const pool = new Pool({ host: '127.0.0.1', port: 1 });
afterAll(async () => {
  redis.disconnect();
  await pool.end();
});

describe('claimer', () => {
  test.each([
    ['an ioredis client', () => redis, /claimer must be a Claimer \(an object with claim\(\)\), got an ioredis client: an ioredis client goes inside a claimer: new RedisClaimer\(\{ redis \}\) from 'twophase\/redis'/],
    ['a pg Pool', () => pool, /got a pg Pool or Client: a pg Pool goes inside a claimer: new PostgresClaimer\(\{ pool \}.*from 'twophase\/postgres'/],
    ['a plain object', () => ({}), /claimer must be a Claimer \(an object with claim\(\)\), got an object with no claim\(\)/],
    ['nothing', () => undefined, /claimer is required: a Claimer such as new InMemoryClaimer\(\).*RedisClaimer.*PostgresClaimer/],
  ])('consumer given %s: says what it got and names the fix', (_what, value, message) => {
    expect(consumer(value(), new ManualSource())).toThrow(ConfigurationError);
    expect(consumer(value(), new ManualSource())).toThrow(message);
  });

  test('runOnce given an ioredis client: the same message, prefixed runOnce', () => {
    expect(runOnce(redis)).toThrow(/^runOnce: claimer must be a Claimer \(an object with claim\(\)\), got an ioredis client: an ioredis client goes inside a claimer/);
  });
});

describe('source', () => {
  const claimer = new InMemoryClaimer();
  test.each([
    ['a kafkajs client', () => new Kafka({ brokers: ['127.0.0.1:1'] }), /source must be a MessageSource \(an object with start\(\)\), got a kafkajs client: a kafkajs client goes inside a source: new KafkaSource\(\{ kafka \}, \{ topics, groupId \}\) from 'twophase\/kafka'/],
    ['a kafkajs consumer', () => new Kafka({ brokers: ['127.0.0.1:1'] }).consumer({ groupId: 'g' }), /got a kafkajs consumer: KafkaSource makes its own consumer from the kafkajs client: new KafkaSource\(\{ kafka \}, \{ topics, groupId \}\)/],
    ['a URL string', () => 'amqp://localhost', /got 'amqp:\/\/localhost' \(a string\): a RabbitMQ URL goes inside a source: new RabbitMqSource\(\{ url, queue \}\) from 'twophase\/rabbitmq'/],
    ['nothing', () => undefined, /source is required: a MessageSource such as new RabbitMqSource\(\{ url, queue \}\).*KafkaSource.*MemorySource/],
  ])('consumer given %s: says what it got and names the fix', (_what, value, message) => {
    expect(consumer(claimer, value())).toThrow(ConfigurationError);
    expect(consumer(claimer, value())).toThrow(message);
  });
});

describe('what the messages never print', () => {
  const claimer = new InMemoryClaimer();
  test('a URL given in the wrong place keeps its password out of the error, and is not cut mid-port', () => {
    const wrong = consumer(claimer, 'amqp://admin:s3cr3tPW@rabbit.internal:5672/vh');
    expect(wrong).toThrow(/got 'amqp:\/\/admin:\*\*\*@rabbit\.internal:5672\/vh' \(a string\)/);
    expect(wrong).not.toThrow(/s3cr3tPW/);
    expect(consumer('postgres://u:hunter2@db.internal/app', new ManualSource())).not.toThrow(/hunter2/);
    expect(consumer('postgres://u:hunter2@db.internal/app', new ManualSource())).toThrow(/got 'postgres:\/\/u:\*\*\*@db\.internal\/app' \(a string\)/);
  });

  test('a class given without new is named, not printed: its source stays out of the message', () => {
    expect(consumer(InMemoryClaimer, new ManualSource())).toThrow(/got the class InMemoryClaimer itself: construct it, new InMemoryClaimer\(…\)$/);
    expect(consumer(claimer, ManualSource)).toThrow(/got the class ManualSource itself: construct it, new ManualSource\(…\)$/);
    let message = '';
    try {
      consumer(InMemoryClaimer, new ManualSource())();
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message.length).toBeLessThan(400);
  });
});

describe('a client given to the other part', () => {
  test('an ioredis client or a pg Pool as the source: named, and sent to the claimer', () => {
    expect(consumer(new InMemoryClaimer(), redis)).toThrow(/source must be a MessageSource \(an object with start\(\)\), got an ioredis client, which goes inside a claimer \(new RedisClaimer\(\{ redis \}\) from 'twophase\/redis'\), not in source: give a MessageSource/);
    expect(consumer(new InMemoryClaimer(), pool)).toThrow(/got a pg Pool or Client, which goes inside a claimer/);
  });

  test('a kafkajs client as the claimer: named, and sent to the source', () => {
    expect(consumer(new Kafka({ brokers: ['127.0.0.1:1'] }), new ManualSource())).toThrow(/claimer must be a Claimer \(an object with claim\(\)\), got a kafkajs client, which goes inside a source \(new KafkaSource\(\{ kafka \}, \{ topics, groupId \}\) from 'twophase\/kafka'\), not in claimer: give a Claimer/);
  });

  test('an unrecognised class instance is named with the right article', () => {
    class EventThing {}
    expect(consumer(new InMemoryClaimer(), new EventThing())).toThrow(/got an EventThing \(no start\(\)\)/);
  });
});
