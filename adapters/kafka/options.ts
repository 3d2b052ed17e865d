/**
 * Options of the Kafka source: meaning, unit, default and range in the TSDoc; defaults in one
 * `Readonly<Required<…>>` constant; merged into a copy and validated at construction with errors
 * naming the field and the value.
 */
import { type BackoffPolicy, ConfigurationError, consoleInfoLogger, type Logger } from '../../src';
import { checkBoolean, checkFraction, checkInteger, checkKnownOptions, optionNames } from '../../src/adapter-kit';
import type { GroupConsumerConfig, RecordProducerConfig } from './client';

/** What to do at start about the dead-letter topics of the subscribed topics. */
export type DeadLetterTopicCheck = 'exists' | 'create' | 'none';

/** Options of {@link KafkaSource}. */
export interface KafkaSourceOptions {
  /** Topics to consume (exact names). At least one. */
  readonly topics: readonly string[];
  /**
   * Consumer group id. Offsets are committed for this group. Use it (or the handler name) as the
   * consumer's `name` too, so keys are namespaced per group.
   */
  readonly groupId: string;
  /**
   * Where a group with no committed offset starts: the earliest record (true) or the next one
   * written (false, the kafkajs and Kafka default `auto.offset.reset=latest`). Default false.
   */
  readonly fromBeginning?: boolean;
  /**
   * Consumer settings passed to the client (sessionTimeout, rebalanceTimeout, heartbeatInterval,
   * maxWaitTimeInMs, maxBytesPerPartition, …; names and units of kafkajs). `groupId` is taken from
   * {@link KafkaSourceOptions.groupId}. Default `maxWaitTimeInMs` here is 250 (kafkajs: 5000) so
   * a paused partition resumes quickly; other defaults are the client's.
   */
  readonly consumer?: Omit<GroupConsumerConfig, 'groupId'>;
  /**
   * Settings of the producer that writes dead letters. Default: not idempotent (an idempotent
   * kafkajs producer retries forever, so a dead-letter write could never give up), 5 retries.
   */
  readonly producer?: RecordProducerConfig;
  /**
   * Partitions dispatching a message at the same time (each partition is processed strictly in
   * offset order, one message at a time). Default: the consumer's `concurrency`; never above it.
   * Range 1 … 10 000.
   */
  readonly partitionConcurrency?: number;
  /**
   * Most messages of a partition claimed in one claimer round trip ahead of dispatch
   * (`claimBatch`, `claimMany` when the claimer has it). The adapter claims fewer when handlers
   * are slow, so a claim never waits longer than `preclaimMaxAgeMs` before its handler starts.
   * Default 64; 1 with a claimer that opens one transaction per record (PostgresClaimer
   * `mode: 'transactional'`, `transactionBatch: 'per-record'`), where a value above 1 is refused
   * at construction (`ConfigurationError`): a record claimed ahead would hold an idle transaction.
   * Range 1 … 1000.
   */
  readonly claimBatchSize?: number;
  /**
   * Oldest a claim made ahead of dispatch may be when its handler starts, ms. An older one is
   * released and the message claimed again at dispatch. Keep it at a third of the consumer's
   * `leaseTtlMs` or less: a claim used after its lease ended could meet a newer owner of the
   * key. Default 1000 (fits the default 30 s lease and leases down to 3 s; set it lower for
   * shorter leases). Capped at leaseTtlMs / 3 when the consumer passes its lease length to
   * `start`. Range 1 … 3 600 000.
   */
  readonly preclaimMaxAgeMs?: number;
  /**
   * How often settled offsets are committed, ms. Also committed at rebalance and shutdown; an offset
   * that did not move is committed again every 5 × this (a late commit by a former owner cannot
   * hold the group behind). Default 1000. Range 10 … 600 000.
   */
  readonly commitIntervalMs?: number;
  /** Time allowed for the final commit at shutdown, with retries, ms. Default 5000. Range 1 … 600 000. */
  readonly finalCommitTimeoutMs?: number;
  /**
   * Send group heartbeats every `heartbeatInterval` while messages are in flight, on top of the
   * heartbeats of the client's fetch loop. Default true. Turn off only to test session expiry;
   * `start` then warns unless the consumer's `handlerTimeoutMs` is at most `sessionTimeout`.
   */
  readonly heartbeatWhileProcessing?: boolean;
  /**
   * Fetched but not yet dispatched bytes (record values) a partition may hold before its fetching
   * is paused; resumed below half. Default 4 MiB. Range 1 KiB … 1 GiB.
   */
  readonly maxBufferedBytesPerPartition?: number;
  /**
   * Backoff of the pause after the claim store was unavailable: the first pause is the
   * consumer's `unavailableRequeueDelayMs`, each further consecutive one doubles up to
   * `maxDelayMs`. Default max 30 000 ms, ±20 % jitter.
   */
  readonly unavailableBackoff?: Partial<Pick<BackoffPolicy, 'maxDelayMs' | 'jitter'>>;
  /** Backoff between attempts to write a dead letter. Default 200 ms doubling to 10 s, ±20 % jitter. */
  readonly deadLetterBackoff?: Partial<BackoffPolicy>;
  /** Dead-letter topic of a topic. Default `<topic>.dlq`. */
  readonly deadLetterTopic?: (topic: string) => string;
  /**
   * At start: `exists` (default) fails start with ConfigurationError when a dead-letter topic is
   * missing (fail closed before the first poison message, not after); `create` creates missing
   * ones with the source topic's partition count; `none` checks nothing.
   */
  readonly deadLetterTopicCheck?: DeadLetterTopicCheck;
  /** Timeout of one dead-letter produce request, ms. Default 10 000. Range 100 … 600 000. */
  readonly deadLetterTimeoutMs?: number;
  /**
   * pino-compatible logger. Default: info, warnings and errors as JSON lines on stderr (the
   * consumer's default too), so the group join, the assignment and a wait for another owner's
   * lease are visible without configuration.
   */
  readonly logger?: Logger;
}

/** Options after defaults and validation. */
export interface ResolvedKafkaSourceOptions {
  readonly topics: readonly string[];
  readonly groupId: string;
  readonly fromBeginning: boolean;
  readonly consumer: GroupConsumerConfig;
  readonly producer: RecordProducerConfig;
  /** undefined = the consumer's concurrency. */
  readonly partitionConcurrency: number | undefined;
  readonly claimBatchSize: number;
  readonly preclaimMaxAgeMs: number;
  readonly commitIntervalMs: number;
  readonly finalCommitTimeoutMs: number;
  readonly heartbeatWhileProcessing: boolean;
  readonly heartbeatIntervalMs: number;
  readonly maxBufferedBytesPerPartition: number;
  readonly unavailableBackoff: Readonly<Pick<BackoffPolicy, 'maxDelayMs' | 'jitter'>>;
  readonly deadLetterBackoff: Readonly<BackoffPolicy>;
  readonly deadLetterTopic: (topic: string) => string;
  readonly deadLetterTopicCheck: DeadLetterTopicCheck;
  readonly deadLetterTimeoutMs: number;
  readonly logger: Logger;
}

/** kafkajs defaults of the consumer settings the adapter reads (kafkajs `src/consumer/index.js`). */
export const KAFKAJS_CONSUMER_DEFAULTS = { sessionTimeout: 30_000, rebalanceTimeout: 60_000, heartbeatInterval: 3000 } as const;

/** Defaults of {@link KafkaSourceOptions}. */
export const KAFKA_SOURCE_DEFAULTS: Readonly<
  Required<Omit<KafkaSourceOptions, 'topics' | 'groupId' | 'consumer' | 'producer' | 'partitionConcurrency' | 'logger' | 'unavailableBackoff' | 'deadLetterBackoff'>>
> & {
  readonly maxWaitTimeInMs: number;
  readonly unavailableBackoff: Readonly<Pick<BackoffPolicy, 'maxDelayMs' | 'jitter'>>;
  readonly deadLetterBackoff: Readonly<BackoffPolicy>;
} = {
  fromBeginning: false,
  claimBatchSize: 64,
  preclaimMaxAgeMs: 1000,
  commitIntervalMs: 1000,
  finalCommitTimeoutMs: 5000,
  heartbeatWhileProcessing: true,
  maxBufferedBytesPerPartition: 4 * 1024 * 1024,
  unavailableBackoff: { maxDelayMs: 30_000, jitter: 0.2 },
  deadLetterBackoff: { initialDelayMs: 200, maxDelayMs: 10_000, multiplier: 2, jitter: 0.2 },
  deadLetterTopic: (topic: string) => `${topic}.dlq`,
  deadLetterTopicCheck: 'exists',
  deadLetterTimeoutMs: 10_000,
  maxWaitTimeInMs: 250,
};

/** Every name {@link KafkaSourceOptions} accepts (and its nested objects); any other is refused. */
const KAFKA_SOURCE_OPTION_NAMES = optionNames<KafkaSourceOptions>()([
  'topics',
  'groupId',
  'fromBeginning',
  'consumer',
  'producer',
  'partitionConcurrency',
  'claimBatchSize',
  'preclaimMaxAgeMs',
  'commitIntervalMs',
  'finalCommitTimeoutMs',
  'heartbeatWhileProcessing',
  'maxBufferedBytesPerPartition',
  'unavailableBackoff',
  'deadLetterBackoff',
  'deadLetterTopic',
  'deadLetterTopicCheck',
  'deadLetterTimeoutMs',
  'logger',
]);
const CONSUMER_CONFIG_NAMES = optionNames<Omit<GroupConsumerConfig, 'groupId'>>()([
  'sessionTimeout',
  'rebalanceTimeout',
  'heartbeatInterval',
  'maxWaitTimeInMs',
  'maxBytesPerPartition',
  'maxBytes',
  'minBytes',
  'metadataMaxAge',
  'allowAutoTopicCreation',
  'readUncommitted',
  'rackId',
  'retry',
]);
const PRODUCER_CONFIG_NAMES = optionNames<RecordProducerConfig>()(['allowAutoTopicCreation', 'idempotent', 'maxInFlightRequests', 'retry']);
const UNAVAILABLE_BACKOFF_NAMES = optionNames<Pick<BackoffPolicy, 'maxDelayMs' | 'jitter'>>()(['maxDelayMs', 'jitter']);
const BACKOFF_NAMES = optionNames<BackoffPolicy>()(['initialDelayMs', 'maxDelayMs', 'multiplier', 'jitter']);

/**
 * Merges `options` over the defaults into a new object and validates every field.
 * @throws ConfigurationError naming the field and the value
 */
export function resolveKafkaSourceOptions(options: KafkaSourceOptions): ResolvedKafkaSourceOptions {
  if (!options || typeof options !== 'object') throw new ConfigurationError('Kafka source options are required');
  checkKnownOptions('KafkaSource options', options, KAFKA_SOURCE_OPTION_NAMES);
  checkKnownOptions('KafkaSource options.consumer', options.consumer, CONSUMER_CONFIG_NAMES);
  checkKnownOptions('KafkaSource options.producer', options.producer, PRODUCER_CONFIG_NAMES);
  checkKnownOptions('KafkaSource options.unavailableBackoff', options.unavailableBackoff, UNAVAILABLE_BACKOFF_NAMES);
  checkKnownOptions('KafkaSource options.deadLetterBackoff', options.deadLetterBackoff, BACKOFF_NAMES);
  const topics = options.topics;
  if (!Array.isArray(topics) || topics.length === 0 || topics.some((t) => typeof t !== 'string' || t.length === 0 || t.length > 249)) {
    throw new ConfigurationError(`topics must be a non-empty array of topic names (1–249 characters), got ${JSON.stringify(topics)}`);
  }
  if (new Set(topics).size !== topics.length) throw new ConfigurationError(`topics must not repeat a name, got ${JSON.stringify(topics)}`);
  if (typeof options.groupId !== 'string' || options.groupId.length === 0) {
    throw new ConfigurationError(`groupId must be a non-empty string, got ${JSON.stringify(options.groupId)}`);
  }
  const d = KAFKA_SOURCE_DEFAULTS;
  const consumer: GroupConsumerConfig = { maxWaitTimeInMs: d.maxWaitTimeInMs, ...stripUndefined(options.consumer ?? {}), groupId: options.groupId };
  const sessionTimeout = consumer.sessionTimeout ?? KAFKAJS_CONSUMER_DEFAULTS.sessionTimeout;
  const heartbeatIntervalMs = consumer.heartbeatInterval ?? KAFKAJS_CONSUMER_DEFAULTS.heartbeatInterval;
  checkInteger('consumer.sessionTimeout', sessionTimeout, 1, 3_600_000);
  checkInteger('consumer.heartbeatInterval', heartbeatIntervalMs, 1, 3_600_000);
  if (heartbeatIntervalMs >= sessionTimeout) {
    throw new ConfigurationError(`consumer.heartbeatInterval (${heartbeatIntervalMs}) must be below consumer.sessionTimeout (${sessionTimeout}); about a third of it is usual`);
  }
  if (consumer.rebalanceTimeout !== undefined) checkInteger('consumer.rebalanceTimeout', consumer.rebalanceTimeout, 1, 3_600_000);
  checkInteger('consumer.maxWaitTimeInMs', consumer.maxWaitTimeInMs, 0, 3_600_000);

  const resolved: ResolvedKafkaSourceOptions = {
    topics: [...topics],
    groupId: options.groupId,
    fromBeginning: options.fromBeginning ?? d.fromBeginning,
    consumer,
    producer: { allowAutoTopicCreation: false, ...stripUndefined(options.producer ?? {}) },
    partitionConcurrency: options.partitionConcurrency,
    claimBatchSize: options.claimBatchSize ?? d.claimBatchSize,
    preclaimMaxAgeMs: options.preclaimMaxAgeMs ?? d.preclaimMaxAgeMs,
    commitIntervalMs: options.commitIntervalMs ?? d.commitIntervalMs,
    finalCommitTimeoutMs: options.finalCommitTimeoutMs ?? d.finalCommitTimeoutMs,
    heartbeatWhileProcessing: options.heartbeatWhileProcessing ?? d.heartbeatWhileProcessing,
    heartbeatIntervalMs,
    maxBufferedBytesPerPartition: options.maxBufferedBytesPerPartition ?? d.maxBufferedBytesPerPartition,
    unavailableBackoff: { ...d.unavailableBackoff, ...stripUndefined(options.unavailableBackoff ?? {}) },
    deadLetterBackoff: { ...d.deadLetterBackoff, ...stripUndefined(options.deadLetterBackoff ?? {}) },
    deadLetterTopic: options.deadLetterTopic ?? d.deadLetterTopic,
    deadLetterTopicCheck: options.deadLetterTopicCheck ?? d.deadLetterTopicCheck,
    deadLetterTimeoutMs: options.deadLetterTimeoutMs ?? d.deadLetterTimeoutMs,
    logger: options.logger ?? consoleInfoLogger,
  };
  if (resolved.partitionConcurrency !== undefined) checkInteger('partitionConcurrency', resolved.partitionConcurrency, 1, 10_000);
  checkInteger('claimBatchSize', resolved.claimBatchSize, 1, 1000);
  checkInteger('preclaimMaxAgeMs', resolved.preclaimMaxAgeMs, 1, 3_600_000);
  checkInteger('commitIntervalMs', resolved.commitIntervalMs, 10, 600_000);
  checkInteger('finalCommitTimeoutMs', resolved.finalCommitTimeoutMs, 1, 600_000);
  checkInteger('maxBufferedBytesPerPartition', resolved.maxBufferedBytesPerPartition, 1024, 1024 ** 3);
  checkInteger('unavailableBackoff.maxDelayMs', resolved.unavailableBackoff.maxDelayMs, 0, 3_600_000);
  checkFraction('unavailableBackoff.jitter', resolved.unavailableBackoff.jitter);
  checkInteger('deadLetterBackoff.initialDelayMs', resolved.deadLetterBackoff.initialDelayMs, 0, 3_600_000);
  checkInteger('deadLetterBackoff.maxDelayMs', resolved.deadLetterBackoff.maxDelayMs, resolved.deadLetterBackoff.initialDelayMs, 3_600_000);
  if (typeof resolved.deadLetterBackoff.multiplier !== 'number' || !(resolved.deadLetterBackoff.multiplier >= 1)) {
    throw new ConfigurationError(`deadLetterBackoff.multiplier must be ≥ 1, got ${String(resolved.deadLetterBackoff.multiplier)}`);
  }
  checkFraction('deadLetterBackoff.jitter', resolved.deadLetterBackoff.jitter);
  checkInteger('deadLetterTimeoutMs', resolved.deadLetterTimeoutMs, 100, 600_000);
  checkBoolean('fromBeginning', resolved.fromBeginning);
  checkBoolean('heartbeatWhileProcessing', resolved.heartbeatWhileProcessing);
  if (typeof resolved.deadLetterTopic !== 'function') throw new ConfigurationError('deadLetterTopic must be a function (topic) => string');
  if (!['exists', 'create', 'none'].includes(resolved.deadLetterTopicCheck)) {
    throw new ConfigurationError(`deadLetterTopicCheck must be 'exists', 'create' or 'none', got ${JSON.stringify(resolved.deadLetterTopicCheck)}`);
  }
  for (const topic of resolved.topics) {
    const dlq = resolved.deadLetterTopic(topic);
    if (typeof dlq !== 'string' || dlq.length === 0 || dlq.length > 249) {
      throw new ConfigurationError(`deadLetterTopic("${topic}") must return a topic name (1–249 characters), got ${JSON.stringify(dlq)}`);
    }
    if (resolved.topics.includes(dlq)) throw new ConfigurationError(`deadLetterTopic("${topic}") is "${dlq}", a topic this source consumes`);
  }
  return resolved;
}


function stripUndefined<T extends object>(value: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(value)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}
