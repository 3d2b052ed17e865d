/**
 * Helpers shared by the Kafka integration suites: clients, unique topics and groups created
 * and deleted per test, fast group settings, an effect log, a configurable test consumer, and
 * waiting on an outcome instead of sleeping.
 */
import { randomBytes } from 'node:crypto';
import { type Admin, Kafka, logLevel, Partitioners, type Producer } from 'kafkajs';
import {
  ack,
  ConsumerBase,
  type ConsumerEvent,
  type ConsumerOptions,
  type Disposition,
  type HandlerContext,
  type Message,
  silentLogger,
} from '../../../../src';
import { type KafkaClient, KafkaSource, type KafkaSourceEvent, type KafkaSourceOptions, KeyedProducer, type KeyedMessage } from '../../../../adapters/kafka';
import { SERVICES } from '../../../support/services';
import { createTopicsWithLeaders } from '../../../../adapters/kafka/kafkajs-client';
import { RedisFixture } from './redis-fixture';

/** The dev broker (`npm run kafka:start`). */
export const BROKERS = [`${SERVICES.kafka.host}:${SERVICES.kafka.port}`];

/**
 * Group settings that keep joins and evictions fast on one node: the broker's minimum session
 * timeout (`group.min.session.timeout.ms`, 6000 by default), a heartbeat every 500 ms (members
 * learn of a rebalance within that), and short fetch waits.
 */
export const FAST_GROUP = { sessionTimeout: 6000, rebalanceTimeout: 8000, heartbeatInterval: 500, maxWaitTimeInMs: 100 } as const;

/** A kafkajs client with logs off and quick retries. */
export function makeKafka(clientId = 'twophase-test'): Kafka {
  return new Kafka({ clientId, brokers: BROKERS, logLevel: logLevel.NOTHING, retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2000 } });
}

/** A unique name for one test's topic or group. */
export function unique(label: string): string {
  return `tp-${label}-${randomBytes(4).toString('hex')}`;
}

/** Topics (with their dead-letter topics) created for one suite and deleted at its end. */
export class TopicFixture {
  private readonly created = new Set<string>();
  private admin: Admin | undefined;

  constructor(private readonly kafka: Kafka) {}

  async connect(): Promise<Admin> {
    if (!this.admin) {
      this.admin = this.kafka.admin();
      await this.admin.connect();
    }
    return this.admin;
  }

  /** Creates `topic` and `<topic>.dlq` with `partitions` partitions each; returns the topic name. */
  async create(label: string, partitions: number): Promise<string> {
    const admin = await this.connect();
    const topic = unique(label);
    this.created.add(topic).add(`${topic}.dlq`);
    await createTopicsWithLeaders(admin, [{ topic, numPartitions: partitions }, { topic: `${topic}.dlq`, numPartitions: partitions }]);
    return topic;
  }

  /** The group's committed offsets of `topic`, by partition ("-1" when none). */
  async committed(groupId: string, topic: string): Promise<Record<number, string>> {
    const admin = await this.connect();
    const [entry] = await admin.fetchOffsets({ groupId, topics: [topic] });
    return Object.fromEntries((entry?.partitions ?? []).map((p) => [p.partition, p.offset]));
  }

  /** High watermarks of `topic`, by partition. */
  async highWatermarks(topic: string): Promise<Record<number, string>> {
    const admin = await this.connect();
    return Object.fromEntries((await admin.fetchTopicOffsets(topic)).map((p) => [p.partition, p.high]));
  }

  /** True once the group committed every partition of `topic` up to its high watermark. */
  async fullyCommitted(groupId: string, topic: string): Promise<boolean> {
    const [committed, high] = await Promise.all([this.committed(groupId, topic), this.highWatermarks(topic)]);
    return Object.entries(high).every(([p, h]) => committed[Number(p)] === h);
  }

  /** Deletes every topic created and disconnects. */
  async destroy(): Promise<void> {
    const admin = this.admin;
    this.admin = undefined;
    if (!admin) return;
    try {
      if (this.created.size > 0) await admin.deleteTopics({ topics: [...this.created], timeout: 10_000 });
    } finally {
      this.created.clear();
      await admin.disconnect();
    }
  }
}

/** A connected producer of records with the `idempotency-key` header. */
export async function keyedProducer(kafka: Kafka): Promise<{ producer: KeyedProducer; raw: Producer; close: () => Promise<void> }> {
  const raw = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, idempotent: true });
  await raw.connect();
  return { producer: new KeyedProducer({ producer: raw }), raw, close: () => raw.disconnect() };
}

/** JSON body of the test messages. */
export interface TestBody {
  readonly id: string;
  readonly seq: number;
  readonly poison?: boolean;
}

/** `count` keyed JSON messages `<prefix>-<i>`. */
export function messages(prefix: string, count: number, extra: Partial<TestBody> = {}): KeyedMessage[] {
  return Array.from({ length: count }, (_, i) => ({ idempotencyKey: `${prefix}-${i}`, value: JSON.stringify({ id: `${prefix}-${i}`, seq: i, ...extra }) }));
}

/** In-process record of applied effects: one entry per application, by key. */
export class EffectLog {
  readonly applied = new Map<string, number>();
  readonly order: Array<{ key: string; partition: number; offset: string; seq: number }> = [];

  apply(key: string, partition: number, offset: string, seq: number): void {
    this.applied.set(key, (this.applied.get(key) ?? 0) + 1);
    this.order.push({ key, partition, offset, seq });
  }

  /** Keys applied more than once. */
  duplicated(): string[] {
    return [...this.applied].filter(([, n]) => n > 1).map(([k]) => k);
  }
}

/** What a test handler gets. */
export type TestHandler = (message: Message<TestBody>, context: HandlerContext) => Promise<Disposition>;

/** A consumer whose handler is a function; records every event for assertions. */
export class TestConsumer extends ConsumerBase<TestBody> {
  readonly events: ConsumerEvent[] = [];

  constructor(
    options: Omit<ConsumerOptions, 'observers' | 'logger'> & { readonly logger?: ConsumerOptions['logger'] },
    private readonly handler: TestHandler,
  ) {
    super({ logger: silentLogger, ...options, observers: [{ onEvent: (event) => void this.events.push(event) }] });
  }

  handle(message: Message<TestBody>, context: HandlerContext): Promise<Disposition> {
    return this.handler(message, context);
  }

  count(type: ConsumerEvent['type']): number {
    return this.events.filter((e) => e.type === type).length;
  }
}

/** A handler applying the effect to `log` at once. */
export function applying(log: EffectLog): TestHandler {
  return async (message, context) => {
    log.apply(message.key, Number(context.metadata.attributes?.partition), String(context.metadata.attributes?.offset), message.body.seq);
    return ack();
  };
}

/** A source with the fast group settings, reading from the beginning, on a kafkajs `Kafka` or any {@link KafkaClient} (a row of support/clients.ts). */
export function fastSource(kafka: Kafka | KafkaClient, options: Omit<KafkaSourceOptions, 'fromBeginning'> & { readonly fromBeginning?: boolean }): KafkaSource {
  return new KafkaSource(
    typeof (kafka as Kafka).logger === 'function' ? { kafka: kafka as Kafka } : { client: kafka as KafkaClient },
    { fromBeginning: true, commitIntervalMs: 200, logger: silentLogger, ...options, consumer: { ...FAST_GROUP, ...(options.consumer ?? {}) } },
  );
}

/** Records a source's events. */
export function recordEvents(source: KafkaSource): KafkaSourceEvent[] {
  const events: KafkaSourceEvent[] = [];
  source.on((event) => void events.push(event));
  return events;
}

/**
 * Watches a source's events and records every commit of a partition that was not in the
 * member's assignment at that moment (the S08 hazard). Returns the list of violations.
 */
export function ownershipGuard(source: KafkaSource): string[] {
  const violations: string[] = [];
  let owned = new Set<string>();
  source.on((event) => {
    if (event.type === 'group_join') {
      owned = new Set(Object.entries(event.assignment).flatMap(([topic, partitions]) => partitions.map((p) => `${topic}/${p}`)));
    } else if (event.type === 'committed') {
      for (const o of event.offsets) if (!owned.has(`${o.topic}/${o.partition}`)) violations.push(`committed ${o.topic}/${o.partition}@${o.offset} while owning ${[...owned].join(',')}`);
    }
  });
  return violations;
}

/**
 * What every real-broker Kafka suite shares: a client, its topics and Redis claimers, and the
 * consumers it starts, with the hooks that stop the consumers after each test and delete the
 * topics and Redis keys after the suite. Call it inside the suite's describe block.
 */
export function kafkaSuite(clientId: string): { kafka: Kafka; topics: TopicFixture; redis: RedisFixture; consumers: TestConsumer[] } {
  const kafka = makeKafka(clientId);
  const topics = new TopicFixture(kafka);
  const redis = new RedisFixture();
  const consumers: TestConsumer[] = [];
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.stop()));
  });
  afterAll(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.stop()));
    await topics.destroy();
    await redis.destroy();
  });
  return { kafka, topics, redis, consumers };
}

