/**
 * Every options object names a wrongly typed integer option with the value AND its type: a string
 * `'10'` must not read as the number 10 in the error (`got 10` sent users looking for a range
 * problem). One shared validator (twophase/adapter-kit `checkInteger`) prints it for all of them.
 */
import { ConfigurationError, InMemoryClaimer, runConsumers } from '../../src';
import { checkInteger, checkTtl } from '../../src/adapter-kit';
import { resolveConsumerOptions } from '../../src/config/consumer-options';
import { silentLogger } from '../../src/util/logger';
import { resolveRunOnceOptions } from '../../src/run-once/run-once-options';
import { resolveGatedOptions } from '../../adapters/gated/options';
import { resolveKafkaSourceOptions } from '../../adapters/kafka/options';
import { resolveOptions as resolvePostgresOptions } from '../../adapters/postgres/options';
import { buildPublish } from '../../adapters/rabbitmq/publisher';
import { resolveSourceOptions } from '../../adapters/rabbitmq/options';
import { ManualSource } from './helpers';
import { resolveOptions as resolveRedisOptions } from '../../adapters/redis/options';

const TYPED = /got '10' \(a string\)/;
const claimer = new InMemoryClaimer();

describe.each<[string, () => unknown]>([
  ['ConsumerBase options (concurrency)', () => resolveConsumerOptions({ name: 'c', claimer, source: new ManualSource(), leaseTtlMs: 30_000, doneTtlMs: 60_000, concurrency: '10' as never }, silentLogger)],
  ['claim TTLs (checkTtl)', () => checkTtl('leaseTtlMs', '10', 1, 100)],
  ['runOnce options (waitMs)', () => resolveRunOnceOptions({ claimer, leaseTtlMs: 30_000, doneTtlMs: 60_000, waitMs: '10' as never } as never)],
  ['RabbitMqSource options (publishTimeoutMs)', () => resolveSourceOptions({ url: 'amqp://localhost', queue: 'q', publishTimeoutMs: '10' as never })],
  ['RabbitMQ publish (priority)', () => buildPublish({ a: 1 }, { idempotencyKey: 'k', priority: '10' as never })],
  ['KafkaSource options (claimBatchSize)', () => resolveKafkaSourceOptions({ topics: ['t'], groupId: 'g', claimBatchSize: '10' as never })],
  ['RedisClaimer options (maxBatchKeys)', () => resolveRedisOptions({ maxBatchKeys: '10' as never })],
  ['PostgresClaimer options (maxResultBytes)', () => resolvePostgresOptions({ maxResultBytes: '10' as never })],
  ['GatedClaimer options (gateRetryMs)', () => resolveGatedOptions({ gateRetryMs: '10' as never })],
])('%s', (_name, resolve) => {
  test("a string '10' is refused with its type in the message", () => {
    expect(resolve).toThrow(ConfigurationError);
    expect(resolve).toThrow(TYPED);
  });
});

test('runConsumers options (closeTimeoutMs)', async () => {
  await expect(runConsumers([], { closeTimeoutMs: '10' as never, signals: [], exitProcess: false })).rejects.toThrow(TYPED);
});

describe('checkInteger', () => {
  test('names the field, the range, the unit and the value with its type', () => {
    expect(() => checkInteger('timeoutMs', 1.5, 0, 10, 'ms')).toThrow("timeoutMs must be an integer number of ms in [0, 10], got 1.5 (a number)");
    expect(() => checkInteger('n', null, 1, 2)).toThrow('n must be an integer in [1, 2], got null');
    expect(() => checkInteger('n', 3, 1, 2)).toThrow('got 3 (a number)');
    expect(checkInteger('n', 2, 1, 2)).toBe(2);
  });
});
