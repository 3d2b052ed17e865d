/**
 * A wrong Kafka broker address: start() fails with a twophase error naming the brokers tried and
 * the cause (ECONNREFUSED), instead of kafkajs's bare KafkaJSNumberOfRetriesExceeded.
 */
import { Kafka, logLevel } from 'kafkajs';
import { KafkaSource, KafkaUnavailableError } from '../../adapters/kafka';
import { silentLogger } from '../../src';

test('start() against a port nobody listens on names the broker and ECONNREFUSED', async () => {
  const kafka = new Kafka({ clientId: 'unreachable', brokers: ['127.0.0.1:1'], logLevel: logLevel.NOTHING, connectionTimeout: 500, retry: { retries: 1, initialRetryTime: 50, maxRetryTime: 100 } });
  const source = new KafkaSource({ kafka }, { topics: ['nowhere'], groupId: 'nowhere', logger: silentLogger });
  const sink = { dispatch: async () => { throw new Error('unused'); }, claimBatch: async () => [] };
  const error = (await source.start(sink as never, { concurrency: 1 }).catch((e: unknown) => e)) as Error;
  expect(error).toBeInstanceOf(KafkaUnavailableError);
  expect(error.message).toMatch(/127\.0\.0\.1:1/);
  expect(error.message).toMatch(/ECONNREFUSED/);
  await source.close();
});
