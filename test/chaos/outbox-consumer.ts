/**
 * The outbox stacks' downstream consumer process: a twophase consumer with the transactional
 * inbox (PostgresClaimer `mode: 'transactional'`) on the run's schema, reading what the relays
 * published. Its handler applies each message in the claim's transaction: the effect row in
 * `chaos_effects` (keyed by the outbox id, no unique constraint: a second application is a second
 * row) and a row in `chaos_outbox_applied` (ordering key and position, for the per-key order
 * check). It needs no configuration to deduplicate a relay's republish: the outbox id travels as
 * the `idempotency-key` header.
 *
 * It handles one message at a time per ordering key, in broker order: RabbitMQ with a
 * concurrency of 1 (one delivery in flight on the run's queue), Kafka per partition (the record
 * key is the ordering key). It is not killed: the faults of these stacks are the relays'.
 */
import { ack, ConsumerBase, type HandlerContext, type Logger, type Message, type MessageSource } from '../../src';
import { chaosConsumerOptions, rawKey } from './chaos-consumer';
import { LedgerWriter, pgConfig } from './ledger';
import type { FromWorker, OutboxConsumerConfig, ToWorker } from './protocol';

const config = JSON.parse(process.argv[2]!) as OutboxConsumerConfig;

/** What the producer staged. */
interface OrderBody {
  /** Ordering key. */
  readonly g: string;
  /** Position within the ordering key, in staging order (gaps where a transaction rolled back). */
  readonly n: number;
}

interface Queryable {
  query(text: string, values: unknown[]): Promise<unknown>;
}

const logger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: (obj, msg) => process.stderr.write(`${JSON.stringify({ level: 'warn', at: new Date().toISOString(), msg, ...obj })}\n`),
  error: (obj, msg) => process.stderr.write(`${JSON.stringify({ level: 'error', at: new Date().toISOString(), msg, ...obj, err: String((obj as { err?: unknown }).err) })}\n`),
};

class Applier extends ConsumerBase<OrderBody, Queryable> {
  handled = 0;
  duplicates = 0;

  constructor(
    options: ConstructorParameters<typeof ConsumerBase<OrderBody, Queryable>>[0],
    private readonly ledger: LedgerWriter,
  ) {
    super({ ...options, observers: [{ onEvent: (e) => void (e.type === 'done_duplicate' && this.duplicates++) }] });
  }

  async handle(message: Message<OrderBody>, ctx: HandlerContext<Queryable>): Promise<ReturnType<typeof ack>> {
    const id = rawKey(message.key);
    await this.ledger.effect(id, ctx.fencingToken, ctx.attempt, ctx.transaction);
    await ctx.transaction.query('INSERT INTO chaos_outbox_applied (run_id, id, grp, n) VALUES ($1, $2, $3, $4)', [config.runId, id, message.body.g, message.body.n]);
    this.handled++;
    return ack();
  }
}

async function makeSource(): Promise<MessageSource> {
  if (config.broker === 'rabbitmq') {
    const { RabbitMqSource } = await import('../../adapters/rabbitmq');
    return new RabbitMqSource({ url: config.amqp!.url, queue: config.amqp!.queue, delayTiersMs: [200, 1000], reconnectDelayMs: 500, connectionName: `chaos-${config.runId}-consumer`, logger });
  }
  const { KafkaSource } = await import('../../adapters/kafka');
  const { chaosSourceDependencies } = await import('./kafka-client');
  return new KafkaSource(await chaosSourceDependencies(config.kafka!.client, `chaos-${config.workerId}`, config.kafka!.brokers), { topics: [config.kafka!.topic], groupId: config.kafka!.groupId, fromBeginning: true, logger, claimBatchSize: 1, consumer: { maxWaitTimeInMs: 100 } });
}

async function main(): Promise<void> {
  const { Pool } = await import('pg');
  const { PostgresClaimer } = await import('../../adapters/postgres');
  const pool = new Pool(pgConfig(8));
  pool.on('error', () => undefined);
  const claimer = new PostgresClaimer({ pool, logger }, { schema: config.schema, mode: 'transactional', operationTimeoutMs: 5000, readyTimeoutMs: 15_000 });
  const ledger = new LedgerWriter(config.runId, config.workerId, 2);
  const consumer = new Applier(
    chaosConsumerOptions({ claimer, source: await makeSource(), concurrency: config.broker === 'rabbitmq' ? 1 : 6, deployment: { replicas: 1 }, logger }, 5000),
    ledger,
  );
  const send = (m: FromWorker) => process.send?.(m);
  const stats = setInterval(() => send({ t: 'stats', workerId: config.workerId, inFlight: consumer.health().inFlight, handled: consumer.handled, consuming: consumer.health().ready, duplicates: consumer.duplicates }), 250);
  process.on('message', (message: ToWorker) => {
    if (message.t !== 'stop') return;
    clearInterval(stats);
    void consumer
      .stop()
      .then(() => ledger.close())
      .then(() => pool.end())
      .finally(() => process.exit(0));
  });
  await consumer.start();
  send({ t: 'ready', workerId: config.workerId });
}

process.on('unhandledRejection', (error) => logger.error({ err: error }, 'unhandled rejection'));
process.on('disconnect', () => process.exit(0));
void main().catch((error: unknown) => {
  logger.error({ err: error }, 'start failed');
  process.exit(3);
});
