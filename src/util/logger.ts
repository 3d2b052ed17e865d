/**
 * A pino-compatible logging interface: pass a pino (or bunyan-style) logger as is.
 */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/**
 * Default logger: silent for debug and info; warn and error as JSON lines on stderr, each with
 * `level`, `time` (Unix ms, as pino writes it), `msg` and the fields.
 */
export const consoleWarnLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: (obj, msg) => process.stderr.write(`${JSON.stringify({ level: 'warn', time: Date.now(), msg, ...serialise(obj) })}\n`),
  error: (obj, msg) => process.stderr.write(`${JSON.stringify({ level: 'error', time: Date.now(), msg, ...serialise(obj) })}\n`),
};

/**
 * Like {@link consoleWarnLogger}, with info lines too: the default of `runConsumers`, whose
 * lifecycle lines ("shutting down", "stopped") are info.
 */
export const consoleInfoLogger: Logger = {
  ...consoleWarnLogger,
  info: (obj, msg) => process.stderr.write(`${JSON.stringify({ level: 'info', time: Date.now(), msg, ...serialise(obj) })}\n`),
};

/**
 * Wraps `logger` so a call that throws is dropped: the consumer logs on its failure paths, and a
 * broken logger must not turn a handled failure into a lost or stuck delivery.
 */
export function guardLogger(logger: Logger): Logger {
  const guard =
    (level: keyof Logger) =>
    (obj: object, msg?: string): void => {
      try {
        logger[level](obj, msg);
      } catch {
        // nothing sensible to do with a logger that throws
      }
    };
  return { debug: guard('debug'), info: guard('info'), warn: guard('warn'), error: guard('error') };
}

/** A logger that drops everything. */
export const silentLogger: Logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

function serialise(obj: object): object {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) out[k] = v instanceof Error ? { type: v.name, message: v.message } : v;
  return out;
}
