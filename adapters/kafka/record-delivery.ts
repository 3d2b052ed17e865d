/**
 * A Kafka record as the core's {@link Delivery}: its value as the body, its headers, a message id
 * from topic, partition and offset, and the Kafka metadata (consumer group, partition, offset, key).
 */
import type { Delivery } from '../../src';
import type { KafkaRecord } from './client';
import { messageIdOf } from './headers';
import type { RecordSettler } from './record-settler';

const EMPTY_BODY = Buffer.alloc(0);
const NO_HEADERS: Readonly<Record<string, unknown>> = Object.freeze({});

/**
 * @param redelivered - true for a dispatch after the first of this record in this generation
 * @param retries - handler attempts of this record that failed in place (its `priorAttempts`)
 */
export function recordDelivery(topic: string, partition: number, groupId: string, record: KafkaRecord, settler: RecordSettler, redelivered: boolean, retries: number): Delivery {
  return {
    body: record.value ?? EMPTY_BODY,
    headers: (record.headers as Readonly<Record<string, unknown>> | undefined) ?? NO_HEADERS,
    messageId: messageIdOf(topic, partition, record.offset),
    metadata: {
      system: 'kafka',
      destination: topic,
      redelivered,
      priorAttempts: retries > 0 ? retries : undefined,
      consumerGroup: groupId,
      attributes: { partition, offset: record.offset, key: record.key === null ? undefined : record.key.toString('utf8') },
    },
    settler,
  };
}
