/**
 * Producer helpers that put the idempotency key where the consumer's default key derivation
 * reads it: the `idempotency-key` record header.
 */
import type { Kafka, Message, Producer, RecordMetadata } from 'kafkajs';
import { ConfigurationError, IDEMPOTENCY_KEY_HEADER } from '../../src';
import { checkKnownOptions, describeType, optionNames, validatePublishedKey } from '../../src/adapter-kit';
import type { KafkaClient, KafkaHeaders, RecordProducer } from './client';

/** A record to produce with its idempotency key. */
export interface KeyedMessage {
  /** The effect's identity: records with the same key apply their effect once. Non-empty, within the core's key byte limit. */
  readonly idempotencyKey: string;
  /** Record value. */
  readonly value: Buffer | string | null;
  /**
   * Record key (partitioning). Default: the idempotency key, so every copy of one key lands in
   * the same partition, in order. Pass `null` for no key (round-robin partitioning).
   */
  readonly key?: Buffer | string | null;
  /** Extra headers; an `idempotency-key` among them is replaced. */
  readonly headers?: KafkaHeaders;
  readonly partition?: number;
  /** Record timestamp, Unix ms as a decimal string. */
  readonly timestamp?: string;
}

const KEYED_MESSAGE_FIELDS = optionNames<KeyedMessage>()(['idempotencyKey', 'value', 'key', 'headers', 'partition', 'timestamp']);

/**
 * The kafkajs `Message` for `message`: headers copied, `idempotency-key` set, record key
 * defaulting to the idempotency key. Does not mutate its input.
 * @throws InvalidKeyError when the consumer would dead-letter the idempotency key as `invalid_key`
 *   (empty, not a string, NUL, a lone surrogate, or a key over 512 bytes as the consumer derives it
 *   from the header's bytes: see `validatePublishedKey`)
 * @throws ConfigurationError for a field `KeyedMessage` does not have (a misspelled
 *   `idempotencyKey` is refused, never sent without the header)
 */
export function withIdempotencyKey(message: KeyedMessage): Message {
  checkKnownOptions('KeyedProducer message', message, KEYED_MESSAGE_FIELDS);
  validatePublishedKey(message.idempotencyKey, 'bytes');
  if (message.value !== null && typeof message.value !== 'string' && !Buffer.isBuffer(message.value)) {
    throw new ConfigurationError(`KeyedProducer message value must be a Buffer, a string or null (serialise objects first, e.g. JSON.stringify), got ${describeType(message.value)}`);
  }
  const headers: Record<string, Buffer | string | (Buffer | string)[] | undefined> = {};
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    if (value !== undefined && name !== IDEMPOTENCY_KEY_HEADER) headers[name] = Array.isArray(value) ? [...(value as Array<Buffer | string>)] : (value as Buffer | string);
  }
  headers[IDEMPOTENCY_KEY_HEADER] = message.idempotencyKey;
  const out: Message = { key: message.key === undefined ? message.idempotencyKey : message.key, value: message.value, headers };
  if (message.partition !== undefined) out.partition = message.partition;
  if (message.timestamp !== undefined) out.timestamp = message.timestamp;
  return out;
}

/**
 * A kafkajs producer that sets the `idempotency-key` header on every record.
 *
 * Prefer a kafkajs producer created with `idempotent: true`: the broker then drops the
 * duplicates of the producer's own retries, and this header covers the rest (an application
 * that sends the same business message twice, a replay from the dead-letter topic).
 *
 * ```ts
 * const producer = new KeyedProducer({ kafka }, { idempotent: true });
 * await producer.connect();
 * await producer.send('payments', [{ idempotencyKey: 'payment-42', value: JSON.stringify(body) }]);
 * ```
 */
export class KeyedProducer {
  private readonly producer: Producer | undefined;
  private readonly recordProducer: RecordProducer | undefined;
  private readonly owned: boolean;
  private readonly injectContext: ((headers: Record<string, unknown>) => Record<string, unknown>) | undefined;

  /**
   * @param dependencies `{ producer }` (a kafkajs producer the caller owns and connects),
   *   `{ kafka }` (a producer is created with `config`, connected by {@link KeyedProducer.connect}),
   *   or `{ client }` (a {@link KafkaClient}, e.g. `platformaticClient(...)`: a producer is
   *   created from it, connected by {@link KeyedProducer.connect}; `config` is not used)
   * @param config kafkajs producer settings when created here (passed to kafkajs as they are)
   * @param options `injectContext`: adds trace context to each record's headers before it is sent
   *   (for example `injectTraceHeaders` from `twophase/otel`); the `idempotency-key` header is kept
   * @throws ConfigurationError for missing dependencies or an unknown name in `dependencies` or `options`
   */
  constructor(
    dependencies: { readonly producer: Producer } | { readonly kafka: Kafka } | { readonly client: KafkaClient },
    config: Parameters<Kafka['producer']>[0] = {},
    options: { readonly injectContext?: (headers: Record<string, unknown>) => Record<string, unknown> } = {},
  ) {
    if (!dependencies || typeof dependencies !== 'object') throw new ConfigurationError('KeyedProducer dependencies are required: { producer }, { kafka } or { client }');
    checkKnownOptions('KeyedProducer dependencies', dependencies, ['producer', 'kafka', 'client']);
    checkKnownOptions('KeyedProducer options', options, ['injectContext']);
    this.injectContext = options.injectContext;
    if ('client' in dependencies) {
      this.recordProducer = dependencies.client.producer({ idempotent: true });
      this.owned = true;
    } else if ('producer' in dependencies) {
      this.producer = dependencies.producer;
      this.owned = false;
    } else {
      this.producer = dependencies.kafka.producer(config);
      this.owned = true;
    }
  }

  /** Connects a producer this helper created; a no-op for one passed in. */
  async connect(): Promise<void> {
    if (this.owned) await (this.recordProducer ?? this.producer)!.connect();
  }

  /** Disconnects a producer this helper created; a no-op for one passed in. */
  async disconnect(): Promise<void> {
    if (this.owned) await (this.recordProducer ?? this.producer)!.disconnect();
  }

  /**
   * Produces `messages` to `topic` and resolves when the broker acknowledged them (`acks`
   * default -1: all in-sync replicas).
   * @throws InvalidKeyError before anything is sent when a message's idempotency key is invalid
   * @throws ConfigurationError before anything is sent when `messages` is not an array, a message
   *   has an unknown field, or `options` has an unknown name
   * @throws the kafkajs error when the broker refused or did not answer
   */
  send(topic: string, messages: readonly KeyedMessage[], options: { readonly acks?: number; readonly timeoutMs?: number } = {}): Promise<RecordMetadata[]> {
    if (!Array.isArray(messages)) {
      throw new ConfigurationError(`KeyedProducer.send(topic, messages): messages must be an array of { idempotencyKey, value, ... }, got ${describeType(messages)}`);
    }
    checkKnownOptions('KeyedProducer.send options', options, ['acks', 'timeoutMs']);
    const inject = this.injectContext;
    const records = messages.map((m) => {
      const record = withIdempotencyKey(m);
      if (!inject) return record;
      const headers = (record.headers ?? {}) as Record<string, unknown>;
      return { ...record, headers: { ...inject({ ...headers }), [IDEMPOTENCY_KEY_HEADER]: headers[IDEMPOTENCY_KEY_HEADER] } as typeof record.headers };
    });
    if (this.recordProducer) {
      return this.recordProducer
        .send({ topic, records: records.map((r) => ({ ...r, key: r.key ?? null, value: r.value ?? null, headers: r.headers as KafkaHeaders | undefined })), acks: options.acks ?? -1, timeoutMs: options.timeoutMs })
        .then((sent) => sent.map((m) => ({ topicName: m.topic, partition: m.partition, errorCode: 0, baseOffset: m.baseOffset })));
    }
    return this.producer!.send({ topic, messages: records, acks: options.acks ?? -1, timeout: options.timeoutMs });
  }
}
