/**
 * `twophase/rabbitmq`: the RabbitMQ adapter (amqplib over amqp-connection-manager).
 *
 * ```ts
 * import { Redis } from 'ioredis';
 * import { RedisClaimer } from 'twophase/redis';
 * import { RabbitMqSource, RabbitMqPublisher } from 'twophase/rabbitmq';
 *
 * const source = new RabbitMqSource({ url: 'amqp://guest:guest@127.0.0.1:5672', queue: 'payments' });
 * const consumer = new PaymentsConsumer({ name: 'payments', source, claimer: new RedisClaimer({ redis: new Redis() }) });
 * await consumer.start();
 * ```
 * See docs/rabbitmq.md for the topology, the settlement mapping and the failure handling.
 *
 * @module twophase/rabbitmq
 */
// First: a missing client library is named before any module that needs it loads.
import './peer';
export { RabbitMqSource, type RabbitMqSourceState } from './rabbitmq-source';
export { RabbitMqPublisher, buildPublish, type RabbitMqPublisherOptions, type PublishMessageOptions, type PublishReceipt, type MessageBody } from './publisher';
export {
  type RabbitMqSourceOptions,
  type ResolvedSourceOptions,
  type QueueType,
  type TopologyMode,
  type CancelPolicy,
  type QueueBinding,
  SOURCE_DEFAULTS,
  MANAGED_QUEUE_ARGUMENTS,
  resolveSourceOptions,
} from './options';
export { type TopologyPlan, type QueuePlan, type DelayQueuePlan, planTopology, delayQueueName, pickDelayTier } from './topology';
export type { RabbitMqSourceEvent, RabbitMqSourceEvents, RabbitMqSourceEventName, RabbitMqSourceListener, RabbitMqSourceStats } from './events';
export type { SettleAction } from './settler';
export { type HandedBack, type PublishedMessage, matchPublished, returnedMessage, deadLetteredMessage } from './publish-match';
export { assertEncodableHeaders, assertPublishable, defaultMaxMessageBytes, MAX_HEADER_TABLE_BYTES } from './wire-limits';
export {
  HEADERS,
  DELIVERY_COUNT_HEADER,
  BROKER_DEATH_HEADERS,
  priorAttempts,
  type AttemptContext,
  cameBackThroughDelayTier,
  type DeliveryRoute,
  MAX_RECORDED_ATTEMPTS,
  originalRoute,
  recordedRoute,
  type RecordedRoute,
  replayRoute,
  replayProperties,
  idempotencyKeyOf,
  readString,
  readCount,
  type DeliveredMessage,
} from './headers';
export {
  RabbitMqError,
  type RabbitMqErrorCode,
  BrokerUnavailableError,
  PublishError,
  MessageTooLargeError,
  UnroutableError,
  StaleDeliveryError,
  ConsumerCancelledError,
} from './errors';
export { BrokerConnectionError, type ConnectFailureReason, type AmqpEndpoint, amqpEndpoint, connectFailureReason, isPermanentConnectFailure } from './connection-error';
export { RabbitMqOutboxPublisher } from './outbox-publisher';
