/**
 * A private PostgreSQL server for fault injection: `initdb` into a temporary directory, then
 * `pg_ctl start|stop` on a free loopback port, run as the `postgres` OS user when the tests run as
 * root (initdb refuses root). The shared server on 5432 is never touched. `destroy()` stops the
 * server and removes its directory.
 */
import { execFile } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The newest /usr/lib/postgresql/<version>/bin, or undefined. */
export function postgresBinDir(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(root, versions[0], 'bin');
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

async function freePort(): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = 30000 + Math.floor(Math.random() * 10000);
    if (await portFree(port)) return port;
  }
  throw new Error('no free loopback port found');
}

export class PostgresServerProcess {
  private constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly bin: string,
    private readonly asPostgres: boolean,
  ) {}

  /** initdb + start. */
  static async create(): Promise<PostgresServerProcess> {
    const bin = postgresBinDir();
    if (!bin) throw new Error('no PostgreSQL binaries under /usr/lib/postgresql/*/bin');
    const asPostgres = process.getuid?.() === 0;
    const dir = mkdtempSync(join(tmpdir(), 'twophase-pg-'));
    chmodSync(dir, 0o700);
    if (asPostgres) {
      const { stdout } = await run('id', ['-u', 'postgres']);
      const { stdout: gid } = await run('id', ['-g', 'postgres']);
      chownSync(dir, Number(stdout.trim()), Number(gid.trim()));
    }
    const server = new PostgresServerProcess(await freePort(), dir, bin, asPostgres);
    await server.exec('initdb', ['-D', join(dir, 'data'), '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8']);
    await server.start();
    return server;
  }

  private exec(tool: string, args: string[]): Promise<{ stdout: string }> {
    const path = join(this.bin, tool);
    return this.asPostgres ? run('runuser', ['-u', 'postgres', '--', path, ...args], { timeout: 60_000 }) : run(path, args, { timeout: 60_000 });
  }

  async start(): Promise<void> {
    const options = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`;
    await this.exec('pg_ctl', ['-D', join(this.dir, 'data'), '-l', join(this.dir, 'log'), '-o', options, '-w', '-t', '30', 'start']);
  }

  /** Fast shutdown: terminates every session (mode `immediate` = crash-like). */
  async stop(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    await this.exec('pg_ctl', ['-D', join(this.dir, 'data'), '-m', mode, '-w', '-t', '30', 'stop']);
  }

  async destroy(): Promise<void> {
    await this.stop('immediate').catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
