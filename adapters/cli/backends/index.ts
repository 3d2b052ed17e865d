/**
 * Replay backends by `--broker` name. Each factory loads its backend module (and with it the
 * broker's client library, an optional peer dependency) only when called, so a service without
 * kafkajs can still run `twophase dlq replay --broker rabbitmq`, `twophase --version` and the
 * other commands. A Kafka backend registers here the same way.
 */
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
    const { KafkaReplayBackend } = await importPeer('kafkajs', 'twophase dlq replay --broker kafka', () => import('./kafka'));
    return new KafkaReplayBackend({ url: options.url, toTopic: options.toQueue, toExchange: options.toExchange, workQueue: options.workQueue, trustRecordedRoute: options.trustRecordedRoute });
  },
};
