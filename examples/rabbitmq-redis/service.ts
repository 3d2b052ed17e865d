/**
 * Wires the payments consumer: RabbitMQ source (twophase/rabbitmq) + Redis claimer
 * (twophase/redis) + the fenced ledger.
 */
import { Redis } from 'ioredis';
import { type ConsumerObserver, type Logger } from '../../src';
import { RedisClaimer } from '../../adapters/redis';
import { RabbitMqSource, type RabbitMqSourceStats } from '../../adapters/rabbitmq';
import { Ledger } from './ledger';
import { PaymentsConsumer } from './payments-consumer';
import { serviceSettings } from '../shared/env';

/** Configuration of the service (see README.md; all read from the environment by main.ts). */
export interface PaymentsServiceConfig {
  /** AMQP URL. */
  readonly amqpUrl: string;
  /** Redis URL of the claims and the ledger. */
  readonly redisUrl: string;
  /** Work queue. */
  readonly queue: string;
  /** Exchange the producers publish to (topic); bound with `payment.requested`. */
  readonly exchange: string;
  /** Messages in flight (= prefetch). */
  readonly concurrency: number;
  /** Lease length, ms. */
  readonly leaseTtlMs: number;
  /** Handler attempts before a retryable failure is dead-lettered. */
  readonly maxAttempts: number;
  /** Number of replicas of this service (the Redis claimer is fine with many). */
  readonly replicas: number;
  /** Redis key prefix of claims and ledger. */
  readonly redisPrefix: string;
  readonly logger?: Logger;
  readonly observers?: readonly ConsumerObserver[];
  readonly log?: (line: string) => void;
}

/** A running service. */
export interface PaymentsService {
  readonly consumer: PaymentsConsumer;
  readonly source: RabbitMqSource;
  readonly ledger: Ledger;
  stats(): RabbitMqSourceStats;
  /** Graceful stop: intake stops, in-flight payments finish and settle, connections close. */
  stop(): Promise<void>;
}

/** Starts the service. Resolves once it consumes. */
export async function startPaymentsService(config: PaymentsServiceConfig): Promise<PaymentsService> {
  const claimsRedis = new Redis(config.redisUrl, { lazyConnect: true });
  const ledgerRedis = new Redis(config.redisUrl);
  ledgerRedis.on('error', () => undefined); // reported through failed ledger writes (retried)
  const claimer = new RedisClaimer({ redis: claimsRedis }, { prefix: `${config.redisPrefix}:claims` });
  const source = new RabbitMqSource({
    url: config.amqpUrl,
    queue: config.queue,
    bindings: [{ exchange: config.exchange, routingKey: 'payment.requested', exchangeType: 'topic' }],
    logger: config.logger,
  });
  const ledger = new Ledger(ledgerRedis, config.redisPrefix);
  const consumer = new PaymentsConsumer(
    {
      name: 'payments',
      claimer,
      source,
      concurrency: config.concurrency,
      leaseTtlMs: config.leaseTtlMs,
      maxAttempts: config.maxAttempts,
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
 * TWOPHASE_AMQP_URL and TWOPHASE_REDIS_URL (../shared/env.ts), the service's own settings from
 * PAYMENTS_QUEUE, PAYMENTS_EXCHANGE, CONCURRENCY, LEASE_TTL_MS, MAX_ATTEMPTS, TWOPHASE_REPLICAS
 * and REDIS_PREFIX.
 */
export function configFromEnv(env: Readonly<Record<string, string | undefined>> = process.env): PaymentsServiceConfig {
  const services = serviceSettings(env);
  return {
    amqpUrl: services.amqpUrl,
    redisUrl: services.redisUrl,
    queue: env.PAYMENTS_QUEUE ?? 'payments.requested',
    exchange: env.PAYMENTS_EXCHANGE ?? 'payments',
    concurrency: Number(env.CONCURRENCY ?? 20),
    leaseTtlMs: Number(env.LEASE_TTL_MS ?? 30_000),
    maxAttempts: Number(env.MAX_ATTEMPTS ?? 5),
    replicas: Number(env.TWOPHASE_REPLICAS ?? env.REPLICAS ?? 1),
    redisPrefix: env.REDIS_PREFIX ?? 'payments-example',
  };
}
