/**
 * The service variables of the demo and the examples (examples/shared/env.ts): one set of names,
 * the old names still read with a deprecation warning.
 */
import { serviceSettings } from '../../examples/shared/env';

describe('serviceSettings (demo and examples)', () => {
  test('defaults to the local services when nothing is set', () => {
    const warnings: string[] = [];
    expect(serviceSettings({}, (l) => warnings.push(l))).toEqual({
      amqpUrl: 'amqp://guest:guest@127.0.0.1:5672',
      redisUrl: 'redis://127.0.0.1:6379',
      kafkaBrokers: ['127.0.0.1:9092'],
    });
    expect(warnings).toEqual([]);
  });

  test('reads TWOPHASE_AMQP_URL, TWOPHASE_REDIS_URL and TWOPHASE_KAFKA_BROKERS (comma-separated)', () => {
    const env = { TWOPHASE_AMQP_URL: 'amqp://u:p@mq:5672/v', TWOPHASE_REDIS_URL: 'redis://cache:6380/2', TWOPHASE_KAFKA_BROKERS: 'k1:9092, k2:9092,' };
    expect(serviceSettings(env, () => undefined)).toEqual({ amqpUrl: 'amqp://u:p@mq:5672/v', redisUrl: 'redis://cache:6380/2', kafkaBrokers: ['k1:9092', 'k2:9092'] });
  });

  test('the new name wins over the old one, and the old one alone still works with one deprecation warning each', () => {
    const warnings: string[] = [];
    const warn = (l: string) => warnings.push(l);
    expect(serviceSettings({ TWOPHASE_AMQP_URL: 'amqp://new', AMQP_URL: 'amqp://old' }, warn).amqpUrl).toBe('amqp://new');
    expect(warnings).toEqual([]);
    const old = { AMQP_URL: 'amqp://old', REDIS_HOST: 'cache', REDIS_PORT: '6390', KAFKA_BROKERS: 'k:1' };
    expect(serviceSettings(old, warn)).toEqual({ amqpUrl: 'amqp://old', redisUrl: 'redis://cache:6390', kafkaBrokers: ['k:1'] });
    expect(warnings.join('')).toMatch(/AMQP_URL is deprecated; set TWOPHASE_AMQP_URL/);
    expect(warnings.join('')).toMatch(/REDIS_HOST is deprecated; set TWOPHASE_REDIS_URL/);
    expect(warnings.join('')).toMatch(/KAFKA_BROKERS is deprecated; set TWOPHASE_KAFKA_BROKERS/);
    const count = warnings.length;
    serviceSettings(old, warn); // once per name and process
    expect(warnings).toHaveLength(count);
  });
});
