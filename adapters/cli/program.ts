/**
 * The `twophase` command line, built with commander: `twophase dlq replay`, `twophase postgres migrate`,
 * `twophase keys diagnose|purge`, `twophase outbox relay|status|list|show|requeue|purge`.
 */
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { REPLAY_BACKENDS } from './backends';
import { addKeysCommands } from './keys-commands';
import { addOutboxCommands } from './outbox-commands';
import { ConfigurationError } from '../../src';
import { MissingPeerError } from './peer';
import { addPostgresCommands } from './postgres-migrate';
import { DEFAULT_REPLAY_WINDOW, MAX_REPLAY_WINDOW, replayDeadLetters } from './replay';
import type { ReplayBackend, ReplayBackendFactory } from './replay-backend';
import { type CliIo, humanReporter, jsonReporter } from './reporters';
import { packageVersion } from './version';
import { badServiceUrl } from './url-check';

/** Exit codes of the CLI. */
export const EXIT = {
  /** Every examined message was replayed (or, in a dry run, listed); skipped ones were reported. */
  ok: 0,
  /** An error stopped the run; messages not replayed stay in the dead-letter queue. */
  failed: 1,
  /** Invalid command line, or a command needs an optional peer dependency that is not installed. */
  usage: 2,
} as const;

/** Environment variable with the default AMQP URL. */
export const AMQP_URL_ENV = 'TWOPHASE_AMQP_URL';

/** What `runCli` can be given besides the arguments (tests, embedding). */
export interface CliContext {
  readonly io?: CliIo;
  /** Aborts a running replay after the message in progress. */
  readonly signal?: AbortSignal;
  /** Replay backends by broker name. Default: {@link REPLAY_BACKENDS}. */
  readonly backends?: Readonly<Record<string, ReplayBackendFactory>>;
  readonly env?: Readonly<Record<string, string | undefined>>;
}

const processIo: CliIo = {
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
};

/**
 * Runs the CLI with user arguments (without `node` and the script path) and resolves with the
 * exit code. Never calls `process.exit`.
 */
export async function runCli(args: readonly string[], context: CliContext = {}): Promise<number> {
  const io = context.io ?? processIo;
  const backends = context.backends ?? REPLAY_BACKENDS;
  const env = context.env ?? process.env;
  let exitCode: number = EXIT.ok;
  const program = new Command('twophase')
    .description('twophase: effect-once message consumers; operational tools')
    .version(packageVersion(), '-V, --version', 'print the twophase version')
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr });
  const dlq = program.command('dlq').description('dead-letter queue tools').exitOverride();
  dlq
    .command('replay')
    .description(
      'Move dead-lettered messages back to the work queue the dead-letter queue belongs to (RabbitMQ: straight to the queue, ' +
        'never to a route recorded in message headers unless --trust-recorded-route; Kafka: the topic twophase recorded). ' +
        'Each copy is confirmed by the broker before its DLQ copy is removed, so stopping or killing the tool loses nothing.',
    )
    .argument('<dlq>', 'dead-letter queue to replay from (for example orders.dlq)')
    .option('--broker <name>', `broker backend (${Object.keys(backends).join(', ')})`, 'rabbitmq')
    .option('--url <url>', `broker URL (default: $${AMQP_URL_ENV} or amqp://guest:guest@127.0.0.1:5672)`)
    .option('--limit <n>', 'replay at most n messages', parseLimit)
    .option('--dry-run', 'list what would be replayed with each message\'s recorded error text, change nothing', false)
    .option('--window <n>', `republishes awaiting their broker confirm at once, 1-${MAX_REPLAY_WINDOW} (default ${DEFAULT_REPLAY_WINDOW})`, parseWindow)
    .option('--json', 'print one JSON object per line on stdout instead of progress text', false)
    .option('--to-exchange <exchange>', 'send to this exchange instead of the original one')
    .option('--to-routing-key <key>', 'routing key to use with --to-exchange (default: the original)')
    .option('--to-queue <queue>', 'send straight to this queue (default exchange) instead of the original route')
    .option('--client <name>', 'Kafka client library with --broker kafka: kafkajs or platformatic (@platformatic/kafka, Node >= 22.22)')
    .option('--queue <queue>', 'RabbitMQ: the work queue the DLQ belongs to, where messages go back (default: the DLQ name less ".dlq")')
    .option(
      '--trust-recorded-route',
      'RabbitMQ: send each message to the exchange and routing key recorded in its headers; anyone who can publish to the work exchange can write them',
      false,
    )
    .exitOverride()
    .action(
      async (
        source: string,
        opts: {
          broker: string;
          client?: string;
          url?: string;
          limit?: number;
          window?: number;
          dryRun: boolean;
          json: boolean;
          toExchange?: string;
          toRoutingKey?: string;
          toQueue?: string;
          queue?: string;
          trustRecordedRoute: boolean;
        },
      ) => {
      const factory = backends[opts.broker];
      if (!factory) {
        io.stderr(`error: unknown --broker "${opts.broker}" (known: ${Object.keys(backends).join(', ')})\n`);
        exitCode = EXIT.usage;
        return;
      }
      if (opts.toExchange !== undefined && opts.toQueue !== undefined) {
        io.stderr('error: give either --to-exchange or --to-queue, not both\n');
        exitCode = EXIT.usage;
        return;
      }
      if (opts.client !== undefined && opts.broker !== 'kafka') {
        io.stderr(`error: --client chooses the Kafka client library; it needs --broker kafka\n`);
        exitCode = EXIT.usage;
        return;
      }
      if (opts.toRoutingKey !== undefined && opts.toExchange === undefined) {
        io.stderr('error: --to-routing-key needs --to-exchange\n');
        exitCode = EXIT.usage;
        return;
      }
      const url = opts.url ?? env[AMQP_URL_ENV];
      const invalid = opts.broker === 'rabbitmq' && url !== undefined && url !== '' ? badServiceUrl(url, 'rabbitmq') : undefined;
      if (invalid !== undefined) {
        io.stderr(`error: ${invalid}\n`);
        exitCode = EXIT.usage;
        return;
      }
      let backend: ReplayBackend;
      try {
        backend = await factory({
          url: opts.url ?? env[AMQP_URL_ENV],
          toExchange: opts.toExchange,
          toRoutingKey: opts.toRoutingKey,
          toQueue: opts.toQueue,
          workQueue: opts.queue,
          trustRecordedRoute: opts.trustRecordedRoute ? true : undefined,
          client: opts.client,
        });
      } catch (error) {
        if (!(error instanceof MissingPeerError) && !(error instanceof ConfigurationError)) throw error;
        io.stderr(`error: ${error.message}\n`);
        exitCode = EXIT.usage;
        return;
      }
      const report = opts.json ? jsonReporter(io) : humanReporter(io);
      try {
        await replayDeadLetters(backend, { source, limit: opts.limit, window: opts.window, dryRun: opts.dryRun, signal: context.signal }, report);
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        if (opts.json) io.stdout(`${JSON.stringify({ type: 'error', error: message })}\n`);
        else io.stderr(`error: ${message}\n`);
        exitCode = EXIT.failed;
      }
      },
    );
  const setExit = (code: number) => {
    exitCode = code;
  };
  addPostgresCommands(program, io, env, setExit);
  addKeysCommands(program, io, env, setExit);
  addOutboxCommands(program, io, env, setExit, context.signal);
  try {
    await program.parseAsync([...args], { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end here too, with exit code 0.
      return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    throw error;
  }
  return exitCode;
}

function parseWindow(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > MAX_REPLAY_WINDOW) throw new InvalidArgumentError(`must be an integer in [1, ${MAX_REPLAY_WINDOW}]`);
  return n;
}

function parseLimit(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}
