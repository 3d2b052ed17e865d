/**
 * `twophase outbox …` against a schema that was never migrated, on the real PostgreSQL: the error
 * names the `twophase postgres migrate` command to run, with the command's own `--schema` and
 * (when it was given one) `--url`, and that command, run as printed, makes the schema usable.
 */
import { Pool } from 'pg';
import { runCli } from '../../../adapters/cli';
import { describeWithServices } from '../../support/services';
import { pgConfig, pgUrl, uniqueSchema } from './support/pg-helpers';

function capture(): { io: { stdout: (t: string) => void; stderr: (t: string) => void }; out: () => string; err: () => string } {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { stdout: (t) => void out.push(t), stderr: (t) => void err.push(t) }, out: () => out.join(''), err: () => err.join('') };
}

/** The words of the backquoted `twophase postgres migrate …` command in `text` (no quoting in it: plain words only). */
function printedMigrate(text: string): string[] {
  const command = /`(twophase postgres migrate[^`]*)`/.exec(text)?.[1];
  if (command === undefined) throw new Error(`no migrate command in: ${text}`);
  expect(command).not.toMatch(/['"\\]/);
  return command.split(' ');
}

describeWithServices(['postgres'], 'twophase outbox on a schema that is not migrated', () => {
  let schema: string;
  const pool = new Pool(pgConfig({ max: 2 }));
  beforeEach(() => {
    schema = uniqueSchema('outbox_unmigrated');
  });
  afterEach(async () => {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  });
  afterAll(async () => {
    await pool.end();
  });

  const run = async (args: string[], env: Record<string, string> = {}) => {
    const c = capture();
    const code = await runCli(args, { io: c.io, env });
    return { code, ...c };
  };

  test('status --url … --schema X: the hint is `twophase postgres migrate --url … --schema X`, and running it as printed makes status work', async () => {
    const failed = await run(['outbox', 'status', '--url', pgUrl(), '--schema', schema]);
    expect(failed.code).toBe(1);
    expect(failed.err()).toContain(`run \`twophase postgres migrate --url ${pgUrl()} --schema ${schema}\``);
    const words = printedMigrate(failed.err());
    expect(words.slice(0, 3)).toEqual(['twophase', 'postgres', 'migrate']);
    const migrated = await run(words.slice(1));
    expect(migrated.code).toBe(0);
    const status = await run(['outbox', 'status', '--url', pgUrl(), '--schema', schema, '--json']);
    expect(status.code).toBe(0);
    expect(JSON.parse(status.out())).toEqual({ pending: 0, oldestPendingAgeMs: 0, leased: 0, dead: {} });
  });

  test('with the URL from $TWOPHASE_DATABASE_URL (--json), the hint needs no --url; the same environment runs it', async () => {
    const env = { TWOPHASE_DATABASE_URL: pgUrl() };
    const failed = await run(['outbox', 'list', '--schema', schema, '--json'], env);
    expect(failed.code).toBe(1);
    const error = (JSON.parse(failed.out()) as { type: string; error: string }).error;
    expect(error).toContain(`run \`twophase postgres migrate --schema ${schema}\``);
    expect((await run(printedMigrate(error).slice(1), env)).code).toBe(0);
    expect((await run(['outbox', 'status', '--schema', schema], env)).code).toBe(0);
  });

  test('a password in --url is left out of the hint, which says so', async () => {
    const url = pgUrl().replace('://postgres@', '://postgres:s3cret@');
    const failed = await run(['outbox', 'status', '--url', url, '--schema', schema]);
    expect(failed.code).toBe(1);
    expect(failed.err()).not.toContain('s3cret');
    expect(failed.err()).toContain(`\`twophase postgres migrate --url ${pgUrl()} --schema ${schema}\` (the password is left out`);
  });

  test('outbox relay on the schema: the start error carries the same runnable hint', async () => {
    const failed = await run(['outbox', 'relay', '--url', pgUrl(), '--schema', schema, '--rabbitmq-url', 'amqp://guest:guest@127.0.0.1:5672']);
    expect(failed.code).toBe(1);
    expect(failed.err()).toContain(`\`twophase postgres migrate --url ${pgUrl()} --schema ${schema}\``);
  });

  const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

  test('outbox relay that fails to start: its error line carries the time and the relay name, as its other lines', async () => {
    const failed = await run(['outbox', 'relay', '--url', pgUrl(), '--schema', schema, '--rabbitmq-url', 'amqp://guest:guest@127.0.0.1:5672', '--name', 'relay-a']);
    expect(failed.code).toBe(1);
    const lines = failed.err().split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    const [time, rest] = [lines[0]!.slice(0, lines[0]!.indexOf(' ')), lines[0]!.slice(lines[0]!.indexOf(' ') + 1)];
    expect(time).toMatch(ISO_TIME);
    expect(Math.abs(Date.now() - Date.parse(time))).toBeLessThan(60_000);
    expect(rest).toMatch(/^relay-a: error: the outbox schema ".*" has no migrations table/);
  });

  test('outbox relay --json that fails to start: { type: error, error, time, relay }', async () => {
    const failed = await run(['outbox', 'relay', '--url', pgUrl(), '--schema', schema, '--rabbitmq-url', 'amqp://guest:guest@127.0.0.1:5672', '--name', 'relay-b', '--json']);
    expect(failed.code).toBe(1);
    const lines = failed.out().split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toEqual([{ type: 'error', error: expect.stringMatching(/has no migrations table/), time: expect.stringMatching(ISO_TIME), relay: 'relay-b' }]);
  });
});
