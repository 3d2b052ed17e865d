/**
 * Which real services the integration suites need, how to find them, and the rule:
 * without `CI`, a missing service skips its suites with the reason printed; with `CI` set, a
 * missing service fails the run (global setup throws).
 */
import { existsSync, readFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { join } from 'node:path';

export type ServiceName = 'redis' | 'rabbitmq' | 'kafka' | 'postgres';

export const SERVICES: Record<ServiceName, { host: string; port: number; hint: string }> = {
  redis: { host: '127.0.0.1', port: Number(process.env.REDIS_PORT ?? 6379), hint: 'start redis-server on 127.0.0.1:6379' },
  rabbitmq: { host: '127.0.0.1', port: Number(process.env.RABBITMQ_PORT ?? 5672), hint: 'start RabbitMQ on 127.0.0.1:5672 (guest/guest)' },
  kafka: { host: '127.0.0.1', port: Number(process.env.KAFKA_PORT ?? 9092), hint: 'run `npm run kafka:start`' },
  postgres: { host: '127.0.0.1', port: Number(process.env.PGPORT ?? 5432), hint: 'start PostgreSQL on 127.0.0.1:5432' },
};

export const STATUS_FILE = join(__dirname, '..', '..', '.tmp', 'services.json');

/** Resolves true when a TCP connection to host:port opens within `timeoutMs`. */
export function probe(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('error', () => done(false));
    socket.connect(port, host, () => done(true));
  });
}

function readStatus(): Partial<Record<ServiceName, boolean>> {
  if (!existsSync(STATUS_FILE)) return {};
  return JSON.parse(readFileSync(STATUS_FILE, 'utf8')) as Partial<Record<ServiceName, boolean>>;
}

/**
 * `describe` when every service is reachable (as probed by global setup); otherwise a skipped
 * describe, with the reason printed. Under `CI`, global setup has already failed the run.
 */
export function describeWithServices(services: ServiceName[], name: string, fn: () => void): void {
  const status = readStatus();
  const missing = services.filter((s) => status[s] !== true);
  if (missing.length === 0) {
    describe(name, fn);
    return;
  }
  const reason = missing.map((s) => `${s} not reachable at ${SERVICES[s].host}:${SERVICES[s].port} (${SERVICES[s].hint})`).join('; ');
  console.warn(`SKIPPED "${name}": ${reason}`);
  const skipped = describe.skip;
  skipped(`${name} [skipped: ${reason}]`, fn);
}
