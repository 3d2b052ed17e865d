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
export {
  RabbitMqPublisher,
  /** @deprecated `buildPublish` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  buildPublish,
  type RabbitMqPublisherOptions,
  type PublishMessageOptions,
  type PublishReceipt,
  type MessageBody,
} from './publisher';
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
export {
  type TopologyPlan,
  type QueuePlan,
  type DelayQueuePlan,
  planTopology,
  delayQueueName,
  /** @deprecated `pickDelayTier` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  pickDelayTier,
} from './topology';
export type { RabbitMqSourceEvent, RabbitMqSourceEvents, RabbitMqSourceEventName, RabbitMqSourceListener, RabbitMqSourceStats } from './events';
export type { SettleAction } from './settler';
export {
  /** @deprecated `HandedBack` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  type HandedBack,
  /** @deprecated `PublishedMessage` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  type PublishedMessage,
  /** @deprecated `matchPublished` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  matchPublished,
  /** @deprecated `returnedMessage` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  returnedMessage,
  /** @deprecated `deadLetteredMessage` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  deadLetteredMessage,
} from './publish-match';
export {
  /** @deprecated `assertEncodableHeaders` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  assertEncodableHeaders,
  /** @deprecated `assertPublishable` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  assertPublishable,
  /** @deprecated `defaultMaxMessageBytes` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  defaultMaxMessageBytes,
  /** @deprecated `MAX_HEADER_TABLE_BYTES` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  MAX_HEADER_TABLE_BYTES,
} from './wire-limits';
export {
  HEADERS,
  DELIVERY_COUNT_HEADER,
  /** @deprecated `BROKER_DEATH_HEADERS` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  BROKER_DEATH_HEADERS,
  /** @deprecated `priorAttempts` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  priorAttempts,
  /** @deprecated `AttemptContext` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  type AttemptContext,
  /** @deprecated `cameBackThroughDelayTier` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  cameBackThroughDelayTier,
  /** @deprecated `DeliveryRoute` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  type DeliveryRoute,
  /** @deprecated `MAX_RECORDED_ATTEMPTS` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  MAX_RECORDED_ATTEMPTS,
  /** @deprecated `originalRoute` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  originalRoute,
  /** @deprecated `recordedRoute` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  recordedRoute,
  /** @deprecated `RecordedRoute` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  type RecordedRoute,
  /** @deprecated `replayRoute` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  replayRoute,
  /** @deprecated `replayProperties` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  replayProperties,
  /** @deprecated `idempotencyKeyOf` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  idempotencyKeyOf,
  /** @deprecated `readString` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  readString,
  /** @deprecated `readCount` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  readCount,
  /** @deprecated `DeliveredMessage` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
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
export {
  BrokerConnectionError,
  type ConnectFailureReason,
  /** @deprecated `AmqpEndpoint` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  type AmqpEndpoint,
  /** @deprecated `amqpEndpoint` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  amqpEndpoint,
  /** @deprecated `connectFailureReason` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  connectFailureReason,
  /** @deprecated `isPermanentConnectFailure` is internal to twophase; removed from `twophase/rabbitmq` in 0.3.0. */
  isPermanentConnectFailure,
} from './connection-error';
export { RabbitMqOutboxPublisher } from './outbox-publisher';
