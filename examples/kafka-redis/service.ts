/**
 * The payments service of ../rabbitmq-redis on Kafka: the same PaymentsConsumer and ledger,
 * with KafkaSource (`twophase/kafka`) instead of RabbitMqSource. Nothing in the consumer knows
 * which broker feeds it.
 */
import { Kafka, logLevel } from 'kafkajs';
import { Redis } from 'ioredis';
import { type ConsumerObserver, consoleWarnLogger, type Logger } from '../../src';
import { KafkaSource, type KafkaSourceStats, kafkajsLogCreator } from '../../adapters/kafka';
import { RedisClaimer } from '../../adapters/redis';
import { Ledger } from '../rabbitmq-redis/ledger';
import { PaymentsConsumer } from '../rabbitmq-redis/payments-consumer';
import { serviceSettings } from '../shared/env';

/** Configuration of the service (see README.md). */
export interface KafkaPaymentsConfig {
  /** Kafka bootstrap brokers, `host:port` each. */
  readonly kafkaBrokers: readonly string[];
  /** Redis URL of the claims and the ledger. */
  readonly redisUrl: string;
  /** Topic of the payment requests; dead letters go to `<topic>.dlq`. */
  readonly topic: string;
  /** Partitions of the topics when this example creates them. */
  readonly partitions: number;
  /** Consumer group, and the claims' key namespace. */
  readonly groupId: string;
  /** Records in flight (handled at once) per process. */
  readonly concurrency: number;
  /** Lease length, ms. */
  readonly leaseTtlMs: number;
  /** Replicas of this service (the Redis claimer is fine with many). */
  readonly replicas: number;
  /** Redis key prefix of claims and ledger. */
  readonly redisPrefix: string;
  readonly logger?: Logger;
  readonly observers?: readonly ConsumerObserver[];
  readonly log?: (line: string) => void;
}

/** A running service. */
export interface KafkaPaymentsService {
  readonly consumer: PaymentsConsumer;
  readonly source: KafkaSource;
  readonly ledger: Ledger;
  stats(): Readonly<KafkaSourceStats>;
  /** Graceful stop: fetching stops, in-flight records finish and settle, offsets are committed, the member leaves the group. */
  stop(): Promise<void>;
}

/** Starts the service. Resolves once it joined the group. The topics must exist (./topics.ts). */
export async function startKafkaPaymentsService(config: KafkaPaymentsConfig): Promise<KafkaPaymentsService> {
  // kafkajs logs at INFO by default; ERROR keeps its connection chatter and its partitioner
  // notice out of the output, and kafkajsLogCreator writes its errors through the same logger
  // (and JSON line format) as twophase's own lines.
  const kafka = new Kafka({ clientId: config.groupId, brokers: [...config.kafkaBrokers], logLevel: logLevel.ERROR, logCreator: kafkajsLogCreator(config.logger ?? consoleWarnLogger) });
  const claimsRedis = new Redis(config.redisUrl, { lazyConnect: true });
  const ledgerRedis = new Redis(config.redisUrl);
  ledgerRedis.on('error', () => undefined); // reported through failed ledger writes (retried)
  const claimer = new RedisClaimer({ redis: claimsRedis }, { prefix: `${config.redisPrefix}:claims` });
  const source = new KafkaSource({ kafka }, { topics: [config.topic], groupId: config.groupId, fromBeginning: true, logger: config.logger });
  const ledger = new Ledger(ledgerRedis, config.redisPrefix);
  const consumer = new PaymentsConsumer(
    {
      name: config.groupId,
      claimer,
      source,
      concurrency: config.concurrency,
      leaseTtlMs: config.leaseTtlMs,
      deployment: { replicas: config.replicas },
      logger: config.logger,
      observers: config.observers,
    },
    ledger,
    config.log,
  );
  try {
    await consumer.start();
  } catch (error) {
    await claimer.close();
    claimsRedis.disconnect();
    ledgerRedis.disconnect();
    throw error;
  }
  return {
    consumer,
    source,
    ledger,
    stats: () => source.stats,
    stop: async () => {
      await consumer.stop();
      await claimer.close();
      await claimsRedis.quit().catch(() => claimsRedis.disconnect());
      await ledgerRedis.quit().catch(() => ledgerRedis.disconnect());
    },
  };
}

/**
 * Reads the configuration from the environment, with local defaults: the services from
 * TWOPHASE_KAFKA_BROKERS and TWOPHASE_REDIS_URL (../shared/env.ts), the service's own settings
 * from PAYMENTS_TOPIC, PAYMENTS_PARTITIONS, PAYMENTS_GROUP, CONCURRENCY, LEASE_TTL_MS,
 * TWOPHASE_REPLICAS and REDIS_PREFIX.
 */
export function configFromEnv(env: Readonly<Record<string, string | undefined>> = process.env): KafkaPaymentsConfig {
  const services = serviceSettings(env);
  return {
    kafkaBrokers: services.kafkaBrokers,
    redisUrl: services.redisUrl,
    topic: env.PAYMENTS_TOPIC ?? 'payments.requested',
    partitions: Number(env.PAYMENTS_PARTITIONS ?? 6),
    groupId: env.PAYMENTS_GROUP ?? 'payments',
    concurrency: Number(env.CONCURRENCY ?? 20),
    leaseTtlMs: Number(env.LEASE_TTL_MS ?? 30_000),
    replicas: Number(env.TWOPHASE_REPLICAS ?? 1),
    redisPrefix: env.REDIS_PREFIX ?? 'payments-kafka-example',
  };
}
