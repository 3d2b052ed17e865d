/**
 * The outbox relay's Kafka side: produces outbox records with `acks: -1` (all in-sync replicas)
 * through an idempotent producer (`idempotent: true`, `maxInFlightRequests: 1`, as KIP-98
 * requires of an idempotent producer), the outbox id in the `idempotency-key` header, the record
 * key, partition, headers and value as staged. The producer is kafkajs's (`{ kafka }`,
 * `{ producer }`) or one made by a {@link KafkaClient} (`{ client }`, e.g. `platformaticClient(…)`).
 *
 * The idempotent producer has one request in flight per broker, so publishes made in the same
 * event-loop turn (the relay publishes up to `keyConcurrency` keys at once) are coalesced: into one
 * `sendBatch` request on kafkajs, into one send per topic through a client; each publish resolves
 * or fails with its request. Per-key order is unaffected: the relay never has two publishes of one
 * key in flight.
 */
import type { Kafka, Message, Producer } from 'kafkajs';
import type { KafkaClient, ProducedRecord, RecordProducer } from './client';
import { ConfigurationError, IDEMPOTENCY_KEY_HEADER, type KafkaOutboxDestination, TimeoutError } from '../../src';
import { checkKnownOptions, describeType, withDeadline, type OutboxPublisher, type OutboxRecord, type PublishFailureClass } from '../../src/adapter-kit';

/** Options of a {@link KafkaOutboxPublisher}. */
export interface KafkaOutboxPublisherOptions {
  /** Deadline of one produce, ms; past it the publish counts as failed (it may still land: the retry carries the same id). Default 30 000. [100, 600 000]. */
  readonly publishTimeoutMs?: number;
  /**
   * Adds trace context to each record's headers before it is sent (`injectTraceHeaders` from
   * `twophase/otel`); the `idempotency-key` header is kept.
   */
  readonly injectContext?: (headers: Record<string, unknown>) => Record<string, unknown>;
}

/**
 * An {@link OutboxPublisher} for Kafka.
 *
 * ```ts
 * const relay = new OutboxRelay({ store, publisher: new KafkaOutboxPublisher({ kafka }) });
 * ```
 */
export class KafkaOutboxPublisher implements OutboxPublisher {
  readonly system = 'kafka' as const;
  /** kafkajs's producer (`{ kafka }`, `{ producer }`), or undefined with `{ client }`. */
  private readonly producer: Producer | undefined;
  /** The client's producer (`{ client }`), or undefined. */
  private readonly recordProducer: RecordProducer | undefined;
  private readonly owned: boolean;
  private readonly publishTimeoutMs: number;
  private readonly injectContext: KafkaOutboxPublisherOptions['injectContext'];
  /** Publishes gathered in the current turn, sent together when it ends. */
  private batch: { id: string; topic: string; message: Message; resolve: () => void; reject: (error: unknown) => void }[] | undefined;

  /**
   * @param dependencies `{ kafka }` (a kafkajs `Kafka`: an idempotent producer is created,
   *   connected by `start()`, disconnected by `close()`), `{ client }` (a {@link KafkaClient}, e.g.
   *   `platformaticClient(…)` or `kafkajsClient(kafka)`: the same, through the client) or
   *   `{ producer }` (a kafkajs producer of yours, already connected; create it with
   *   `idempotent: true, maxInFlightRequests: 1`)
   * @throws ConfigurationError for missing dependencies, an unknown name or an invalid value
   */
  constructor(dependencies: { readonly kafka: Kafka } | { readonly producer: Producer } | { readonly client: KafkaClient }, options: KafkaOutboxPublisherOptions = {}) {
    if (!dependencies || typeof dependencies !== 'object') throw new ConfigurationError(`KafkaOutboxPublisher needs { kafka }, { client } or { producer }, got ${describeType(dependencies)}`);
    checkKnownOptions('KafkaOutboxPublisher dependencies', dependencies, ['kafka', 'producer', 'client']);
    checkKnownOptions('KafkaOutboxPublisher options', options, ['publishTimeoutMs', 'injectContext']);
    const timeout = options.publishTimeoutMs ?? 30_000;
    if (!Number.isInteger(timeout) || timeout < 100 || timeout > 600_000) throw new ConfigurationError(`publishTimeoutMs must be an integer in [100, 600000], got ${describeType(timeout)}`);
    if (options.injectContext !== undefined && typeof options.injectContext !== 'function') throw new ConfigurationError('injectContext must be a function');
    this.publishTimeoutMs = timeout;
    this.injectContext = options.injectContext;
    if ('producer' in dependencies && dependencies.producer) {
      this.producer = dependencies.producer;
      this.owned = false;
    } else if ('kafka' in dependencies && dependencies.kafka) {
      this.producer = dependencies.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
      this.owned = true;
    } else if ('client' in dependencies && dependencies.client) {
      if (typeof dependencies.client.producer !== 'function') throw new ConfigurationError(`KafkaOutboxPublisher { client } must be a KafkaClient (kafkajsClient(…) or platformaticClient(…)), got ${describeType(dependencies.client)}`);
      this.recordProducer = dependencies.client.producer({ idempotent: true, maxInFlightRequests: 1 });
      this.owned = true;
    } else throw new ConfigurationError('KafkaOutboxPublisher needs { kafka }, { client } or { producer }');
  }

  async start(): Promise<void> {
    if (!this.owned) return;
    await (this.recordProducer ?? this.producer!).connect();
  }

  async close(): Promise<void> {
    if (!this.owned) return;
    await (this.recordProducer ?? this.producer!).disconnect();
  }

  /**
   * Produces `record` and resolves once the broker acknowledged it (`acks: -1`).
   * @throws TimeoutError past `publishTimeoutMs`; the client's error when the broker refused it
   */
  publish(record: OutboxRecord): Promise<void> {
    const destination = record.destination as KafkaOutboxDestination;
    let headers: Record<string, unknown> = { ...record.headers };
    if (this.injectContext) headers = this.injectContext(headers);
    headers[IDEMPOTENCY_KEY_HEADER] = record.id;
    const message: Message = {
      key: destination.key ?? null,
      value: record.body,
      headers: headers as Record<string, string>,
      ...(destination.partition === undefined ? {} : { partition: destination.partition }),
    };
    return new Promise<void>((resolve, reject) => {
      if (!this.batch) {
        this.batch = [];
        setImmediate(() => this.flush());
      }
      this.batch.push({ id: record.id, topic: destination.topic, message, resolve, reject });
    });
  }

  /**
   * Sends the turn's publishes as one request (messages grouped by topic, in call order), under
   * one `publishTimeoutMs` deadline for the request (set in the turn of the publishes).
   */
  private flush(): void {
    const batch = this.batch ?? [];
    this.batch = undefined;
    const byTopic = new Map<string, Message[]>();
    for (const entry of batch) {
      const list = byTopic.get(entry.topic);
      if (list) list.push(entry.message);
      else byTopic.set(entry.topic, [entry.message]);
    }
    const topics = [...byTopic.keys()].join(', ');
    const what = `produce of ${batch.length === 1 ? `outbox message ${batch[0]!.id}` : `${batch.length} outbox messages`} to ${topics}`;
    const sent: Promise<unknown> = this.recordProducer
      ? Promise.all(
          [...byTopic].map(([topic, messages]) =>
            this.recordProducer!.send({ topic, records: messages as ProducedRecord[], acks: -1, timeoutMs: this.publishTimeoutMs }),
          ),
        )
      : this.producer!.sendBatch({ topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })), acks: -1, timeout: this.publishTimeoutMs });
    withDeadline(sent, this.publishTimeoutMs, what).then(
      () => batch.forEach((e) => e.resolve()),
      (error: unknown) => batch.forEach((e) => e.reject(error)),
    );
  }

  /**
   * kafkajs marks errors `retriable` (and the client port marks @platformatic/kafka's refusals the
   * same way); a non-retriable one (a record too large, an invalid topic) is dead at once.
   */
  classify(error: unknown): PublishFailureClass {
    if (error instanceof TimeoutError) return { reason: 'timeout', permanent: false };
    const e = error as { name?: unknown; retriable?: unknown; type?: unknown } | null;
    if (e && typeof e.type === 'string') {
      const permanent = e.retriable === false && ['MESSAGE_TOO_LARGE', 'INVALID_TOPIC_EXCEPTION', 'RECORD_LIST_TOO_LARGE', 'INVALID_RECORD'].includes(e.type);
      return { reason: e.type.toLowerCase(), permanent };
    }
    return { reason: 'publish_failed', permanent: false };
  }
}
