/**
 * Replay backends by `--broker` name. Each factory loads its backend module (and with it the
 * broker's client library, an optional peer dependency) only when called, so a service without
 * kafkajs can still run `twophase dlq replay --broker rabbitmq`, `twophase --version` and the
 * other commands. A Kafka backend registers here the same way.
 */
import { ConfigurationError } from '../../../src';
import type { KafkaClient } from '../../kafka';
import { importPeer } from '../peer';
import type { ReplayBackendFactory } from '../replay-backend';

/**
 * Known backends. A factory rejects with `MissingPeerError` when its client library (amqplib,
 * kafkajs) is not installed.
 */
export const REPLAY_BACKENDS: Readonly<Record<string, ReplayBackendFactory>> = {
  rabbitmq: async (options) => {
    const { RabbitMqReplayBackend } = await importPeer('amqplib', 'twophase dlq replay --broker rabbitmq', () => import('./rabbitmq'));
    return new RabbitMqReplayBackend({
      url: options.url,
      toExchange: options.toExchange,
      toRoutingKey: options.toRoutingKey,
      toQueue: options.toQueue,
      workQueue: options.workQueue,
      trustRecordedRoute: options.trustRecordedRoute,
    });
  },
  kafka: async (options) => {
    const library = options.client ?? 'kafkajs';
    // twophase/kafka refuses to load with neither client installed: name the one this command uses.
    const command = library === 'platformatic' ? 'twophase dlq replay --broker kafka --client platformatic' : 'twophase dlq replay --broker kafka';
    const peer = library === 'platformatic' ? '@platformatic/kafka' : 'kafkajs';
    const [{ KafkaReplayBackend, kafkaBrokers }, { kafkajsClient, platformaticClient }] = await importPeer(peer, command, () => Promise.all([import('./kafka'), import('../../kafka')]));
    const brokers = kafkaBrokers(options.url);
    let client: KafkaClient;
    if (library === 'platformatic') {
      await importPeer('@platformatic/kafka', 'twophase dlq replay --broker kafka --client platformatic', () => Promise.resolve(require.resolve('@platformatic/kafka')));
      client = platformaticClient({ clientId: 'twophase-cli', bootstrapBrokers: brokers, retries: 3 });
    } else if (library === 'kafkajs') {
      const { Kafka, logLevel } = await importPeer('kafkajs', 'twophase dlq replay --broker kafka', () => import('kafkajs'));
      client = kafkajsClient(new Kafka({ clientId: 'twophase-cli', brokers, logLevel: logLevel.NOTHING, retry: { retries: 3 } }));
    } else {
      throw new ConfigurationError(`unknown --client "${library}" (known: kafkajs, platformatic)`);
    }
    return new KafkaReplayBackend({ client, toTopic: options.toQueue, toExchange: options.toExchange, workQueue: options.workQueue, trustRecordedRoute: options.trustRecordedRoute });
  },
};
