/**
 * kafkajs's own log lines, routed through a twophase {@link Logger}. kafkajs prints INFO lines
 * ("Starting", "Consumer has joined the group", …) and WARN lines to the console by default; pass
 * this as the `logCreator` of your `new Kafka({ … })` to keep them in your log stream, at the
 * level you choose (default: kafkajs errors only).
 *
 * ```ts
 * const kafka = new Kafka({ clientId: 'billing', brokers, logCreator: kafkajsLogCreator(logger) });
 * const kafka = new Kafka({ clientId: 'billing', brokers, logCreator: kafkajsLogCreator(logger, { level: 'info' }) });
 * ```
 */
import type { logCreator } from 'kafkajs';
import { ConfigurationError, type Logger } from '../../src';

/**
 * kafkajs's `logLevel` values (kafkajs 2.x `src/loggers/index.js`), copied so that importing
 * `twophase/kafka` never loads kafkajs (a service on @platformatic/kafka does not install it).
 */
const logLevel = { NOTHING: 0, ERROR: 1, WARN: 2, INFO: 4, DEBUG: 5 } as const;
type KafkajsLevelValue = (typeof logLevel)[keyof typeof logLevel];

/** The lowest kafkajs level passed on. */
export type KafkajsLogLevel = 'error' | 'warn' | 'info' | 'debug';

const LEVELS: Readonly<Record<KafkajsLogLevel, KafkajsLevelValue>> = { error: logLevel.ERROR, warn: logLevel.WARN, info: logLevel.INFO, debug: logLevel.DEBUG };

/**
 * A kafkajs `logCreator` writing to `logger`: kafkajs ERROR → `logger.error`, WARN → `warn`,
 * INFO → `info`, DEBUG → `debug`, each with the message as `kafkajs [<namespace>] <message>` and
 * kafkajs's fields under `kafkajs` (namespace, label, and the entry's own fields such as groupId).
 * Lines below `level` are dropped. The `logLevel` given to `new Kafka` still applies first
 * (kafkajs default INFO), so `level: 'debug'` also needs `logLevel: logLevel.DEBUG` there.
 * @param options.level lowest level passed on; default `error`
 * @throws ConfigurationError for an unknown level or option
 */
export function kafkajsLogCreator(logger: Logger, options: { readonly level?: KafkajsLogLevel } = {}): logCreator {
  for (const name of Object.keys(options ?? {})) {
    if (name !== 'level') throw new ConfigurationError(`kafkajsLogCreator: unknown option "${name}" (known: level)`);
  }
  const level = options?.level ?? 'error';
  const lowest = LEVELS[level];
  if (lowest === undefined) throw new ConfigurationError(`kafkajsLogCreator: level must be 'error', 'warn', 'info' or 'debug', got ${JSON.stringify(level)}`);
  return () =>
    ({ namespace, level: entryLevel, label, log }) => {
      if ((entryLevel as number) === logLevel.NOTHING || entryLevel > lowest) return;
      const { message, timestamp: _timestamp, logger: _logger, ...fields } = log as { message: string; timestamp?: string; logger?: string } & Record<string, unknown>;
      const line = `kafkajs [${namespace}] ${message}`;
      const obj = { kafkajs: { namespace, label, ...fields } };
      if (entryLevel <= logLevel.ERROR) logger.error(obj, line);
      else if (entryLevel === logLevel.WARN) logger.warn(obj, line);
      else if (entryLevel === logLevel.INFO) logger.info(obj, line);
      else logger.debug(obj, line);
    };
}
