/**
 * A chaos outbox relay process: one OutboxRelay (PostgresOutboxStore with LISTEN/NOTIFY, and the
 * run's broker publisher) on the run's outbox schema. Forked by the outbox stacks with its config
 * as JSON in argv[2]; takes `arm` and `stop` messages, reports `ready` and periodic `stats`.
 *
 * Armed kills fire at a step of the relay's next claim and end the process with SIGKILL:
 * - `kill_after_claim`: the relay observer's `claimed` event (the claim committed, nothing sent);
 * - `kill_before_confirm`: inside a wrapped publisher, once the inner publish was sent and before
 *   the relay saw its confirm (the broker may or may not have the message);
 * - `kill_after_confirm`: the observer's `published` event (the broker confirmed, the row is
 *   still in the table: a relay taking the lease over publishes it again, same id).
 *
 * A fault is written to the run's fault file with a synchronous append before the kill, so the
 * log line survives it (the harness copies the file into `chaos_faults`).
 */
import { appendFileSync } from 'node:fs';
import { Pool } from 'pg';
import { type Logger, OutboxRelay, type OutboxRelayEvent } from '../../src';
import { type OutboxPublisher } from '../../src/adapter-kit';
import { pgConfig } from './ledger';
import type { FromWorker, RelayFault, RelayWorkerConfig, ToWorker } from './protocol';

const config = JSON.parse(process.argv[2]!) as RelayWorkerConfig;
const armed = new Set<RelayFault>();

const logger: Logger = {
  debug: () => undefined,
  info: () => undefined,
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

/** Logs the fault (synchronously: it must survive the kill) and SIGKILLs this process. */
function die(fault: RelayFault, detail: string): never {
  armed.delete(fault);
  appendFileSync(config.faultFile, `${JSON.stringify({ elapsedMs: Date.now() - config.runStartedAt, kind: fault, target: config.workerId, detail })}\n`);
  process.kill(process.pid, 'SIGKILL');
  // SIGKILL to oneself is delivered before the next instruction; this only satisfies the type.
  throw new Error('unreachable');
}

async function innerPublisher(): Promise<OutboxPublisher> {
  if (config.broker === 'rabbitmq') {
    const { RabbitMqOutboxPublisher } = await import('../../adapters/rabbitmq');
    return new RabbitMqOutboxPublisher({ url: config.amqpUrl!, connectionName: `chaos-${config.runId}-${config.workerId}`, publishTimeoutMs: 5000, reconnectDelayMs: 300, logger });
  }
  const { Kafka, logLevel } = await import('kafkajs');
  const { KafkaOutboxPublisher } = await import('../../adapters/kafka');
  const kafka = new Kafka({ clientId: `chaos-${config.workerId}`, brokers: [...config.kafkaBrokers!], logLevel: logLevel.NOTHING });
  return new KafkaOutboxPublisher({ kafka }, { publishTimeoutMs: 5000 });
}

/** The broker publisher, with the `kill_before_confirm` point between the send and the confirm. */
function killable(inner: OutboxPublisher): OutboxPublisher {
  return {
    system: inner.system,
    start: () => inner.start?.() ?? Promise.resolve(),
    close: () => inner.close?.() ?? Promise.resolve(),
    ...(inner.classify ? { classify: (error: unknown) => inner.classify!(error) } : {}),
    publish: async (record) => {
      if (!armed.has('kill_before_confirm')) return inner.publish(record);
      const confirmed = inner.publish(record).then(
        () => 'confirmed',
        () => 'failed',
      );
      // Let the client write the message to its socket (a turn of the event loop), then die
      // whatever the broker answered meanwhile: the relay never sees the confirm.
      const seen = await Promise.race([confirmed, new Promise<string>((resolve) => setImmediate(() => resolve('not yet confirmed')))]);
      return die('kill_before_confirm', `${record.id} (key ${record.orderingKey ?? '-'}): sent, ${seen}`);
    },
  };
}

function onRelayEvent(event: OutboxRelayEvent): void {
  if (event.type === 'claimed' && armed.has('kill_after_claim')) die('kill_after_claim', `${event.ids.length} rows leased under token ${event.fencingToken}`);
  if (event.type === 'published' && armed.has('kill_after_confirm')) die('kill_after_confirm', `${event.record.id} confirmed, not deleted (token ${event.fencingToken})`);
}

async function main(): Promise<void> {
  const { PostgresOutboxNotifier, PostgresOutboxStore } = await import('../../adapters/postgres');
  const pool = new Pool({ ...pgConfig(4), application_name: `${config.sessionPrefix}-${config.workerId}` });
  pool.on('error', () => undefined); // sessions ended by the server (pg_terminate)
  const relay = new OutboxRelay(
    {
      store: new PostgresOutboxStore({ pool }, { schema: config.schema, operationTimeoutMs: 5000 }),
      publisher: killable(await innerPublisher()),
      notifier: new PostgresOutboxNotifier({ pool, logger }, { schema: config.schema, reconnectDelayMs: 300 }),
      logger,
      observer: { onEvent: onRelayEvent },
    },
    {
      name: config.workerId,
      batchSize: config.batchSize,
      leaseMs: config.leaseMs,
      extendIntervalMs: Math.floor(config.leaseMs / 3),
      pollIntervalMs: 250,
      retryBackoff: { initialDelayMs: 100, maxDelayMs: 1000, multiplier: 2, jitter: 0.2 },
      shutdownTimeoutMs: 5000,
    },
  );
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    clearInterval(stats);
    await relay.stop().catch((error: unknown) => logger.error({ err: error }, 'relay stop failed'));
    await pool.end().catch(() => undefined);
    process.exit(0);
  };
  process.on('message', (message: ToWorker) => {
    if (message.t === 'arm') armed.add(message.fault as RelayFault);
    else if (message.t === 'stop') void stop();
  });
  const stats = setInterval(() => send({ t: 'stats', workerId: config.workerId, inFlight: 0, handled: relay.health().published, consuming: true }), 250);
  try {
    await relay.start();
  } catch (error) {
    send({ t: 'start_failed', workerId: config.workerId, error: String(error) });
    logger.error({ err: error }, 'start failed');
    process.exit(3);
  }
  send({ t: 'ready', workerId: config.workerId });
}

process.on('unhandledRejection', (error) => logger.error({ err: error }, 'unhandled rejection'));
process.on('disconnect', () => process.exit(0));
void main();
