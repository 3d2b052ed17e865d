/**
 * Replay backends by `--broker` name. A Kafka backend registers here the same way.
 */
import type { ReplayBackendFactory } from '../replay-backend';
import { KafkaReplayBackend } from './kafka';
import { RabbitMqReplayBackend } from './rabbitmq';

/** Known backends. */
export const REPLAY_BACKENDS: Readonly<Record<string, ReplayBackendFactory>> = {
  rabbitmq: (options) =>
    new RabbitMqReplayBackend({
      url: options.url,
      toExchange: options.toExchange,
      toRoutingKey: options.toRoutingKey,
      toQueue: options.toQueue,
    }),
  kafka: (options) => new KafkaReplayBackend({ url: options.url, toTopic: options.toQueue, toExchange: options.toExchange }),
};
