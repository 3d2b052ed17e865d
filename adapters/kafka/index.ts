/**
 * `twophase/kafka`: consume Kafka topics with a twophase consumer (kafkajs 2.x, or
 * @platformatic/kafka 2.x through {@link platformaticClient}).
 *
 * ```ts
 * import { Kafka } from 'kafkajs';
 * import { KafkaSource, KeyedProducer } from 'twophase/kafka';
 * const kafka = new Kafka({ clientId: 'billing', brokers: ['127.0.0.1:9092'] });
 * const source = new KafkaSource({ kafka }, { topics: ['payments'], groupId: 'billing' });
 * const consumer = new PaymentsConsumer({ name: 'billing', claimer, source });
 * await consumer.start();
 * ```
 *
 * See docs/kafka.md for the design, the guarantees and the options.
 *
 * @module twophase/kafka
 */
// First: a missing client library is named before any module that needs it loads.
import './peer';
export {
  KafkaSource,
  type KafkaSourceDependencies,
  type KafkaSourceEvent,
  type KafkaSourceState,
  type KafkaSourceStats,
} from './kafka-source';
export {
  KAFKA_SOURCE_DEFAULTS,
  KAFKAJS_CONSUMER_DEFAULTS,
  type DeadLetterTopicCheck,
  type KafkaSourceOptions,
  type ResolvedKafkaSourceOptions,
} from './options';
export { KeyedProducer, withIdempotencyKey, type KeyedMessage } from './producer';
export { HEADERS, deadLetterRecord, messageIdOf, readCount, readHeader, replayRecord, type RecordOrigin, type ReplayPlan } from './headers';
export { ChunkRolledBackError, DeadLetterError, KafkaAdapterError, KafkaGroupProtocolError, KafkaUnavailableError, PartitionRevokedError, type KafkaErrorCode } from './errors';
export { kafkajsClient } from './kafkajs-client';
export {
  platformaticClient,
  PLATFORMATIC_NODE_RANGE,
  type PlatformaticClientOptions,
  type PlatformaticConnection,
} from './platformatic-client';
export { kafkajsLogCreator, type KafkajsLogLevel } from './kafkajs-log';
export type {
  ClusterAdmin,
  FetchedBatch,
  GroupAssignment,
  GroupConsumer,
  GroupConsumerConfig,
  GroupDescription,
  KafkaClient,
  KafkaHeaders,
  KafkaHeaderValue,
  KafkaRecord,
  ProducedRecord,
  ProducedRecordMetadata,
  RecordProducer,
  RecordProducerConfig,
  TopicPartition,
  TopicPartitionOffset,
} from './client';
export { KafkaOutboxPublisher, type KafkaOutboxPublisherOptions } from './outbox-publisher';
