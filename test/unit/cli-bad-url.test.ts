/**
 * A URL the CLI cannot use is named in the error, as a usage error (exit code 2), before any
 * connection is tried: `--url 'not a url'` used to answer `getaddrinfo ENOTFOUND base`.
 */
import { runCliProcess } from '../support/cli-process';

describe('twophase … --url with something that is not a URL', () => {
  test.each([
    [['keys', 'diagnose', '--key', 'k', '--store', 'postgres', '--url', 'not a url'], /not a url/],
    [['keys', 'purge', '--store', 'postgres', '--url', 'not a url'], /not a url/],
    [['postgres', 'migrate', '--url', 'not a url'], /not a url/],
    [['keys', 'diagnose', '--key', 'k', '--store', 'redis', '--url', 'not a url'], /not a url/],
    [['dlq', 'replay', 'q.dlq', '--url', 'not a url'], /not a url/],
  ])('twophase %j names the bad URL and exits 2', async (args, named) => {
    const result = await runCliProcess(args as string[], { timeoutMs: 30_000 });
    expect(result.stderr).toMatch(named);
    expect(result.stderr).not.toMatch(/ENOTFOUND/);
    expect(result.code).toBe(2);
  });
});
