/**
 * The record headers the Kafka adapter reads and writes, and pure functions that turn a fetched
 * record into its dead-letter copy and a dead letter into its replayed copy. Nothing here
 * mutates its input.
 */
import { IDEMPOTENCY_KEY_HEADER, InvalidMessageError, messageKeyOf, type RejectInfo } from '../../src';
import type { KafkaHeaders, KafkaHeaderValue, KafkaRecord, ProducedRecord } from './client';

/** Header names. Values are UTF-8 strings. */
export const HEADERS = {
  /** Topic the record was consumed from when it was dead-lettered. */
  originalTopic: 'twophase-original-topic',
  /** Partition of the original record (decimal). */
  originalPartition: 'twophase-original-partition',
  /** Offset of the original record (decimal). */
  originalOffset: 'twophase-original-offset',
  /** Timestamp of the original record, Unix ms (decimal). */
  originalTimestamp: 'twophase-original-timestamp',
  /** `topic:partition:offset` of the original record: its default idempotency key when it had no header. */
  originalMessageId: 'twophase-original-message-id',
  /** Consumer group that dead-lettered the record. */
  consumerGroup: 'twophase-consumer-group',
  /** Dead-letter reason code (`retry_exhausted`, `permanent_error`, `missing_key`, …). */
  reason: 'twophase-reason',
  /** Handler attempts made before the dead-letter (0 when the handler never ran). */
  attempts: 'twophase-attempts',
  /** The error's message, at most 1024 characters, when an error caused the dead-letter. */
  errorMessage: 'twophase-error-message',
  /** The error's class name, when an error caused the dead-letter. */
  errorType: 'twophase-error-type',
  /** When the record was dead-lettered, Unix ms (decimal). */
  rejectedAt: 'twophase-rejected-at',
  /** How many times the replay tool republished this record. */
  replayCount: 'twophase-replay-count',
  /** When the replay tool last republished this record, Unix ms (decimal). */
  replayedAt: 'twophase-replayed-at',
} as const;

/** Headers that describe one dead-lettering; dropped from a replayed copy. */
const DEAD_LETTER_HEADERS: readonly string[] = [
  HEADERS.originalTopic,
  HEADERS.originalPartition,
  HEADERS.originalOffset,
  HEADERS.originalTimestamp,
  HEADERS.originalMessageId,
  HEADERS.consumerGroup,
  HEADERS.reason,
  HEADERS.attempts,
  HEADERS.errorMessage,
  HEADERS.errorType,
  HEADERS.rejectedAt,
];

/** `topic:partition:offset`: the broker's identity of a record, the adapter's message id. */
export function messageIdOf(topic: string, partition: number, offset: string): string {
  return `${topic}:${partition}:${offset}`;
}

/**
 * Reads a header as a string: a string as is, a Buffer as UTF-8; when the record repeats the
 * header (kafkajs gives an array), the last value. Undefined when absent.
 */
export function readHeader(headers: KafkaHeaders | undefined, name: string): string | undefined {
  let raw: KafkaHeaderValue = headers?.[name];
  if (Array.isArray(raw)) raw = raw[raw.length - 1];
  if (typeof raw === 'string') return raw;
  if (Buffer.isBuffer(raw)) return raw.toString('utf8');
  return undefined;
}

/** Reads a non-negative integer header; undefined when absent or not one. */
export function readCount(headers: KafkaHeaders | undefined, name: string): number | undefined {
  const raw = readHeader(headers, name);
  if (raw === undefined || raw.trim() === '') return undefined;
  const value = Number(raw);
  return Number.isInteger(value) && value >= 0 ? value : undefined;
}

/** Where a record came from, for its dead-letter copy. */
export interface RecordOrigin {
  readonly topic: string;
  readonly partition: number;
  readonly groupId: string;
}

/**
 * The dead-letter copy of `record`: same key (so it lands in order with its key) and value, the
 * original headers without those of an earlier dead-lettering, and the headers above describing
 * this one. Its timestamp is left to the producer (the time of dead-lettering); the original one
 * is kept in `twophase-original-timestamp`.
 */
export function deadLetterRecord(record: KafkaRecord, origin: RecordOrigin, info: RejectInfo, now: number): ProducedRecord {
  const headers: Record<string, KafkaHeaderValue> = {};
  for (const [name, value] of Object.entries(record.headers ?? {})) {
    if (!DEAD_LETTER_HEADERS.includes(name) && value !== undefined) headers[name] = value;
  }
  headers[HEADERS.originalTopic] = origin.topic;
  headers[HEADERS.originalPartition] = String(origin.partition);
  headers[HEADERS.originalOffset] = record.offset;
  headers[HEADERS.originalTimestamp] = record.timestamp;
  headers[HEADERS.originalMessageId] = messageIdOf(origin.topic, origin.partition, record.offset);
  headers[HEADERS.consumerGroup] = origin.groupId;
  headers[HEADERS.reason] = info.reason;
  headers[HEADERS.attempts] = String(info.attempts);
  headers[HEADERS.rejectedAt] = String(now);
  if (info.errorMessage !== undefined) headers[HEADERS.errorMessage] = info.errorMessage;
  if (info.errorType !== undefined) headers[HEADERS.errorType] = info.errorType;
  return { key: record.key, value: record.value, headers };
}

/** A dead letter's replay: where it goes and what is produced. */
export interface ReplayPlan {
  /** The original topic, from `twophase-original-topic`. */
  readonly topic: string;
  readonly record: ProducedRecord;
  /**
   * The idempotency key the replayed copy will be claimed under (derived as the consumer derives
   * it); undefined when the consumer cannot derive one (it dead-letters the copy as `invalid_key`).
   */
  readonly idempotencyKey: string | undefined;
}

/**
 * The replayed copy of a dead letter, or undefined when it has no `twophase-original-topic`
 * header (not written by this adapter). The dead-letter headers are dropped and
 * `twophase-replay-count` goes up by one. A record that had no `idempotency-key` header gets one
 * holding its original `topic:partition:offset`: the key it was claimed under, so replaying the
 * same dead letter twice applies the effect once (its claim was released when it was
 * dead-lettered, so the first replay runs the handler).
 */
export function replayRecord(record: KafkaRecord, now: number): ReplayPlan | undefined {
  const topic = readHeader(record.headers, HEADERS.originalTopic);
  if (topic === undefined || topic.length === 0) return undefined;
  const headers: Record<string, KafkaHeaderValue> = {};
  for (const [name, value] of Object.entries(record.headers ?? {})) {
    if (!DEAD_LETTER_HEADERS.includes(name) && value !== undefined) headers[name] = value;
  }
  if (readHeader(record.headers, IDEMPOTENCY_KEY_HEADER) === undefined) {
    const originalId = readHeader(record.headers, HEADERS.originalMessageId);
    if (originalId !== undefined) headers[IDEMPOTENCY_KEY_HEADER] = originalId;
  }
  let idempotencyKey: string | undefined;
  try {
    idempotencyKey = messageKeyOf(headers, undefined);
  } catch (error) {
    if (!(error instanceof InvalidMessageError)) throw error;
  }
  headers[HEADERS.replayCount] = String((readCount(record.headers, HEADERS.replayCount) ?? 0) + 1);
  headers[HEADERS.replayedAt] = String(now);
  return { topic, record: { key: record.key, value: record.value, headers }, idempotencyKey };
}
