/**
 * A chaos worker process: one ChaosConsumer on a real broker (RabbitMQ or Kafka) with the run's
 * claimer: RedisClaimer on the private redis-server, PostgresClaimer in transactional mode
 * (the inbox), whose effect INSERT goes through `ctx.transaction`, or that inbox behind a Redis
 * gate (GatedClaimer). Forked by the harness with its config as JSON in argv[2]; takes `arm` and
 * `stop` messages, reports `ready` and periodic `stats` (with the gate's counters when gated).
 *
 * Killed workers die by SIGKILL (the harness's, or their own at an armed point): nothing runs
 * after that, exactly as in production.
 */
import type { GatedClaimerStats } from '../../adapters/gated';
import { type Claimer, type Logger, type MessageSource, silentLogger } from '../../src';
import { type ArmedFault, ChaosConsumer, chaosConsumerOptions, type WorkerControl } from './chaos-consumer';
import { LedgerWriter, pgConfig } from './ledger';
import type { FromWorker, ToWorker, WorkerConfig } from './protocol';
import { Rng } from './rng';
import { isInbox } from './stacks/registry';

const config = JSON.parse(process.argv[2]!) as WorkerConfig;
/** The effect commits in the claim's PostgreSQL transaction (the inbox, gated or not). */
const inbox = isInbox(config.store.kind);

/** JSON lines on stderr (the harness writes them to the worker's log file). */
const logger: Logger = {
  debug: () => undefined,
  info: (obj, msg) => process.stderr.write(`${JSON.stringify({ level: 'info', at: new Date().toISOString(), msg, ...describe(obj) })}\n`),
  warn: (obj, msg) => process.stderr.write(`${JSON.stringify({ level: 'warn', at: new Date().toISOString(), msg, ...describe(obj) })}\n`),
  error: (obj, msg) => process.stderr.write(`${JSON.stringify({ level: 'error', at: new Date().toISOString(), msg, ...describe(obj) })}\n`),
};

function describe(obj: object): object {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) out[k] = v instanceof Error ? `${v.name}: ${v.message}` : v;
  return out;
}

function send(message: FromWorker): void {
  process.send?.(message);
}

/** The claimer of the run's store, and how to close what it holds. */
async function makeClaimer(): Promise<{ claimer: Claimer; close: () => Promise<void>; gateStats?: () => GatedClaimerStats }> {
  const store = config.store;
  if (store.kind === 'redis') {
    const { client: redis, disconnect } = await redisClient(store.port);
    const { RedisClaimer } = await import('../../adapters/redis');
    const claimer = new RedisClaimer({ redis, logger: silentLogger }, { prefix: store.prefix, operationTimeoutMs: 1000, readyTimeoutMs: 15_000 });
    return {
      claimer,
      close: async () => {
        await claimer.close();
        disconnect();
      },
    };
  }
  const truth = await inboxClaimer(store.schema, store.sessionPrefix);
  if (store.kind === 'postgres') return truth;
  // The gate: a short deadline, so a paused or stopped Redis sends claims to the truth quickly.
  const { client: redis, disconnect } = await redisClient(store.redisPort);
  const { RedisClaimer } = await import('../../adapters/redis');
  const { GatedClaimer } = await import('../../adapters/gated');
  const gate = new RedisClaimer({ redis, logger: silentLogger }, { prefix: store.redisPrefix, operationTimeoutMs: 200, readyTimeoutMs: 15_000 });
  const claimer = new GatedClaimer({ gate, truth: truth.claimer, logger }, { gateRetryMs: 500 });
  return {
    claimer,
    gateStats: () => claimer.stats,
    close: async () => {
      await gate.close();
      disconnect();
      await truth.close();
    },
  };
}

/** An ioredis client of the run's private redis-server that retries every 200 ms and never throws on its own. */
async function redisClient(port: number): Promise<{ client: import('ioredis').Redis; disconnect: () => void }> {
  const { default: Redis } = await import('ioredis');
  const client = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1, retryStrategy: () => 200, lazyConnect: true });
  client.on('error', () => undefined);
  return { client, disconnect: () => client.disconnect() };
}

/** PostgresClaimer in transactional mode (the inbox) on the run's schema. */
async function inboxClaimer(schema: string, sessionPrefix: string): Promise<{ claimer: Claimer; close: () => Promise<void> }> {
  const { Pool } = await import('pg');
  const { PostgresClaimer } = await import('../../adapters/postgres');
  // One client per in-flight delivery, plus the short checks of duplicates (docs/postgres.md).
  const pool = new Pool({ ...pgConfig(config.concurrency + 4), application_name: `${sessionPrefix}-${config.workerId}` });
  pool.on('error', () => undefined); // sessions ended by the server (pg_terminate, idle timeout)
  const claimer = new PostgresClaimer({ pool, logger }, { schema, mode: 'transactional', operationTimeoutMs: 1000, readyTimeoutMs: 15_000 });
  return { claimer, close: () => pool.end().catch(() => undefined) };
}

async function makeSource(): Promise<MessageSource> {
  if (config.broker === 'rabbitmq') {
    const { RabbitMqSource } = await import('../../adapters/rabbitmq');
    const amqp = config.amqp!;
    return new RabbitMqSource({
      url: amqp.url,
      queue: amqp.queue,
      delayTiersMs: amqp.delayTiersMs,
      reconnectDelayMs: 500,
      heartbeatSeconds: 5,
      publishTimeoutMs: 5000,
      failedPublishRequeueDelayMs: 1000,
      connectionName: `chaos-${config.runId}-${config.workerId}`,
      logger,
    });
  }
  const kafka = config.kafka!;
  const { KafkaSource } = await import('../../adapters/kafka');
  const { chaosSourceDependencies } = await import('./kafka-client');
  return new KafkaSource(
    await chaosSourceDependencies(kafka.client, `chaos-${config.workerId}`, kafka.brokers),
    {
      topics: [kafka.topic],
      groupId: kafka.groupId,
      fromBeginning: true,
      logger,
      // The inbox opens a transaction per claim: no claims ahead of dispatch (docs/postgres.md).
      ...(inbox ? { claimBatchSize: 1 } : {}),
      consumer: { sessionTimeout: kafka.sessionTimeoutMs, rebalanceTimeout: kafka.sessionTimeoutMs + 2000, heartbeatInterval: 500, maxWaitTimeInMs: 100 },
    },
  );
}

async function main(): Promise<void> {
  const ledger = new LedgerWriter(config.runId, config.workerId, inbox ? 2 : 6);
  const { claimer, close: closeClaimer, gateStats } = await makeClaimer();
  const control: WorkerControl = {
    id: config.workerId,
    dead: false,
    kill: async () => {
      process.kill(process.pid, 'SIGKILL');
      await new Promise(() => undefined); // SIGKILL is not catchable: nothing runs after it
    },
    overrun: async (_key, ms) => {
      // A blocked event loop (a long GC pause, a CPU-bound handler): keep-alive cannot run.
      const until = Date.now() + ms;
      while (Date.now() < until) {
        // spin
      }
    },
  };
  const source = ChaosConsumer.killableSource(await makeSource(), () => consumer);
  const consumer = new ChaosConsumer(chaosConsumerOptions({ claimer, source, concurrency: config.concurrency, deployment: { replicas: 2 }, logger }, config.leaseTtlMs), {
    control,
    ledger,
    rng: new Rng(config.seed).fork(config.workerId),
    handler: config.handler,
    leaseTtlMs: config.leaseTtlMs,
    strict: config.strict,
    effectInTransaction: inbox,
    runStartedAt: config.runStartedAt,
  });

  process.on('message', (message: ToWorker) => {
    if (message.t === 'arm') consumer.arm(message.fault as ArmedFault);
    else if (message.t === 'stop') void stop();
  });
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    clearInterval(stats);
    await consumer.stop();
    await closeClaimer();
    await ledger.close();
    process.exit(0);
  };
  const stats = setInterval(() => {
    const health = consumer.health();
    send({ t: 'stats', workerId: config.workerId, inFlight: health.inFlight, handled: consumer.handled, consuming: health.ready, ...(gateStats ? { gate: gateStats() } : {}) });
  }, 250);
  try {
    await consumer.start();
  } catch (error) {
    send({ t: 'start_failed', workerId: config.workerId, error: String(error) });
    logger.error({ err: error }, 'start failed');
    process.exit(3);
  }
  send({ t: 'ready', workerId: config.workerId });
}

process.on('unhandledRejection', (error) => logger.error({ err: error }, 'unhandled rejection'));
process.on('disconnect', () => process.exit(0)); // the harness is gone
void main();
