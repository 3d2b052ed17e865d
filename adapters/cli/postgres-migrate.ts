/**
 * `twophase postgres migrate`: applies the inbox migrations (twophase/postgres) to a database.
 * Opens one connection from `--url` (or $TWOPHASE_DATABASE_URL / $DATABASE_URL) and closes it.
 * `pg` (an optional peer dependency) and the PostgreSQL adapter are loaded by the command, not
 * with the CLI.
 */
import type { Command } from 'commander';
import { importPeer, loadOrReport } from './peer';
import { type CliIo, printCommandError } from './reporters';
import { badServiceUrl } from './url-check';
import { schemaArgument } from './schema-arg';

/** How long a CLI command waits for a PostgreSQL connection, ms: a URL that points at another kind of server never answers the startup message. */
export const CONNECT_TIMEOUT_MS = 10_000;

/** Environment variables read for the database URL, in order. */
export const DATABASE_URL_ENVS = ['TWOPHASE_DATABASE_URL', 'DATABASE_URL'] as const;

/** What a PostgreSQL command with no URL says (after `error: `): it names every variable {@link databaseUrl} reads. */
export const MISSING_DATABASE_URL = `give --url or set $${DATABASE_URL_ENVS.join(' or $')}`;

/** The database URL: `--url`, else the first non-empty of {@link DATABASE_URL_ENVS}; undefined when none is set. */
export function databaseUrl(flagUrl: string | undefined, env: Readonly<Record<string, string | undefined>>): string | undefined {
  return flagUrl ?? DATABASE_URL_ENVS.map((name) => env[name]).find((v) => v !== undefined && v !== '');
}

/** What a PostgreSQL command loads: pg's `Client` and the PostgreSQL adapter. */
export interface PostgresModules {
  readonly Client: typeof import('pg').Client;
  readonly postgres: typeof import('../postgres');
}

/**
 * Loads `pg` and the PostgreSQL adapter for `command`.
 * @throws MissingPeerError when `pg` is not installed
 */
export async function loadPostgres(command: string): Promise<PostgresModules> {
  const [{ Client }, postgres] = await importPeer('pg', command, () => Promise.all([import('pg'), import('../postgres')]));
  return { Client, postgres };
}

interface MigrateFlags {
  url?: string;
  schema: string;
  tenantsTable?: string;
  tenantsColumn: string;
  dryRun: boolean;
  json: boolean;
}

/** Adds `postgres migrate` to `program`; `setExit` receives the command's exit code. */
export function addPostgresCommands(program: Command, io: CliIo, env: Readonly<Record<string, string | undefined>>, setExit: (code: number) => void): void {
  const postgres = program.command('postgres').description('PostgreSQL inbox tools').exitOverride();
  postgres
    .command('migrate')
    .description('Apply the inbox migrations (forward only, each version once, all pending ones in one transaction).')
    .option('--url <url>', `PostgreSQL URL (default: $${DATABASE_URL_ENVS.join(' or $')})`)
    .option('--schema <schema>', 'schema of the inbox tables (created when missing)', schemaArgument, 'twophase')
    .option('--tenants-table <[schema.]table>', "the application's tenants table; creates the tenant inbox with a foreign key to it")
    .option('--tenants-column <column>', 'key column of the tenants table', 'id')
    .option('--dry-run', 'print what would be applied and its SQL, change nothing', false)
    .option('--json', 'print the report as one JSON object', false)
    .exitOverride()
    .action(async (flags: MigrateFlags) => {
      const url = databaseUrl(flags.url, env);
      if (!url) {
        io.stderr(`error: ${MISSING_DATABASE_URL}\n`);
        setExit(2);
        return;
      }
      const invalid = badServiceUrl(url, 'postgres');
      if (invalid !== undefined) {
        io.stderr(`error: ${invalid}\n`);
        setExit(2);
        return;
      }
      const modules = await loadOrReport(io, setExit, () => loadPostgres('twophase postgres migrate'));
      if (!modules) return;
      const { Client, postgres } = modules;
      const client = new Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
      client.on('error', () => undefined);
      try {
        await client.connect();
        const report = await postgres.migrate(client, {
          schema: flags.schema,
          dryRun: flags.dryRun,
          ...(flags.tenantsTable ? { tenants: postgres.parseTenantsTable(flags.tenantsTable, flags.tenantsColumn) } : {}),
        });
        if (flags.json) io.stdout(`${JSON.stringify(report)}\n`);
        else {
          const verb = report.dryRun ? 'would apply' : 'applied';
          if (report.applied.length === 0) io.stdout(`schema "${report.schema}" is up to date (versions ${report.alreadyApplied.join(', ') || 'none'})\n`);
          for (const m of report.applied) io.stdout(`${verb} ${m.version}: ${m.name}\n`);
          for (const m of report.skipped) io.stdout(`skipped ${m.version}: ${m.name} (${m.reason})\n`);
          if (report.dryRun) io.stdout(`${report.sql.join('\n')}\n`);
        }
        setExit(0);
      } catch (error) {
        printCommandError(io, flags.json, error);
        setExit(1);
      } finally {
        await client.end().catch(() => undefined);
      }
    });
}
