/**
 * Pure functions from the core's delivery facts to OpenTelemetry attributes, and the one rule
 * deciding whether a delivery failed (span status ERROR and `error.type`).
 */
import type { Attributes } from '@opentelemetry/api';
import { type DeliveryInfo, type DeliveryMetadata, type DeliveryResult } from '../../src';
import { errorType, truncateErrorMessage } from '../../src/adapter-kit';
import {
  ATTR_MESSAGING_CONSUMER_GROUP_NAME,
  ATTR_MESSAGING_DESTINATION_NAME,
  ATTR_MESSAGING_DESTINATION_PARTITION_ID,
  ATTR_MESSAGING_KAFKA_MESSAGE_KEY,
  ATTR_MESSAGING_KAFKA_OFFSET,
  ATTR_MESSAGING_MESSAGE_ID,
  ATTR_MESSAGING_OPERATION_NAME,
  ATTR_MESSAGING_OPERATION_TYPE,
  ATTR_MESSAGING_RABBITMQ_DESTINATION_ROUTING_KEY,
  ATTR_MESSAGING_RABBITMQ_MESSAGE_DELIVERY_TAG,
  ATTR_MESSAGING_SYSTEM,
  ATTR_TWOPHASE_CONSUMER_NAME,
  ATTR_TWOPHASE_REDELIVERED,
  MESSAGING_OPERATION_TYPE_VALUE_PROCESS,
} from './semconv';

/**
 * Keys of `DeliveryMetadata.attributes` read here. Adapters fill what their broker knows:
 * RabbitMQ `routingKey`, `deliveryTag`; Kafka `partition`, `offset`, `key`.
 */
export const METADATA_KEYS = { routingKey: 'routingKey', deliveryTag: 'deliveryTag', partition: 'partition', offset: 'offset', key: 'key' } as const;

type MetadataValue = string | number | boolean | undefined;

function asInt(value: MetadataValue): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? value : undefined;
  if (typeof value === 'string' && /^\d+$/.test(value)) {
    const n = Number(value);
    return Number.isSafeInteger(n) ? n : undefined;
  }
  return undefined;
}

function asText(value: MetadataValue): string | undefined {
  if (value === undefined) return undefined;
  return String(value);
}

/** Span name of an operation on a destination: `<operation> <destination>`, or the operation alone. */
export function spanName(operation: string, destination: string): string {
  return destination ? `${operation} ${destination}` : operation;
}

/** Attributes that identify where a delivery came from, shared by spans and metrics (low cardinality). */
export function destinationAttributes(metadata: DeliveryMetadata, consumer: string): Attributes {
  const out: Attributes = {
    [ATTR_MESSAGING_SYSTEM]: metadata.system,
    [ATTR_MESSAGING_DESTINATION_NAME]: metadata.destination,
    [ATTR_TWOPHASE_CONSUMER_NAME]: consumer,
  };
  if (metadata.consumerGroup) out[ATTR_MESSAGING_CONSUMER_GROUP_NAME] = metadata.consumerGroup;
  return out;
}

/**
 * Attributes of the process span at its start (what samplers may look at): the destination, the
 * operation, the message id and the broker-specific facts. Kafka's offset and key are read only
 * when `system` is `kafka`, RabbitMQ's routing key and delivery tag only when it is `rabbitmq`.
 */
export function processSpanAttributes(info: DeliveryInfo): Attributes {
  const { metadata } = info;
  const facts = metadata.attributes ?? {};
  const out: Attributes = {
    ...destinationAttributes(metadata, info.consumer),
    [ATTR_MESSAGING_OPERATION_NAME]: MESSAGING_OPERATION_TYPE_VALUE_PROCESS,
    [ATTR_MESSAGING_OPERATION_TYPE]: MESSAGING_OPERATION_TYPE_VALUE_PROCESS,
    [ATTR_TWOPHASE_REDELIVERED]: metadata.redelivered,
  };
  if (info.messageId) out[ATTR_MESSAGING_MESSAGE_ID] = info.messageId;
  const partition = asText(facts[METADATA_KEYS.partition]);
  if (partition !== undefined) out[ATTR_MESSAGING_DESTINATION_PARTITION_ID] = partition;
  if (metadata.system === 'kafka') {
    const offset = asInt(facts[METADATA_KEYS.offset]);
    if (offset !== undefined) out[ATTR_MESSAGING_KAFKA_OFFSET] = offset;
    const key = asText(facts[METADATA_KEYS.key]);
    if (key !== undefined) out[ATTR_MESSAGING_KAFKA_MESSAGE_KEY] = key;
  }
  if (metadata.system === 'rabbitmq') {
    const routingKey = asText(facts[METADATA_KEYS.routingKey]);
    if (routingKey) out[ATTR_MESSAGING_RABBITMQ_DESTINATION_ROUTING_KEY] = routingKey;
    const tag = asInt(facts[METADATA_KEYS.deliveryTag]);
    if (tag !== undefined) out[ATTR_MESSAGING_RABBITMQ_MESSAGE_DELIVERY_TAG] = tag;
  }
  return out;
}

/** Why a delivery counts as failed: `error.type` and the status message. */
export interface Failure {
  readonly type: string;
  readonly message: string;
}

/** Semantic conventions' fallback `error.type` when no class or code applies. */
export const OTHER_ERROR_TYPE = '_OTHER';

/**
 * Whether a delivery failed, and how to name it. Failed: dead-lettered (any reject), an effect
 * applied whose commit failed or was fenced (`commit_failed`, `lease_lost`), any other ending that
 * carries an error (handler error before a retry, claim store down), and a broker settle that
 * failed. Not failed: committed, done duplicates, busy requeues and shutdown requeues.
 * `error.type` is the error's class name, else the core's reason code.
 */
export function deliveryFailure(result: DeliveryResult, settleError: unknown): Failure | undefined {
  const typeOf = (error: unknown, fallback: string | undefined) => errorType(error) ?? fallback ?? OTHER_ERROR_TYPE;
  const detail = (error: unknown) => {
    const text = truncateErrorMessage(error, 256);
    return text ? `: ${text}` : '';
  };
  if (result.action === 'reject') {
    return { type: typeOf(result.error, result.reason), message: `dead-lettered (${result.reason ?? 'rejected'})${detail(result.error)}` };
  }
  if (result.outcome === 'commit_failed' || result.outcome === 'lease_lost') {
    return { type: typeOf(result.error, result.outcome), message: `effect applied but ${result.outcome}${detail(result.error)}` };
  }
  if (result.error !== undefined && result.reason !== 'shutdown') {
    return { type: typeOf(result.error, result.outcome), message: `${result.outcome}${detail(result.error)}` };
  }
  if (settleError !== undefined) {
    return { type: typeOf(settleError, 'ack_failed'), message: `broker settle failed${detail(settleError)}` };
  }
  return undefined;
}
