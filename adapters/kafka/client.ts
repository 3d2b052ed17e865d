/**
 * The small client interface the Kafka adapter is written against. `kafkajs-client.ts` binds it
 * to kafkajs 2.x; another KafkaJS-compatible client (or a test double) can implement it instead.
 *
 * Only what the adapter needs is here: group membership events, batch delivery with an explicit
 * fetch position, explicit offset commits bound to the current group generation, pause/resume,
 * a producer for the dead-letter topic, and a few admin calls.
 */

/** Header values as Kafka clients deliver them: bytes, or strings when the producer gave strings. */
export type KafkaHeaderValue = Buffer | string | ReadonlyArray<Buffer | string> | undefined;

/** Record headers. */
export type KafkaHeaders = Readonly<Record<string, KafkaHeaderValue>>;

/** One fetched record. Offsets are decimal strings (64-bit). */
export interface KafkaRecord {
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly offset: string;
  /** Record timestamp, Unix ms as a decimal string. */
  readonly timestamp: string;
  readonly headers?: KafkaHeaders;
}

/** A topic partition. */
export interface TopicPartition {
  readonly topic: string;
  readonly partition: number;
}

/** An offset to commit: the offset of the next record to consume (last processed + 1). */
export interface TopicPartitionOffset extends TopicPartition {
  readonly offset: string;
}

/**
 * One fetched batch of one partition and the controls valid while the consumer that fetched it
 * runs (kafkajs `EachBatchPayload`).
 */
export interface FetchedBatch {
  readonly topic: string;
  readonly partition: number;
  /** The partition's high watermark when fetched (offset of the next record to be written). */
  readonly highWatermark: string;
  readonly messages: readonly KafkaRecord[];
  /**
   * Moves the fetch position past `offset` (the next fetch of the partition starts at
   * `offset + 1`). With auto-commit off this commits nothing.
   */
  resolveOffset(offset: string): void;
  /**
   * Sends a group heartbeat if one is due. Rejects with the broker's error when the group is
   * rebalancing (`REBALANCE_IN_PROGRESS`) or no longer knows this member (`UNKNOWN_MEMBER_ID`).
   */
  heartbeat(): Promise<void>;
  /**
   * Commits `offsets` once, with the member id and generation the consumer holds at the moment
   * of the call (no retry, so a retry can never carry a later generation). Rejects with the
   * broker's error (`ILLEGAL_GENERATION`, `REBALANCE_IN_PROGRESS`, `UNKNOWN_MEMBER_ID`, …).
   */
  commit(offsets: readonly TopicPartitionOffset[]): Promise<void>;
  /** False once the consumer is stopping. */
  isRunning(): boolean;
  /** True when a seek is pending for this partition: the batch no longer matches the fetch position. */
  isStale(): boolean;
}

/** What a group member is told when it (re)joins: the partitions it owns from now on. */
export interface GroupAssignment {
  readonly memberId: string;
  /** Topic → partitions assigned to this member. */
  readonly assignment: Readonly<Record<string, readonly number[]>>;
}

/** Consumer settings the adapter passes through (names and units as in kafkajs). */
export interface GroupConsumerConfig {
  readonly groupId: string;
  /** Session timeout, ms: the broker evicts a member that sends no heartbeat for this long. */
  readonly sessionTimeout?: number;
  /** Rebalance timeout, ms: how long the coordinator waits for members to rejoin. */
  readonly rebalanceTimeout?: number;
  /** Heartbeat interval, ms; below sessionTimeout (about a third of it). */
  readonly heartbeatInterval?: number;
  /** Longest time the broker holds a fetch when no data is available, ms. */
  readonly maxWaitTimeInMs?: number;
  /** Most bytes fetched per partition per request. */
  readonly maxBytesPerPartition?: number;
  /** Most bytes fetched per request. */
  readonly maxBytes?: number;
  readonly minBytes?: number;
  readonly metadataMaxAge?: number;
  readonly allowAutoTopicCreation?: boolean;
  readonly readUncommitted?: boolean;
  readonly rackId?: string;
  readonly retry?: Readonly<Record<string, unknown>>;
}

/** A consumer group member. */
export interface GroupConsumer {
  connect(): Promise<void>;
  subscribe(subscription: { readonly topics: readonly string[]; readonly fromBeginning: boolean }): Promise<void>;
  /**
   * Starts the fetch loop with auto-commit and auto-resolve off. `eachBatch` is called per
   * partition batch; it must return soon (the adapter only queues the records). Resolves once the
   * member joined the group.
   */
  run(eachBatch: (batch: FetchedBatch) => Promise<void>): Promise<void>;
  pause(partitions: readonly TopicPartition[]): void;
  resume(partitions: readonly TopicPartition[]): void;
  /** Partitions paused at the moment, per topic. */
  paused(): ReadonlyArray<{ readonly topic: string; readonly partitions: readonly number[] }>;
  /** Leaves the group (LeaveGroup) and closes connections. */
  disconnect(): Promise<void>;
  /** After each join and sync of the group (emitted synchronously, before any fetch of the new generation). */
  onGroupJoin(listener: (event: GroupAssignment) => void): () => void;
  /** When the fetch loop learned that the group is rebalancing, before it rejoins. */
  onRebalancing(listener: () => void): () => void;
  /** When the client's run loop crashed; `restart` tells whether it restarts itself. */
  onCrash(listener: (error: Error, restart: boolean) => void): () => void;
}

/** Producer settings passed through (names as in kafkajs). */
export interface RecordProducerConfig {
  readonly allowAutoTopicCreation?: boolean;
  readonly idempotent?: boolean;
  readonly maxInFlightRequests?: number;
  readonly retry?: Readonly<Record<string, unknown>>;
}

/** A record to produce. */
export interface ProducedRecord {
  readonly key?: Buffer | string | null;
  readonly value: Buffer | string | null;
  readonly partition?: number;
  readonly headers?: KafkaHeaders;
  readonly timestamp?: string;
}

/** Where a produced record landed. */
export interface ProducedRecordMetadata {
  readonly topic: string;
  readonly partition: number;
  readonly baseOffset?: string;
}

export interface RecordProducer {
  connect(): Promise<void>;
  /**
   * Produces `records` to `topic` and resolves when the broker acknowledged them with `acks`
   * (-1 = all in-sync replicas).
   */
  send(request: { readonly topic: string; readonly records: readonly ProducedRecord[]; readonly acks?: number; readonly timeoutMs?: number }): Promise<ProducedRecordMetadata[]>;
  disconnect(): Promise<void>;
}

/** The admin calls the adapter and its replay tool use. */
export interface ClusterAdmin {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  listTopics(): Promise<string[]>;
  /** Creates topics that do not exist; resolves false when all already existed. */
  createTopics(topics: ReadonlyArray<{ readonly topic: string; readonly numPartitions?: number; readonly replicationFactor?: number }>): Promise<boolean>;
  /** Partition count of each topic. */
  partitionCounts(topics: readonly string[]): Promise<Record<string, number>>;
  /** Low and high watermarks per partition of `topic`. */
  watermarks(topic: string): Promise<Array<{ readonly partition: number; readonly low: string; readonly high: string }>>;
  /** The group's committed offsets of `topic` per partition (-1 when none). */
  committedOffsets(groupId: string, topic: string): Promise<Array<{ readonly partition: number; readonly offset: string }>>;
  /** The group's state and members (DescribeGroups). Optional: used for operator messages only. */
  describeGroup?(groupId: string): Promise<GroupDescription>;
}

/** A consumer group as DescribeGroups reports it. */
export interface GroupDescription {
  /** `Empty`, `Stable`, `PreparingRebalance`, `CompletingRebalance` or `Dead`. */
  readonly state: string;
  readonly members: ReadonlyArray<{ readonly memberId: string; readonly clientId: string; readonly clientHost: string }>;
}

/** A client: makes consumers, producers and admins. */
export interface KafkaClient {
  consumer(config: GroupConsumerConfig): GroupConsumer;
  producer(config?: RecordProducerConfig): RecordProducer;
  admin(): ClusterAdmin;
}
