/**
 * Private redis-server processes for fault injection: a standalone server on a free loopback
 * port (stop, restart, pause), and a 3-master cluster built with `redis-cli --cluster create`.
 * Every process and temporary directory is removed by `stop()`/`destroy()`.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Resolves true when `port` can be bound on 127.0.0.1 right now. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * A free loopback port in [20000, 29999] whose cluster bus port (+10000) is free too.
 */
export async function freePort(exclude: readonly number[] = []): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20000 + Math.floor(Math.random() * 10000);
    if (exclude.includes(port)) continue;
    if ((await portFree(port)) && (await portFree(port + 10000))) return port;
  }
  throw new Error('no free loopback port found');
}

/** Runs redis-cli against a port; resolves with stdout. */
export async function redisCli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 30_000 });
  return stdout;
}

async function waitForPing(port: number, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await redisCli(port, 'PING')).trim() === 'PONG') return;
    } catch {
      // not up yet
    }
    if (Date.now() > until) throw new Error(`redis-server on port ${port} did not answer PING within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** One redis-server process on a fixed port, which can be stopped and started again. */
export class RedisServerProcess {
  private child: ChildProcess | undefined;
  private readonly dir: string;

  private constructor(
    readonly port: number,
    private readonly extraArgs: readonly string[],
  ) {
    this.dir = mkdtempSync(join(tmpdir(), `twophase-redis-${port}-`));
  }

  /** Starts a server on a free port with no persistence. */
  static async start(extraArgs: readonly string[] = [], exclude: readonly number[] = []): Promise<RedisServerProcess> {
    const server = new RedisServerProcess(await freePort(exclude), extraArgs);
    await server.startAgain();
    return server;
  }

  get running(): boolean {
    return this.child !== undefined;
  }

  /** (Re)starts the process on the same port and waits for PING. */
  async startAgain(): Promise<void> {
    if (this.child) return;
    const child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir, '--protected-mode', 'no', ...this.extraArgs],
      { stdio: 'ignore' },
    );
    this.child = child;
    child.once('exit', () => {
      if (this.child === child) this.child = undefined;
    });
    await waitForPing(this.port);
  }

  /** Kills the process (SIGKILL: no goodbye to clients) and waits for its exit. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
    this.child = undefined;
  }

  /** Stops the process and removes its directory. */
  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A Redis Cluster of `masters` masters (no replicas) on free loopback ports. */
export class RedisClusterProcess {
  private constructor(readonly servers: readonly RedisServerProcess[]) {}

  get ports(): number[] {
    return this.servers.map((s) => s.port);
  }

  /** Starts the servers with cluster mode on, then `redis-cli --cluster create`, and waits for `cluster_state:ok`. */
  static async start(masters = 3): Promise<RedisClusterProcess> {
    const servers: RedisServerProcess[] = [];
    try {
      for (let i = 0; i < masters; i++) {
        const exclude = servers.flatMap((s) => [s.port, s.port + 10000, s.port - 10000]);
        servers.push(
          await RedisServerProcess.start(['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000'], exclude),
        );
      }
      await run(
        'redis-cli',
        ['--cluster', 'create', ...servers.map((s) => `127.0.0.1:${s.port}`), '--cluster-replicas', '0', '--cluster-yes'],
        { timeout: 60_000 },
      );
      const until = Date.now() + 20_000;
      for (const server of servers) {
        while (!/cluster_state:ok/.test(await redisCli(server.port, 'CLUSTER', 'INFO'))) {
          if (Date.now() > until) throw new Error(`cluster node ${server.port} did not reach cluster_state:ok`);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
      return new RedisClusterProcess(servers);
    } catch (error) {
      await Promise.all(servers.map((s) => s.destroy()));
      throw error;
    }
  }

  async destroy(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.destroy()));
  }
}
