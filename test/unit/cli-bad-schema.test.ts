/**
 * A `--schema` PostgreSQL cannot take as twophase's schema name (a `$`, over 63 bytes, empty) is
 * a usage error (exit code 2) named before any connection is tried, for every command that takes
 * one. It used to exit 1, the code of a database failure.
 */
import { runCliProcess } from '../support/cli-process';

const URL = ['--url', 'postgres://postgres@127.0.0.1:1/none'];

describe('twophase … --schema that is not a usable schema name', () => {
  test.each([
    [['postgres', 'migrate', '--schema', 'a$b', ...URL], /--schema must not contain "\$"/],
    [['postgres', 'migrate', '--schema', 'x'.repeat(64), ...URL], /--schema must be at most 63 bytes/],
    [['keys', 'diagnose', '--key', 'k', '--store', 'postgres', '--schema', 'a$b', ...URL], /--schema must not contain "\$"/],
    [['keys', 'purge', '--store', 'postgres', '--schema', '', ...URL], /--schema must be a non-empty string/],
    [['outbox', 'status', '--schema', 'a$b', ...URL], /--schema must not contain "\$"/],
  ])('twophase %j names the bad schema and exits 2', async (args, named) => {
    const result = await runCliProcess(args as string[], { timeoutMs: 30_000 });
    expect(result.stderr).toMatch(named);
    expect(result.stderr).not.toMatch(/ECONNREFUSED/);
    expect(result.code).toBe(2);
  });
});
