/**
 * Every bundled source exposes one operations surface (src/util/adapter-surface.ts): `settings` (the
 * options in force), `stats` (a fresh snapshot on each read) and `on(listener)` returning a
 * remover. Built without connecting: the constructors open nothing.
 */
import Redis from 'ioredis';
import { Kafka, logLevel } from 'kafkajs';
import { Pool } from 'pg';
import { KafkaSource } from '../../adapters/kafka';
import { MemoryBroker, MemorySource } from '../../adapters/memory';
import { PostgresClaimer } from '../../adapters/postgres';
import { RabbitMqSource } from '../../adapters/rabbitmq';
import { RedisClaimer } from '../../adapters/redis';
import { type Logger, silentLogger } from '../../src';
import { AdapterEvents, type AdapterSurface } from '../../src/adapter-kit';

type AnySurface = AdapterSurface<object, object, { readonly type: string }>;

const sources: Array<[string, () => AnySurface & { settings: object }]> = [
  ['MemorySource', () => new MemorySource({ broker: new MemoryBroker(), queue: 'q' })],
  ['RabbitMqSource', () => new RabbitMqSource({ url: 'amqp://127.0.0.1:1', queue: 'surface.q', logger: silentLogger })],
  ['KafkaSource', () => new KafkaSource({ kafka: new Kafka({ brokers: ['127.0.0.1:1'], logLevel: logLevel.NOTHING }) }, { topics: ['t'], groupId: 'g', logger: silentLogger })],
];

describe.each(sources)('%s: the common adapter surface', (_name, make) => {
  test('settings are the options in force, stats a fresh snapshot of numeric counters, on() returns a remover', () => {
    const source = make();
    expect(typeof source.settings).toBe('object');
    const first = source.stats;
    expect(first).not.toBe(source.stats);
    expect(first).toEqual(source.stats);
    const numeric = Object.values(first).filter((v) => typeof v === 'number');
    expect(numeric.length).toBeGreaterThan(0);
    const remove = source.on(() => undefined);
    expect(typeof remove).toBe('function');
    remove();
    remove();
  });
});

test('the queue name is in every source settings under one field where the source has one queue', () => {
  expect(new MemorySource({ broker: new MemoryBroker(), queue: 'q1' }).settings.queue).toBe('q1');
  expect(new RabbitMqSource({ url: 'amqp://127.0.0.1:1', queue: 'q2', logger: silentLogger }).settings.queue).toBe('q2');
});

describe('AdapterEvents', () => {
  const warnings: string[] = [];
  const logger: Logger = { ...silentLogger, warn: (_obj, msg) => void warnings.push(msg ?? '') };

  test('calls listeners in order; a throwing one is logged and the next still runs; the remover removes', () => {
    const events = new AdapterEvents<{ type: 'a' | 'b' }>('twophase/test', logger);
    const seen: string[] = [];
    expect(events.active).toBe(false);
    events.on(() => {
      throw new Error('boom');
    });
    const remove = events.on((e) => void seen.push(e.type));
    expect(events.active).toBe(true);
    events.emit({ type: 'a' });
    remove();
    events.emit({ type: 'b' });
    expect(seen).toEqual(['a']);
    expect(warnings).toEqual(['twophase/test: event listener threw; ignored', 'twophase/test: event listener threw; ignored']);
  });
});

test('the store adapters name their resolved options settings too', async () => {
  const pool = new Pool({ max: 1 });
  expect(new PostgresClaimer({ pool }).settings.mode).toBe('standalone');
  await pool.end();
  const redis = new Redis({ lazyConnect: true });
  expect(typeof new RedisClaimer({ redis }).settings).toBe('object');
  redis.disconnect();
});
