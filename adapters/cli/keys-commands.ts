/**
 * `twophase keys diagnose` and `twophase keys purge` (store: postgres). Each opens one
 * connection from `--url` (or $TWOPHASE_DATABASE_URL / $DATABASE_URL) and closes it.
 */
import { type Command, InvalidArgumentError } from 'commander';
import { Client } from 'pg';
import { namespaceKey } from '../../src';
import { diagnoseKey, purgeExpired } from '../postgres';
import { DATABASE_URL_ENVS } from './postgres-migrate';
import type { CliIo } from './reporters';

const STORES = ['postgres'];

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
  schema: string;
  json: boolean;
}

/** Adds `keys diagnose` and `keys purge` to `program`. */
export function addKeysCommands(program: Command, io: CliIo, env: Readonly<Record<string, string | undefined>>, setExit: (code: number) => void): void {
  const keys = program.command('keys').description('inspect and clean stored idempotency keys').exitOverride();
  const withClient = async (flags: Common, work: (client: Client) => Promise<unknown>, human: (report: unknown) => string): Promise<void> => {
    if (!STORES.includes(flags.store)) {
      io.stderr(`error: --store ${flags.store} is not supported by this command (supported: ${STORES.join(', ')})\n`);
      setExit(2);
      return;
    }
    const url = flags.url ?? DATABASE_URL_ENVS.map((name) => env[name]).find((v) => v !== undefined && v !== '');
    if (!url) {
      io.stderr(`error: give --url or set $${DATABASE_URL_ENVS[0]}\n`);
      setExit(2);
      return;
    }
    const client = new Client({ connectionString: url });
    client.on('error', () => undefined);
    try {
      await client.connect();
      const report = await work(client);
      io.stdout(flags.json ? `${JSON.stringify(report)}\n` : human(report));
      setExit(0);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (flags.json) io.stdout(`${JSON.stringify({ type: 'error', error: message })}\n`);
      else io.stderr(`error: ${message}\n`);
      setExit(1);
    } finally {
      await client.end().catch(() => undefined);
    }
  };
  const common = (command: Command) =>
    command
      .requiredOption('--store <store>', `claim store (${STORES.join(', ')})`)
      .option('--url <url>', `PostgreSQL URL (default: $${DATABASE_URL_ENVS.join(' or $')})`)
      .option('--schema <schema>', 'schema of the inbox tables', 'twophase')
      .option('--json', 'print one JSON object', false)
      .exitOverride();

  common(keys.command('diagnose').description('What a delivery of this key would meet: missing, in_progress, lease_expired, replayable, fingerprint_conflict, failed, expired.'))
    .requiredOption('--key <key>', 'the idempotency key (as claimed, or with --consumer the raw message key)')
    .option('--consumer <name>', "the consumer's name: namespaces --key as the consumer does")
    .option('--tenant <tenant>', 'the tenant, for the tenant inbox')
    .option('--fingerprint <fingerprint>', 'compare with the stored fingerprint')
    .action(async (flags: Common & { key: string; consumer?: string; tenant?: string; fingerprint?: string }) => {
      const key = flags.consumer ? namespaceKey(flags.consumer, flags.key) : flags.key;
      await withClient(
        flags,
        (client) => diagnoseKey(client, { schema: flags.schema, key, ...(flags.tenant ? { tenant: flags.tenant } : {}), ...(flags.fingerprint ? { fingerprint: flags.fingerprint } : {}) }),
        (report) => `${JSON.stringify(report, null, 2)}\n`,
      );
    });

  common(keys.command('purge').description('Delete expired rows in bounded batches (short transactions, no long locks), with counts.'))
    .option('--older-than <duration>', 'only rows expired at least this long ago (ms, or 30s, 15m, 6h, 7d)', parseDurationMs, 3_600_000)
    .option('--batch-size <n>', 'rows per DELETE', parseBatch, 1000)
    .option('--dry-run', 'count, delete nothing', false)
    .action(async (flags: Common & { olderThan: number; batchSize: number; dryRun: boolean }) => {
      await withClient(
        flags,
        (client) => purgeExpired(client, { schema: flags.schema, olderThanMs: flags.olderThan, batchSize: flags.batchSize, dryRun: flags.dryRun }),
        (report) => {
          const r = report as { dryRun: boolean; tables: Record<string, { deleted: number }> };
          return Object.entries(r.tables).map(([t, c]) => `${t}: ${r.dryRun ? 'would delete' : 'deleted'} ${c.deleted}\n`).join('') || 'nothing to purge\n';
        },
      );
    });
}
