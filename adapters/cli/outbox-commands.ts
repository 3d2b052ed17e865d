/**
 * `twophase outbox relay` (a standalone relay: PostgreSQL → RabbitMQ and/or Kafka, until SIGINT
 * or SIGTERM) and the operator commands `twophase outbox status | list | show | requeue | purge`.
 * Each loads `pg` (and `amqplib` / `kafkajs` for the relay) when it runs: optional peers.
 */
import { type Command, InvalidArgumentError } from 'commander';
import type { Client } from 'pg';
import { OutboxRelay, type OutboxRelayEvent } from '../../src';
import { type OutboxPublisher } from '../../src/adapter-kit';
import { importPeer, loadOrReport } from './peer';
import { printable } from './printable';
import { withMigrateCommand } from './migrate-hint';
import { badServiceUrl } from './url-check';
import { CONNECT_TIMEOUT_MS, DATABASE_URL_ENVS, databaseUrl, loadPostgres, MISSING_DATABASE_URL, type PostgresModules } from './postgres-migrate';
import { type CliIo, printCommandError } from './reporters';
import { schemaArgument } from './schema-arg';

interface Common {
  url?: string;
  schema: string;
  json: boolean;
}

interface RelayFlags extends Common {
  rabbitmqUrl?: string;
  kafkaBrokers?: string;
  name: string;
  listen: boolean;
  pollInterval: number;
  batchSize: number;
  lease: number;
  maxAttempts: number;
  deadKeyPolicy: string;
  keyConcurrency: number;
  claimConcurrency: number;
  shutdownTimeout: number;
  statsInterval: number;
}

function integer(min: number, max: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(`must be an integer in [${min}, ${max}]`);
    return n;
  };
}

/** Adds `outbox relay|status|list|show|requeue|purge` to `program`. */
export function addOutboxCommands(
  program: Command,
  io: CliIo,
  env: Readonly<Record<string, string | undefined>>,
  setExit: (code: number) => void,
  signal: AbortSignal | undefined,
): void {
  const outbox = program.command('outbox').description('transactional outbox: the relay and operator tools').exitOverride();
  const usage = (message: string): void => {
    io.stderr(`error: ${message}\n`);
    setExit(2);
  };
  const common = (command: Command) =>
    command
      .option('--url <url>', `PostgreSQL URL (default: $${DATABASE_URL_ENVS.join(' or $')})`)
      .option('--schema <schema>', 'schema of the outbox table', schemaArgument, 'twophase')
      .option('--json', 'print one JSON object', false)
      .exitOverride();
  /** Connects one client, runs `work`, prints JSON or `human`, sets exit 0 (1 on an error, or `work`'s own code). */
  const withPostgres = async (command: string, flags: Common, work: (client: Client, postgres: PostgresModules['postgres']) => Promise<unknown>, human: (result: unknown) => string, exitOf: (result: unknown) => number = () => 0): Promise<void> => {
    const url = databaseUrl(flags.url, env);
    if (!url) {
      usage(MISSING_DATABASE_URL);
      return;
    }
    const bad = badServiceUrl(url, 'postgres');
    if (bad) {
      usage(bad);
      return;
    }
    const modules = await loadOrReport(io, setExit, () => loadPostgres(command));
    if (!modules) return;
    const client = new modules.Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    client.on('error', () => undefined);
    try {
      await client.connect();
      const result = await work(client, modules.postgres);
      io.stdout(flags.json ? `${JSON.stringify(result ?? null)}\n` : human(result));
      setExit(exitOf(result));
    } catch (error) {
      printCommandError(io, flags.json, withMigrateCommand(error, flags));
      setExit(1);
    } finally {
      await client.end().catch(() => undefined);
    }
  };

  common(outbox.command('status').description('Counts: pending messages, the age of the oldest (the relay lag, ms), leased, dead by reason.')).action(async (flags: Common) => {
    await withPostgres('twophase outbox status', flags, (client, pg) => pg.outboxStatus(client, { schema: flags.schema }), (r) => {
      const s = r as { pending: number; oldestPendingAgeMs: number; leased: number; dead: Record<string, number> };
      const dead = Object.entries(s.dead).map(([reason, n]) => `${reason}=${n}`).join(' ') || 'none';
      return `pending ${s.pending} (oldest ${s.oldestPendingAgeMs} ms, leased ${s.leased})\ndead ${dead}\n`;
    });
  });

  common(outbox.command('list').description('Messages in staging order, without bodies.'))
    .option('--state <state>', 'pending, dead or all', 'all')
    .option('--limit <n>', 'most messages', integer(1, 10_000), 100)
    .action(async (flags: Common & { state: string; limit: number }) => {
      if (!['pending', 'dead', 'all'].includes(flags.state)) {
        usage(`--state must be pending, dead or all, got ${flags.state}`);
        return;
      }
      await withPostgres('twophase outbox list', flags, (client, pg) => pg.listOutbox(client, { schema: flags.schema, state: flags.state as 'all', limit: flags.limit }), (r) => {
        const rows = r as import('../postgres').OutboxListEntry[];
        if (rows.length === 0) return 'no messages\n';
        return rows.map((m) => `${m.id} ${m.state}${m.deadReason ? `(${m.deadReason})` : ''} attempts=${m.attempts} ${m.system} ${JSON.stringify(m.destination)} key=${m.orderingKey ?? '-'} created=${m.createdAt}${m.leasedBy ? ` leased-by=${m.leasedBy}` : ''}${m.lastError ? ` last-error=${JSON.stringify(m.lastError)}` : ''}\n`).join('');
      });
    });

  common(outbox.command('show').description('One message in full: destination, headers, properties, body (exit 1 when no message has this id).'))
    .argument('<id>', 'outbox id (the message id / idempotency-key)')
    .action(async (id: string, flags: Common) => {
      await withPostgres(
        'twophase outbox show',
        flags,
        async (client, pg) => (await pg.showOutbox(client, id, { schema: flags.schema })) ?? { id, found: false },
        (r) => `${JSON.stringify(r, null, 2)}\n`,
        (r) => ((r as { found?: boolean }).found === false ? 1 : 0),
      );
    });

  const deadCommand = (name: 'requeue' | 'purge', description: string) =>
    common(outbox.command(name).description(description))
      .argument('[ids...]', 'outbox ids of dead messages')
      .option('--all-dead', 'every dead message (with --reason: of that reason)', false)
      .option('--reason <reason>', 'with --all-dead: only dead messages of this reason')
      .action(async (ids: string[], flags: Common & { allDead: boolean; reason?: string }) => {
        if ((ids.length > 0) === flags.allDead) {
          usage(`give the ids of dead messages, or --all-dead, not both and not neither`);
          return;
        }
        if (flags.reason !== undefined && !flags.allDead) {
          usage('--reason needs --all-dead');
          return;
        }
        const selection = { schema: flags.schema, ...(flags.allDead ? { allDead: true, ...(flags.reason === undefined ? {} : { reason: flags.reason }) } : { ids }) };
        await withPostgres(
          `twophase outbox ${name}`,
          flags,
          (client, pg) => (name === 'requeue' ? pg.requeueOutbox(client, selection) : pg.purgeOutbox(client, selection)),
          (r) => {
            const report = r as import('../postgres').DeadOperationReport;
            const verb = name === 'requeue' ? 'requeued' : 'purged';
            return `${verb} ${report.ids.length}${report.ids.map((i) => `\n  ${i}`).join('')}\n${report.notDead.length > 0 ? `not dead (left alone): ${report.notDead.join(', ')}\n` : ''}`;
          },
          (r) => ((r as import('../postgres').DeadOperationReport).notDead.length > 0 ? 1 : 0),
        );
      });
  deadCommand('requeue', 'Put dead messages back to pending under the same id (attempts reset); publishes them again.');
  deadCommand('purge', 'Delete dead messages (never pending ones): they will not be published.');

  common(outbox.command('relay').description('Run a relay until SIGINT/SIGTERM: publish staged messages to RabbitMQ and/or Kafka, then remove them. A second signal exits at once.'))
    .option('--rabbitmq-url <url>', 'publish RabbitMQ messages to this broker (amqp://…)')
    .option('--kafka-brokers <list>', 'publish Kafka messages to these brokers (host:port,host:port)')
    .option('--name <name>', 'relay name in logs and leases', 'outbox-relay')
    .option('--no-listen', 'poll only, no LISTEN/NOTIFY (behind a transaction-pooling proxy)')
    .option('--poll-interval <ms>', 'polling period, ms', integer(10, 600_000), 1000)
    .option('--batch-size <n>', 'messages per claim', integer(1, 10_000), 100)
    .option('--lease <ms>', 'lease of a claim, ms', integer(1000, 3_600_000), 30_000)
    .option('--max-attempts <n>', 'publishes of a message before it is dead', integer(1, 1000), 10)
    .option('--dead-key-policy <policy>', 'hold (later messages of a dead message\'s key wait) or continue', 'hold')
    .option('--key-concurrency <n>', 'ordering keys published at once, per claim', integer(1, 1024), 100)
    .option('--claim-concurrency <n>', 'claims in progress at once (the next claimed while one publishes)', integer(1, 16), 2)
    .option('--shutdown-timeout <ms>', 'wait for publishes in flight at stop, ms', integer(0, 600_000), 10_000)
    .option('--stats-interval <ms>', 'a stats line (pending, lag, leased, dead, published) right after start and then every <ms>; 0 = only the first', integer(0, 3_600_000), 60_000)
    .action(async (flags: RelayFlags) => {
      const url = databaseUrl(flags.url, env);
      if (!url) return usage(MISSING_DATABASE_URL);
      const bad = badServiceUrl(url, 'postgres') ?? (flags.rabbitmqUrl === undefined ? undefined : badServiceUrl(flags.rabbitmqUrl, 'rabbitmq'));
      if (bad) return usage(bad);
      if (flags.rabbitmqUrl === undefined && flags.kafkaBrokers === undefined) return usage('give --rabbitmq-url, --kafka-brokers, or both');
      if (flags.deadKeyPolicy !== 'hold' && flags.deadKeyPolicy !== 'continue') return usage(`--dead-key-policy must be hold or continue, got ${flags.deadKeyPolicy}`);
      const command = 'twophase outbox relay';
      const modules = await loadOrReport(io, setExit, async () => {
        const pg = await importPeer('pg', command, () => Promise.all([import('pg'), import('../postgres')]));
        const rabbit = flags.rabbitmqUrl === undefined ? undefined : await importPeer('amqplib', `${command} --rabbitmq-url`, () => import('../rabbitmq'));
        const kafka = flags.kafkaBrokers === undefined ? undefined : await importPeer('kafkajs', `${command} --kafka-brokers`, () => Promise.all([import('kafkajs'), import('../kafka')]));
        return { pg, rabbit, kafka };
      });
      if (!modules) return;
      const [{ Pool }, postgres] = modules.pg;
      const pool = new Pool({ connectionString: url, max: 4, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
      pool.on('error', () => undefined);
      // Every line says when and which relay: several relays may write to one log.
      const line = (event: Record<string, unknown>, text: string) => {
        const time = new Date().toISOString();
        io.stdout(flags.json ? `${JSON.stringify({ ...event, time, relay: flags.name })}\n` : `${time} ${flags.name}: ${text}\n`);
      };
      const log = (level: 'warn' | 'error', obj: object, msg?: string) => io.stderr(`${JSON.stringify({ level, time: new Date().toISOString(), relay: flags.name, msg, ...serializable(obj) })}\n`);
      // Info lines are dropped: the relay's own start line (`twophase: outbox relay started`) would
      // repeat the `relay … started` line this command prints on stdout.
      const logger = {
        info: () => undefined,
        debug: () => undefined,
        warn: (obj: object, msg?: string) => log('warn', obj, msg),
        error: (obj: object, msg?: string) => log('error', obj, msg),
      };
      let statsTimer: NodeJS.Timeout | undefined;
      const publishers: OutboxPublisher[] = [];
      try {
        if (modules.rabbit) publishers.push(new modules.rabbit.RabbitMqOutboxPublisher({ url: flags.rabbitmqUrl!, logger }));
        if (modules.kafka) {
          const [{ Kafka, logLevel }, kafkaAdapter] = modules.kafka;
          const kafka = new Kafka({ clientId: flags.name, brokers: flags.kafkaBrokers!.split(',').map((b) => b.trim()).filter(Boolean), logLevel: logLevel.NOTHING });
          publishers.push(new kafkaAdapter.KafkaOutboxPublisher({ kafka }));
        }
        const relay = new OutboxRelay(
          {
            store: new postgres.PostgresOutboxStore({ pool }, { schema: flags.schema }),
            publisher: publishers,
            ...(flags.listen ? { notifier: new postgres.PostgresOutboxNotifier({ pool, logger }, { schema: flags.schema }) } : {}),
            logger,
            observer: {
              onEvent: (e: OutboxRelayEvent) => {
                if (e.type === 'failed') line({ type: 'failed', id: e.record.id, reason: e.reason, dead: e.dead, attempt: e.record.attempts + 1 }, `${e.dead ? 'dead' : 'failed'} ${e.record.id} (${e.reason}, attempt ${e.record.attempts + 1})`);
              },
            },
          },
          {
            name: flags.name,
            pollIntervalMs: flags.pollInterval,
            batchSize: flags.batchSize,
            leaseMs: flags.lease,
            maxAttempts: flags.maxAttempts,
            deadKeyPolicy: flags.deadKeyPolicy,
            keyConcurrency: flags.keyConcurrency,
            claimConcurrency: flags.claimConcurrency,
            shutdownTimeoutMs: flags.shutdownTimeout,
          },
        );
        await relay.start();
        const started = relay.health();
        line({ type: 'started', name: flags.name, schema: flags.schema, systems: publishers.map((p) => p.system), listening: started.listening }, `relay ${flags.name} started (schema ${flags.schema}; ${publishers.map((p) => p.system).join(' + ')}; ${started.listening ? 'LISTEN/NOTIFY + polling' : 'polling only'})`);
        const stats = async (): Promise<void> => {
          try {
            const st = await relay.stats();
            const h = relay.health();
            const dead = Object.entries(st.dead).map(([reason, n]) => `${n} ${reason}`).join(', ') || 'none';
            line(
              { type: 'stats', pending: st.pending, oldestPendingAgeMs: st.oldestPendingAgeMs, leased: st.leased, dead: st.dead, published: h.published, publishFailures: h.publishFailures, listening: h.listening },
              `${st.pending} pending (oldest ${st.oldestPendingAgeMs} ms), ${st.leased} leased, dead: ${dead}; ${h.published} published, ${h.publishFailures} failed publishes since start`,
            );
          } catch (error) {
            logger.warn({ err: error }, 'outbox relay: reading the outbox counts failed');
          }
        };
        await stats();
        if (flags.statsInterval > 0) statsTimer = setInterval(() => void stats(), flags.statsInterval);
        await new Promise<void>((resolve) => {
          if (!signal || signal.aborted) return resolve();
          signal.addEventListener('abort', () => resolve(), { once: true });
        });
        clearInterval(statsTimer);
        await relay.stop();
        const h = relay.health();
        line({ type: 'stopped', published: h.published, publishFailures: h.publishFailures }, `relay stopped: ${h.published} published, ${h.publishFailures} failed publishes`);
        setExit(0);
      } catch (error) {
        // Shaped as the relay's other lines: the time and the relay's name, on stdout with --json.
        const failure = withMigrateCommand(error, flags);
        const message = failure instanceof Error ? failure.message : String(failure);
        const time = new Date().toISOString();
        if (flags.json) io.stdout(`${JSON.stringify({ type: 'error', error: message, time, relay: flags.name })}\n`);
        else io.stderr(`${time} ${flags.name}: error: ${printable(message)}\n`);
        setExit(1);
      } finally {
        clearInterval(statsTimer);
        await pool.end().catch(() => undefined);
      }
    });
}

/** Log fields that survive JSON.stringify (an error becomes its name and message). */
function serializable(obj: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(obj).map(([k, v]) => [k, v instanceof Error ? { type: v.name, message: v.message } : v]));
}
