/**
 * An in-process {@link KafkaClient} for deterministic tests of the adapter's own logic (group
 * generations, commit fencing, dead-letter retries) without a broker. Tests drive it: `join`
 * announces an assignment, `deliver` hands a batch to the consumer, and every commit, pause,
 * resume and produced record is recorded.
 */
import type {
  ClusterAdmin,
  FetchedBatch,
  GroupAssignment,
  GroupConsumer,
  GroupConsumerConfig,
  KafkaClient,
  KafkaRecord,
  ProducedRecord,
  ProducedRecordMetadata,
  RecordProducer,
  TopicPartition,
  TopicPartitionOffset,
} from '../../../../adapters/kafka';

export class FakeConsumer implements GroupConsumer {
  readonly commits: Array<{ generation: number; offsets: TopicPartitionOffset[] }> = [];
  readonly pausedSet = new Set<string>();
  readonly resolved = new Map<string, string>();
  generation = 0;
  running = false;
  disconnected = false;
  private eachBatch: ((batch: FetchedBatch) => Promise<void>) | undefined;
  private readonly joinListeners: Array<(event: GroupAssignment) => void> = [];
  private readonly rebalanceListeners: Array<() => void> = [];

  constructor(readonly config: GroupConsumerConfig) {}

  async connect(): Promise<void> {}
  async subscribe(): Promise<void> {}

  async run(eachBatch: (batch: FetchedBatch) => Promise<void>): Promise<void> {
    this.eachBatch = eachBatch;
    this.running = true;
  }

  pause(partitions: readonly TopicPartition[]): void {
    for (const p of partitions) this.pausedSet.add(`${p.topic}/${p.partition}`);
  }

  resume(partitions: readonly TopicPartition[]): void {
    for (const p of partitions) this.pausedSet.delete(`${p.topic}/${p.partition}`);
  }

  paused(): Array<{ topic: string; partitions: number[] }> {
    const byTopic = new Map<string, number[]>();
    for (const key of this.pausedSet) {
      const [topic, partition] = key.split('/') as [string, string];
      byTopic.set(topic, [...(byTopic.get(topic) ?? []), Number(partition)]);
    }
    return [...byTopic].map(([topic, partitions]) => ({ topic, partitions }));
  }

  async disconnect(): Promise<void> {
    this.running = false;
    this.disconnected = true;
  }

  onGroupJoin(listener: (event: GroupAssignment) => void): () => void {
    this.joinListeners.push(listener);
    return () => undefined;
  }

  onRebalancing(listener: () => void): () => void {
    this.rebalanceListeners.push(listener);
    return () => undefined;
  }

  onCrash(): () => void {
    return () => undefined;
  }

  /** A new generation with this assignment (as after JoinGroup + SyncGroup). */
  join(assignment: Record<string, number[]>): void {
    this.generation++;
    for (const listener of this.joinListeners) listener({ memberId: 'member-1', assignment });
  }

  rebalancing(): void {
    for (const listener of this.rebalanceListeners) listener();
  }

  /** Hands a batch of `offsets` (JSON bodies `{ id, seq }` keyed `<topic>-<partition>-<offset>`) to the source. */
  async deliver(topic: string, partition: number, offsets: number[], body: (offset: number) => object = (o) => ({ id: `${partition}-${o}`, seq: o })): Promise<void> {
    const generation = this.generation;
    const messages: KafkaRecord[] = offsets.map((o) => ({
      key: null,
      value: Buffer.from(JSON.stringify(body(o))),
      offset: String(o),
      timestamp: '0',
      headers: { 'idempotency-key': Buffer.from(`${topic}-${partition}-${o}`) },
    }));
    await this.deliverBatch({
      topic,
      partition,
      highWatermark: String((offsets[offsets.length - 1] ?? 0) + 1),
      messages,
      resolveOffset: (offset) => void this.resolved.set(`${topic}/${partition}`, offset),
      heartbeat: async () => undefined,
      commit: async (offsets) => {
        // Like the broker: a commit of an older generation is refused.
        if (generation !== this.generation) throw Object.assign(new Error('ILLEGAL_GENERATION'), { type: 'ILLEGAL_GENERATION' });
        this.commits.push({ generation, offsets: [...offsets] });
      },
      isRunning: () => this.running,
      isStale: () => false,
    });
  }

  /** Hands a prepared batch to the source as the client's fetch loop would (benchmarks build their batches ahead). */
  deliverBatch(batch: FetchedBatch): Promise<void> {
    if (!this.eachBatch) throw new Error('deliverBatch before run()');
    return this.eachBatch(batch);
  }

  /** Every offset committed for `topic/partition`, in order. */
  committedOffsets(topic: string, partition: number): string[] {
    return this.commits.flatMap((c) => c.offsets.filter((o) => o.topic === topic && o.partition === partition).map((o) => o.offset));
  }
}

export class FakeProducer implements RecordProducer {
  readonly sent: Array<{ topic: string; record: ProducedRecord }> = [];
  /** How many sends fail before one succeeds. */
  failures = 0;

  async connect(): Promise<void> {}
  async disconnect(): Promise<void> {}

  async send(request: { topic: string; records: readonly ProducedRecord[] }): Promise<ProducedRecordMetadata[]> {
    if (this.failures > 0) {
      this.failures--;
      throw new Error('broker unavailable (fake)');
    }
    for (const record of request.records) this.sent.push({ topic: request.topic, record });
    return request.records.map(() => ({ topic: request.topic, partition: 0 }));
  }
}

export class FakeAdmin implements ClusterAdmin {
  readonly created: string[] = [];
  constructor(private readonly topics: Set<string>) {}
  async connect(): Promise<void> {}
  async disconnect(): Promise<void> {}
  async listTopics(): Promise<string[]> {
    return [...this.topics];
  }
  async createTopics(topics: ReadonlyArray<{ topic: string }>): Promise<boolean> {
    for (const t of topics) {
      this.topics.add(t.topic);
      this.created.push(t.topic);
    }
    return true;
  }
  async partitionCounts(topics: readonly string[]): Promise<Record<string, number>> {
    return Object.fromEntries(topics.map((t) => [t, 2]));
  }
  async watermarks(): Promise<Array<{ partition: number; low: string; high: string }>> {
    return [];
  }
  async committedOffsets(): Promise<Array<{ partition: number; offset: string }>> {
    return [];
  }
}

/** A fake client; `topics` are the topics that exist. */
export class FakeKafka implements KafkaClient {
  readonly consumers: FakeConsumer[] = [];
  readonly producers: FakeProducer[] = [];
  readonly adminClient: FakeAdmin;

  constructor(topics: string[]) {
    this.adminClient = new FakeAdmin(new Set(topics));
  }

  consumer(config: GroupConsumerConfig): FakeConsumer {
    const consumer = new FakeConsumer(config);
    this.consumers.push(consumer);
    return consumer;
  }

  producer(): FakeProducer {
    const producer = new FakeProducer();
    this.producers.push(producer);
    return producer;
  }

  admin(): FakeAdmin {
    return this.adminClient;
  }
}
