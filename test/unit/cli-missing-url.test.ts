/**
 * A PostgreSQL command run with no `--url` and neither environment variable set says how to give
 * one, naming both variables it reads ($TWOPHASE_DATABASE_URL, then $DATABASE_URL), the same way
 * in every command, and exits 2 before loading a client or connecting.
 */
import { runCli } from '../../adapters/cli';

describe('twophase … with no --url and no database URL in the environment', () => {
  test.each([
    [['postgres', 'migrate']],
    [['keys', 'diagnose', '--key', 'k', '--store', 'postgres']],
    [['keys', 'purge', '--store', 'postgres']],
    [['outbox', 'status']],
    [['outbox', 'relay', '--rabbitmq-url', 'amqp://localhost']],
  ])('twophase %j names --url, $TWOPHASE_DATABASE_URL and $DATABASE_URL, and exits 2', async (args) => {
    let stderr = '';
    const code = await runCli(args, { io: { stdout: () => undefined, stderr: (t) => void (stderr += t) }, env: {} });
    expect(stderr).toContain('error: give --url or set $TWOPHASE_DATABASE_URL or $DATABASE_URL\n');
    expect(code).toBe(2);
  });
});
