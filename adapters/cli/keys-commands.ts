/**
 * `twophase keys diagnose` (store: postgres or redis) and `twophase keys purge` (store: postgres;
 * Redis deletes expired records itself). Each opens one connection from `--url` and closes it:
 * PostgreSQL from $TWOPHASE_DATABASE_URL / $DATABASE_URL, Redis from $TWOPHASE_REDIS_URL or
 * redis://127.0.0.1:6379. The store's client library (`pg` or `ioredis`, optional peer
 * dependencies) is loaded by the command that uses it, so each store's commands work without the
 * other store's client installed.
 */
import { type Command, InvalidArgumentError } from 'commander';
import type { Client } from 'pg';
import { namespaceKey } from '../../src';
import { diagnoseRedisKey } from '../redis';
import { importPeer, loadOrReport } from './peer';
import { withMigrateCommand } from './migrate-hint';
import { CONNECT_TIMEOUT_MS, DATABASE_URL_ENVS, databaseUrl, loadPostgres, MISSING_DATABASE_URL, type PostgresModules } from './postgres-migrate';
import { printableLines } from './printable';
import { badServiceUrl } from './url-check';
import { type CliIo, printCommandError } from './reporters';
import { schemaArgument } from './schema-arg';

const STORES = ['postgres', 'redis'];

/** Environment variable with the default Redis URL of `keys diagnose --store redis`. */
export const REDIS_URL_ENV = 'TWOPHASE_REDIS_URL';

/** Redis URL used when neither `--url` nor $TWOPHASE_REDIS_URL is given. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/** Why `keys purge --store redis` is refused. */
export const REDIS_PURGE_REFUSAL =
  'keys purge supports --store postgres only: Redis deletes each twophase record itself when its retention (doneTtlMs, the key\'s PX) ends, so there is nothing to purge';

/** Options that belong to one store only; given with the other store they are refused. */
const STORE_ONLY: Readonly<Record<string, { readonly store: string; readonly flag: string }>> = {
  schema: { store: 'postgres', flag: '--schema' },
  tenant: { store: 'postgres', flag: '--tenant' },
  prefix: { store: 'redis', flag: '--prefix' },
};

/** Parses `90000`, `500ms`, `30s`, `15m`, `6h` or `7d` into milliseconds. */
export function parseDurationMs(text: string): number {
  const match = /^(\d+)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!match) throw new InvalidArgumentError('must be milliseconds or a number with ms, s, m, h or d');
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(match[2] ?? 'ms') as 'ms'];
  return Number(match[1]) * unit;
}

function parseBatch(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 100_000) throw new InvalidArgumentError('must be an integer in [1, 100000]');
  return n;
}

interface Common {
  store: string;
  url?: string;
  schema?: string;
  prefix?: string;
  tenant?: string;
  json: boolean;
}

type DiagnoseFlags = Common & { key: string; consumer?: string; name?: string; fingerprint?: string };

/** Adds `keys diagnose` and `keys purge` to `program`. */
export function addKeysCommands(program: Command, io: CliIo, env: Readonly<Record<string, string | undefined>>, setExit: (code: number) => void): void {
  const keys = program.command('keys').description('inspect and clean stored idempotency keys').exitOverride();
  const usage = (message: string): void => {
    io.stderr(`error: ${message}\n`);
    setExit(2);
  };
  /** Checks --store and the options that belong to the other store; false (exit 2 set) when refused. */
  const checkStore = (flags: Common, stores: readonly string[]): boolean => {
    if (!stores.includes(flags.store)) {
      usage(`--store ${flags.store} is not supported by this command (supported: ${stores.join(', ')})`);
      return false;
    }
    for (const [field, only] of Object.entries(STORE_ONLY)) {
      if (flags[field as keyof Common] !== undefined && only.store !== flags.store) {
        usage(`${only.flag} applies to --store ${only.store} only${field === 'tenant' ? ' (the Redis claimer has no tenants)' : ''}`);
        return false;
      }
    }
    return true;
  };
  /** Runs `work`, prints its report (JSON or `human`), sets exit 0, or prints the error and sets exit 1. */
  const report = async (flags: Common, work: () => Promise<unknown>, human: (report: unknown) => string, failure: (error: unknown) => unknown = (error) => error): Promise<void> => {
    try {
      const result = await work();
      io.stdout(flags.json ? `${JSON.stringify(result)}\n` : printableLines(human(result)));
      setExit(0);
    } catch (error) {
      printCommandError(io, flags.json, failure(error));
      setExit(1);
    }
  };
  const withPostgres = async (
    command: string,
    flags: Common,
    work: (client: Client, postgres: PostgresModules['postgres']) => Promise<unknown>,
    human: (report: unknown) => string,
  ): Promise<void> => {
    const url = databaseUrl(flags.url, env);
    if (!url) {
      usage(MISSING_DATABASE_URL);
      return;
    }
    const invalid = badServiceUrl(url, 'postgres');
    if (invalid !== undefined) {
      usage(invalid);
      return;
    }
    const modules = await loadOrReport(io, setExit, () => loadPostgres(command));
    if (!modules) return;
    const client = new modules.Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    client.on('error', () => undefined);
    try {
      await report(flags, async () => {
        await client.connect();
        return work(client, modules.postgres);
      }, human, (error) => withMigrateCommand(error, flags));
    } finally {
      await client.end().catch(() => undefined);
    }
  };
  const withRedis = async (flags: Common, work: (client: import('ioredis').Redis) => Promise<unknown>, human: (report: unknown) => string): Promise<void> => {
    const url = flags.url ?? (env[REDIS_URL_ENV] || DEFAULT_REDIS_URL);
    const invalid = badServiceUrl(url, 'redis');
    if (invalid !== undefined) {
      usage(invalid);
      return;
    }
    // Loaded here so the PostgreSQL commands work without the optional ioredis peer installed.
    const ioredis = await loadOrReport(io, setExit, () => importPeer('ioredis', 'twophase keys diagnose --store redis', () => import('ioredis')));
    if (!ioredis) return;
    const { Redis } = ioredis;
    // One attempt, no reconnect loop: a CLI reports an unreachable Redis instead of waiting.
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 5000 });
    let lastError: Error | undefined;
    client.on('error', (error: Error) => {
      lastError = error;
    });
    try {
      await report(flags, async () => {
        try {
          await client.connect();
        } catch (error) {
          const reason = lastError?.message ?? (error instanceof Error ? error.message : String(error));
          throw new Error(`cannot connect to Redis at ${client.options.host ?? '?'}:${client.options.port ?? '?'}: ${reason}`, { cause: error });
        }
        return work(client);
      }, human);
    } finally {
      client.disconnect();
    }
  };
  const common = (command: Command) =>
    command
      .requiredOption('--store <store>', 'claim store (postgres, redis)')
      .option('--url <url>', `PostgreSQL URL (default: $${DATABASE_URL_ENVS.join(' or $')}) or Redis URL (default: $${REDIS_URL_ENV} or ${DEFAULT_REDIS_URL})`)
      .option('--schema <schema>', 'postgres: schema of the inbox tables (default: twophase)', schemaArgument)
      .option('--json', 'print one JSON object', false)
      .exitOverride();

  common(
    keys
      .command('diagnose')
      .description(
        'What a delivery of this key would meet: missing, in_progress, lease_expired, replayable, fingerprint_conflict, ' +
          'failed, expired (postgres), released, foreign (redis).',
      ),
  )
    .requiredOption('--key <key>', 'the idempotency key (as claimed, or with --consumer/--name the raw message key)')
    .option('--consumer <name>', "the consumer's name: namespaces --key as the consumer does")
    .option('--name <name>', 'same as --consumer (the consumer option is called name)')
    .option('--tenant <tenant>', 'postgres: the tenant, for the tenant inbox')
    .option('--prefix <prefix>', 'redis: the RedisClaimer prefix option (default: twophase)')
    .option('--fingerprint <fingerprint>', 'compare with the stored fingerprint')
    .action(async (flags: DiagnoseFlags) => {
      if (!checkStore(flags, STORES)) return;
      if (flags.consumer !== undefined && flags.name !== undefined && flags.consumer !== flags.name) {
        usage('give either --consumer or --name, not two different names');
        return;
      }
      const consumer = flags.consumer ?? flags.name;
      let key: string;
      try {
        key = consumer !== undefined ? namespaceKey(consumer, flags.key) : flags.key;
      } catch (error) {
        usage(error instanceof Error ? error.message : String(error));
        return;
      }
      const human = (result: unknown) => `${JSON.stringify(result, null, 2)}\n`;
      const fingerprint = flags.fingerprint === undefined ? {} : { fingerprint: flags.fingerprint };
      if (flags.store === 'redis') {
        await withRedis(flags, (client) => diagnoseRedisKey(client, { key, ...(flags.prefix === undefined ? {} : { prefix: flags.prefix }), ...fingerprint }), human);
        return;
      }
      await withPostgres(
        'twophase keys diagnose --store postgres',
        flags,
        (client, postgres) => postgres.diagnoseKey(client, { schema: flags.schema ?? 'twophase', key, ...(flags.tenant ? { tenant: flags.tenant } : {}), ...fingerprint }),
        human,
      );
    });

  common(keys.command('purge').description('postgres: delete expired rows in bounded batches (short transactions, no long locks), with counts. Redis expires its records itself.'))
    .option('--older-than <duration>', 'only rows expired at least this long ago (ms, or 30s, 15m, 6h, 7d)', parseDurationMs, 3_600_000)
    .option('--batch-size <n>', 'rows per DELETE', parseBatch, 1000)
    .option('--dry-run', 'count, delete nothing', false)
    .action(async (flags: Common & { olderThan: number; batchSize: number; dryRun: boolean }) => {
      if (flags.store === 'redis') {
        usage(REDIS_PURGE_REFUSAL);
        return;
      }
      if (!checkStore(flags, ['postgres'])) return;
      await withPostgres(
        'twophase keys purge --store postgres',
        flags,
        (client, postgres) => postgres.purgeExpired(client, { schema: flags.schema ?? 'twophase', olderThanMs: flags.olderThan, batchSize: flags.batchSize, dryRun: flags.dryRun }),
        (report) => {
          const r = report as { dryRun: boolean; tables: Record<string, { deleted: number }> };
          return Object.entries(r.tables).map(([t, c]) => `${t}: ${r.dryRun ? 'would delete' : 'deleted'} ${c.deleted}\n`).join('') || 'nothing to purge\n';
        },
      );
    });
}
