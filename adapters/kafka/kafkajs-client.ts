/**
 * Binds the adapter's {@link KafkaClient} interface to kafkajs 2.x. The only file of the adapter
 * that touches kafkajs' API surface.
 *
 * kafkajs facts this binding relies on (kafkajs 2.2.4 source, `src/consumer/*.js`):
 * - `run({ autoCommit: false, eachBatchAutoResolve: false })`: the fetch position moves only when
 *   `resolveOffset` is called, and nothing is committed unless asked (runner.js, offsetManager).
 * - The eachBatch payload's `commitOffsetsIfNecessary(offsets)` calls the consumer group's
 *   `commitOffsets` once, reading the member id and generation at call time. `consumer.commitOffsets`
 *   goes through a retrier whose later attempts may run after a rebalance with a newer generation
 *   (kafkajs issue #1046), and silently does nothing once the consumer is stopping: it is not used.
 * - `GROUP_JOIN` is emitted synchronously after SyncGroup, before the first fetch of the new
 *   generation; `REBALANCING` when the fetch loop caught a rebalance error, before it rejoins.
 * - `disconnect()` stops the fetch loop, sends LeaveGroup and closes the connections.
 */
import type { Admin, Consumer, EachBatchPayload, ICustomPartitioner, Kafka, Producer } from 'kafkajs';
import type {
  ClusterAdmin,
  GroupDescription,
  FetchedBatch,
  GroupConsumer,
  KafkaClient,
  ProducedRecordMetadata,
  RecordProducer,
  TopicPartition,
  TopicPartitionOffset,
} from './client';

/** Wraps a kafkajs `Kafka` instance (which the caller creates and configures) as a {@link KafkaClient}. */
export function kafkajsClient(kafka: Kafka): KafkaClient {
  return {
    consumer: (config) => new KafkaJsGroupConsumer(kafka.consumer({ ...config, retry: config.retry as never })),
    // kafkajs 2 warns about its default partitioner for a producer created without one; the
    // partitioner it names is the one passed here, so nothing changes but the warning.
    // kafkajs is loaded here, not at import: twophase/kafka also runs on @platformatic/kafka alone.
    producer: (config) => new KafkaJsProducer(kafka.producer({ createPartitioner: defaultPartitioner(), ...(config ?? {}), retry: config?.retry as never })),
    admin: () => new KafkaJsAdmin(kafka.admin()),
  };
}

/** kafkajs's default partitioner, from the kafkajs the caller's `Kafka` instance comes from. */
function defaultPartitioner(): ICustomPartitioner {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require('kafkajs') as typeof import('kafkajs')).Partitioners.DefaultPartitioner;
}

function byTopic(partitions: readonly TopicPartition[]): Array<{ topic: string; partitions: number[] }> {
  const grouped = new Map<string, number[]>();
  for (const { topic, partition } of partitions) {
    const list = grouped.get(topic);
    if (list) list.push(partition);
    else grouped.set(topic, [partition]);
  }
  return [...grouped].map(([topic, list]) => ({ topic, partitions: list }));
}

class KafkaJsGroupConsumer implements GroupConsumer {
  constructor(private readonly consumer: Consumer) {}

  connect(): Promise<void> {
    return this.consumer.connect();
  }

  subscribe(subscription: { readonly topics: readonly string[]; readonly fromBeginning: boolean }): Promise<void> {
    return this.consumer.subscribe({ topics: [...subscription.topics], fromBeginning: subscription.fromBeginning });
  }

  run(eachBatch: (batch: FetchedBatch) => Promise<void>): Promise<void> {
    return this.consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 1,
      eachBatch: (payload) => eachBatch(toFetchedBatch(payload)),
    });
  }

  pause(partitions: readonly TopicPartition[]): void {
    if (partitions.length > 0) this.consumer.pause(byTopic(partitions));
  }

  resume(partitions: readonly TopicPartition[]): void {
    if (partitions.length > 0) this.consumer.resume(byTopic(partitions));
  }

  paused(): ReadonlyArray<{ readonly topic: string; readonly partitions: readonly number[] }> {
    return this.consumer.paused();
  }

  disconnect(): Promise<void> {
    return this.consumer.disconnect();
  }

  onGroupJoin(listener: (event: { memberId: string; assignment: Record<string, number[]> }) => void): () => void {
    return this.consumer.on(this.consumer.events.GROUP_JOIN, (event) => listener({ memberId: event.payload.memberId, assignment: event.payload.memberAssignment }));
  }

  onRebalancing(listener: () => void): () => void {
    return this.consumer.on(this.consumer.events.REBALANCING, () => listener());
  }

  onCrash(listener: (error: Error, restart: boolean) => void): () => void {
    return this.consumer.on(this.consumer.events.CRASH, (event) => listener(event.payload.error, event.payload.restart));
  }
}

function toFetchedBatch(payload: EachBatchPayload): FetchedBatch {
  const { batch } = payload;
  return {
    topic: batch.topic,
    partition: batch.partition,
    highWatermark: batch.highWatermark,
    messages: batch.messages,
    resolveOffset: (offset) => payload.resolveOffset(offset),
    heartbeat: () => payload.heartbeat(),
    commit: (offsets: readonly TopicPartitionOffset[]) =>
      payload.commitOffsetsIfNecessary({
        topics: byTopic(offsets).map(({ topic, partitions }) => ({
          topic,
          partitions: partitions.map((partition) => ({ partition, offset: offsets.find((o) => o.topic === topic && o.partition === partition)!.offset })),
        })),
      }),
    isRunning: () => payload.isRunning(),
    isStale: () => payload.isStale(),
  };
}

class KafkaJsProducer implements RecordProducer {
  constructor(private readonly producer: Producer) {}

  connect(): Promise<void> {
    return this.producer.connect();
  }

  async send(request: Parameters<RecordProducer['send']>[0]): Promise<ProducedRecordMetadata[]> {
    const result = await this.producer.send({
      topic: request.topic,
      acks: request.acks ?? -1,
      timeout: request.timeoutMs,
      messages: request.records.map((r) => ({
        key: r.key ?? null,
        value: r.value,
        partition: r.partition,
        timestamp: r.timestamp,
        headers: r.headers as Record<string, Buffer | string | (Buffer | string)[] | undefined> | undefined,
      })),
    });
    return result.map((m) => ({ topic: m.topicName, partition: m.partition, baseOffset: m.baseOffset }));
  }

  disconnect(): Promise<void> {
    return this.producer.disconnect();
  }
}

class KafkaJsAdmin implements ClusterAdmin {
  constructor(private readonly admin: Admin) {}

  connect(): Promise<void> {
    return this.admin.connect();
  }

  disconnect(): Promise<void> {
    return this.admin.disconnect();
  }

  listTopics(): Promise<string[]> {
    return this.admin.listTopics();
  }

  createTopics(topics: ReadonlyArray<{ readonly topic: string; readonly numPartitions?: number; readonly replicationFactor?: number }>): Promise<boolean> {
    return createTopicsWithLeaders(this.admin, topics);
  }

  async partitionCounts(topics: readonly string[]): Promise<Record<string, number>> {
    const { topics: meta } = await this.admin.fetchTopicMetadata({ topics: [...topics] });
    const out: Record<string, number> = {};
    for (const t of meta) out[t.name] = t.partitions.length;
    return out;
  }

  async watermarks(topic: string): Promise<Array<{ partition: number; low: string; high: string }>> {
    const offsets = await this.admin.fetchTopicOffsets(topic);
    return offsets.map((o) => ({ partition: o.partition, low: o.low, high: o.high })).sort((a, b) => a.partition - b.partition);
  }

  async committedOffsets(groupId: string, topic: string): Promise<Array<{ partition: number; offset: string }>> {
    const [entry] = await this.admin.fetchOffsets({ groupId, topics: [topic] });
    return (entry?.partitions ?? []).map((p) => ({ partition: p.partition, offset: p.offset })).sort((a, b) => a.partition - b.partition);
  }

  async describeGroup(groupId: string): Promise<GroupDescription> {
    const { groups } = await this.admin.describeGroups([groupId]);
    const group = groups.find((g) => g.groupId === groupId);
    return { state: group?.state ?? 'Dead', members: (group?.members ?? []).map((m) => ({ memberId: m.memberId, clientId: m.clientId, clientHost: m.clientHost })) };
  }
}

/**
 * kafkajs's `createTopics` with `waitForLeaders`, made to finish when the broker's metadata lags
 * the topics it has just created. kafkajs's wait retries `LEADER_NOT_AVAILABLE` only. A broker that
 * answers `UNKNOWN_TOPIC_OR_PARTITION` in that moment (seen on Kafka 4.4 under load) has created
 * the topics, so this polls the metadata until each partition has a leader.
 * @returns as kafkajs: false when every topic already existed
 * @throws the kafkajs error for any other failure; an Error when the leaders are still missing after `waitMs`
 */
export async function createTopicsWithLeaders(
  admin: Admin,
  topics: ReadonlyArray<{ readonly topic: string; readonly numPartitions?: number; readonly replicationFactor?: number }>,
  waitMs = 15_000,
): Promise<boolean> {
  try {
    return await admin.createTopics({ waitForLeaders: true, topics: topics.map((t) => ({ ...t })) });
  } catch (error) {
    if ((error as { type?: unknown } | null)?.type !== 'UNKNOWN_TOPIC_OR_PARTITION') throw error;
  }
  const names = topics.map((t) => t.topic);
  const deadline = Date.now() + waitMs;
  for (;;) {
    const ready = await admin
      .fetchTopicMetadata({ topics: names })
      .then((m) => m.topics.length === names.length && m.topics.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0)))
      .catch(() => false);
    if (ready) return true;
    if (Date.now() > deadline) throw new Error(`Kafka topics ${names.join(', ')} were created but have no leaders after ${waitMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
