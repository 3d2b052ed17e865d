/**
 * Builds sources, consumers and claimers for one test and tears everything down after it: every
 * queue the test declared is deleted, every connection closed, no timer left behind.
 */
import Redis from 'ioredis';
import {
  ack,
  type Claimer,
  ConsumerBase,
  type ConsumerOptions,
  type Disposition,
  type HandlerContext,
  InMemoryClaimer,
  type Logger,
  type Message,
} from '../../../../src';
import { RedisClaimer } from '../../../../adapters/redis';
import { RabbitMqSource, type RabbitMqSourceOptions } from '../../../../adapters/rabbitmq';
import { AMQP_URL, AmqpAdmin, uniqueName } from './amqp';

/** Short delay tiers so requeues come back quickly in tests, ms. */
export const TEST_DELAY_TIERS_MS = [100, 500, 2000] as const;

export type Handler = (message: Message<Record<string, unknown>>, context: HandlerContext) => Promise<Disposition>;

/** A consumer whose handler is a function given per test. */
export class TestConsumer extends ConsumerBase<Record<string, unknown>> {
  constructor(
    options: ConsumerOptions,
    private readonly handler: Handler,
  ) {
    super(options);
  }

  handle(message: Message<Record<string, unknown>>, context: HandlerContext): Promise<Disposition> {
    return this.handler(message, context);
  }
}

/** Log lines kept in memory; printed when TWOPHASE_TEST_LOG is set. */
export class CapturingLogger implements Logger {
  readonly lines: { level: string; msg?: string; obj: object }[] = [];
  debug(obj: object, msg?: string): void {
    this.push('debug', obj, msg);
  }
  info(obj: object, msg?: string): void {
    this.push('info', obj, msg);
  }
  warn(obj: object, msg?: string): void {
    this.push('warn', obj, msg);
  }
  error(obj: object, msg?: string): void {
    this.push('error', obj, msg);
  }
  has(text: string): boolean {
    return this.lines.some((l) => l.msg?.includes(text));
  }
  private push(level: string, obj: object, msg?: string): void {
    this.lines.push({ level, msg, obj });
    if (process.env.TWOPHASE_TEST_LOG) process.stderr.write(`[${level}] ${msg ?? ''} ${safeJson(obj)}\n`);
  }
}

function safeJson(obj: object): string {
  try {
    return JSON.stringify(obj, (_k, v: unknown) => (v instanceof Error ? `${v.name}: ${v.message}` : v));
  } catch {
    return '';
  }
}

/** Per-key effect counts: the "record of applied effects" of the failure scenarios. */
/** A handler that applies each message's effect to `effects` (by key) and acks. */
export function applying(effects: EffectLog): Handler {
  return async (m) => {
    effects.apply(m.key);
    return ack();
  };
}

export class EffectLog {
  private readonly counts = new Map<string, number>();
  apply(key: string): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }
  count(key: string): number {
    return this.counts.get(key) ?? 0;
  }
  get total(): number {
    let sum = 0;
    for (const c of this.counts.values()) sum += c;
    return sum;
  }
  get keys(): number {
    return this.counts.size;
  }
  duplicated(): string[] {
    return [...this.counts].filter(([, c]) => c > 1).map(([k]) => k);
  }
}

export type ClaimerKind = 'memory' | 'redis';

/** One test's resources. */
export class Harness {
  readonly admin = new AmqpAdmin();
  readonly logger = new CapturingLogger();
  private readonly consumers: ConsumerBase<unknown>[] = [];
  private readonly sources: RabbitMqSource[] = [];
  private readonly redisClients: Redis[] = [];
  private readonly claimers: RedisClaimer[] = [];
  readonly redisPrefix = uniqueName('redis').replace(/\./g, '-');

  /** A fresh queue name, tracked for deletion with its DLX, DLQ and delay queues. */
  queue(prefix: string, exchanges: string[] = []): string {
    const name = uniqueName(prefix);
    this.admin.track(name, { delayTiersMs: TEST_DELAY_TIERS_MS, exchanges });
    return name;
  }

  source(options: Partial<RabbitMqSourceOptions> & { queue: string }): RabbitMqSource {
    const source = new RabbitMqSource({
      url: AMQP_URL,
      delayTiersMs: TEST_DELAY_TIERS_MS,
      reconnectDelayMs: 100,
      resubscribeIntervalMs: 100,
      failedPublishRequeueDelayMs: 200,
      connectTimeoutMs: 10_000,
      logger: this.logger,
      ...options,
    });
    this.sources.push(source);
    return source;
  }

  claimer(kind: ClaimerKind, options: { port?: number; operationTimeoutMs?: number } = {}): Claimer {
    if (kind === 'memory') return new InMemoryClaimer();
    const redis = new Redis({ host: '127.0.0.1', port: options.port ?? Number(process.env.REDIS_PORT ?? 6379), lazyConnect: true, maxRetriesPerRequest: 1 });
    this.redisClients.push(redis);
    const claimer = new RedisClaimer({ redis }, { prefix: this.redisPrefix, operationTimeoutMs: options.operationTimeoutMs });
    this.claimers.push(claimer);
    return claimer;
  }

  /** A redis client for test bookkeeping (effects across processes). */
  redis(): Redis {
    const redis = new Redis({ host: '127.0.0.1', port: Number(process.env.REDIS_PORT ?? 6379), maxRetriesPerRequest: 1 });
    this.redisClients.push(redis);
    return redis;
  }

  consumer(options: Partial<ConsumerOptions> & Pick<ConsumerOptions, 'source' | 'claimer'>, handler: Handler): TestConsumer {
    const consumer = new TestConsumer(
      {
        name: 'test',
        concurrency: 10,
        leaseTtlMs: 5000,
        busyRequeueDelayMs: 100,
        retryBackoff: { initialDelayMs: 100, maxDelayMs: 500, jitter: 0 },
        shutdownTimeoutMs: 5000,
        logger: this.logger,
        ...options,
      },
      handler,
    );
    this.consumers.push(consumer as ConsumerBase<unknown>);
    return consumer;
  }

  /** Deletes every Redis key this test wrote under its prefix (claims, effects). */
  private async deleteRedisKeys(): Promise<void> {
    const redis = new Redis({ host: '127.0.0.1', port: Number(process.env.REDIS_PORT ?? 6379), maxRetriesPerRequest: 1 });
    try {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${this.redisPrefix}:*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length > 0) await redis.unlink(...keys);
      } while (cursor !== '0');
    } finally {
      await redis.quit().catch(() => redis.disconnect());
    }
  }

  async cleanup(): Promise<void> {
    for (const consumer of this.consumers) await consumer.stop().catch(() => undefined);
    for (const source of this.sources) await source.close().catch(() => undefined);
    for (const claimer of this.claimers) await claimer.close().catch(() => undefined);
    if (this.redisClients.length > 0) await this.deleteRedisKeys().catch(() => undefined);
    for (const redis of this.redisClients) {
      if (redis.status === 'ready') await redis.quit().catch(() => undefined);
      // disconnect() on an ended client arms a 2 s force-close timer that nothing clears.
      if (redis.status !== 'end') redis.disconnect();
    }
    await this.admin.cleanup();
  }
}

export { AMQP_URL };
