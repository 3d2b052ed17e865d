/**
 * The environment variables the demo, the examples and the `twophase` CLI read to find the
 * services, with their local defaults. One set of names everywhere:
 *
 *   TWOPHASE_AMQP_URL       amqp://guest:guest@127.0.0.1:5672
 *   TWOPHASE_REDIS_URL      redis://127.0.0.1:6379
 *   TWOPHASE_KAFKA_BROKERS  127.0.0.1:9092   (comma-separated host:port list)
 *
 * The names used before (AMQP_URL, REDIS_URL, REDIS_HOST + REDIS_PORT, KAFKA_BROKERS) still
 * work and print a deprecation warning once; they will be removed in a later release.
 */

export const ENV_NAMES = {
  amqpUrl: 'TWOPHASE_AMQP_URL',
  redisUrl: 'TWOPHASE_REDIS_URL',
  kafkaBrokers: 'TWOPHASE_KAFKA_BROKERS',
} as const;

export interface ServiceSettings {
  /** RabbitMQ connection URL. */
  readonly amqpUrl: string;
  /** Redis connection URL (`redis://[user:password@]host:port[/db]`). */
  readonly redisUrl: string;
  /** Kafka bootstrap brokers, `host:port` each. */
  readonly kafkaBrokers: readonly string[];
}

type Env = Readonly<Record<string, string | undefined>>;

const warned = new Set<string>();

function deprecated(env: Env, oldName: string, newName: string, warn: (line: string) => void): string | undefined {
  const value = env[oldName];
  if (value !== undefined && value !== '' && !warned.has(oldName)) {
    warned.add(oldName);
    warn(`warning: ${oldName} is deprecated; set ${newName} instead (${oldName} is still read for now)\n`);
  }
  return value === '' ? undefined : value;
}

/** Reads the service settings from `env`, new names first, then the deprecated ones, then the local defaults. */
export function serviceSettings(env: Env = process.env, warn: (line: string) => void = (line) => void process.stderr.write(line)): ServiceSettings {
  const value = (name: string) => (env[name] === '' ? undefined : env[name]);
  const amqpUrl = value(ENV_NAMES.amqpUrl) ?? deprecated(env, 'AMQP_URL', ENV_NAMES.amqpUrl, warn) ?? 'amqp://guest:guest@127.0.0.1:5672';
  let redisUrl = value(ENV_NAMES.redisUrl) ?? deprecated(env, 'REDIS_URL', ENV_NAMES.redisUrl, warn);
  if (redisUrl === undefined) {
    const host = deprecated(env, 'REDIS_HOST', ENV_NAMES.redisUrl, warn);
    const port = deprecated(env, 'REDIS_PORT', ENV_NAMES.redisUrl, warn);
    redisUrl = `redis://${host ?? '127.0.0.1'}:${port ?? '6379'}`;
  }
  const brokers = value(ENV_NAMES.kafkaBrokers) ?? deprecated(env, 'KAFKA_BROKERS', ENV_NAMES.kafkaBrokers, warn) ?? '127.0.0.1:9092';
  return {
    amqpUrl,
    redisUrl,
    kafkaBrokers: brokers
      .split(',')
      .map((b) => b.trim())
      .filter((b) => b.length > 0),
  };
}

/** Where the demo's PostgreSQL inbox lives: the variables the `twophase` CLI reads too. */
export const DATABASE_URL_NAMES = ['TWOPHASE_DATABASE_URL', 'DATABASE_URL'] as const;

/** The PostgreSQL URL: `$TWOPHASE_DATABASE_URL`, else `$DATABASE_URL`, else the local server. */
export function databaseUrl(env: Env = process.env): string {
  return DATABASE_URL_NAMES.map((name) => env[name]).find((v) => v !== undefined && v !== '') ?? 'postgres://postgres@127.0.0.1:5432/postgres';
}
