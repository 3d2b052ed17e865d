/**
 * Deployment helper: starts consumers, turns SIGTERM/SIGINT into graceful shutdown, closes what
 * the application wired (its clients), ends the process within a bounded time, and exposes
 * liveness and readiness for a deployment's probes.
 */
import { constants as osConstants } from 'node:os';
import type { ConsumerHealth } from './consumer-base';
import { ConfigurationError } from '../util/errors';
import { checkKnownOptions, describeType, optionNames } from '../util/known-options';
import { checkBoolean, checkInteger } from '../util/option-checks';
import { consoleInfoLogger, guardLogger, type Logger } from '../util/logger';

/** What the runner needs of a consumer. */
export interface RunnableConsumer {
  start(): Promise<void>;
  stop(): Promise<void>;
  health(): ConsumerHealth;
  /** How long `stop()` waits for in-flight handlers, ms (ConsumerBase's `shutdownTimeoutMs`); sizes the exit deadline. */
  readonly shutdownTimeoutMs?: number;
}

/**
 * One shutdown step: closes something the application owns (`() => redis.quit()`,
 * `() => connection.close()`, `() => producer.disconnect()`). Given the signal that started the
 * shutdown, or undefined for {@link Runner.stop}.
 */
export type ShutdownStep = (signal: NodeJS.Signals | undefined) => unknown;

/** Options of {@link runConsumers}. */
export interface RunnerOptions {
  /** Signals that trigger graceful shutdown. Default ['SIGTERM', 'SIGINT']. */
  readonly signals?: readonly NodeJS.Signals[];
  /**
   * Run, in order, after every consumer stopped: close here the clients the consumers were given
   * (the claimer's Redis client, a connection you opened). Each step is awaited for at most
   * `closeTimeoutMs`; a step that throws or passes it is logged and the next one still runs.
   * A single function is accepted too.
   */
  readonly onShutdown?: ShutdownStep | readonly ShutdownStep[];
  /** How long each `onShutdown` step may take, ms. Default 5000. Range 1 … 600 000. */
  readonly closeTimeoutMs?: number;
  /**
   * Exit policy after a signal. `true` (default): once the consumers stopped and `onShutdown`
   * ran, `process.exit(process.exitCode ?? 0)`; if that has not happened `exitDeadlineMs` after
   * the signal, `process.exit(1)` with an error line; a second signal exits at once with
   * 128 + the signal number (143 for SIGTERM, 130 for SIGINT). `false`: the runner never calls
   * `process.exit` (embedding, tests); it sets `process.exitCode` to 0 when not set, and the
   * process ends once nothing keeps it alive.
   */
  readonly exitProcess?: boolean;
  /**
   * Time from the first signal to a forced exit, ms. Default: the largest `shutdownTimeoutMs` of
   * the consumers (30 000 when a consumer does not say) + {@link EXIT_MARGIN_MS} (for commits in
   * flight, releases, closing the sources) + `closeTimeoutMs` × the number of `onShutdown` steps.
   * Set your orchestrator's grace period (Kubernetes `terminationGracePeriodSeconds`) above it.
   */
  readonly exitDeadlineMs?: number;
  /** Where "shutting down", "stopped" and failures go. Default: info, warn and error as JSON lines on stderr. */
  readonly logger?: Logger;
}

/** Aggregate health: live when every consumer is live, ready when every one is ready. */
export interface RunnerHealth {
  readonly live: boolean;
  readonly ready: boolean;
  readonly consumers: readonly ConsumerHealth[];
}

/** Handle on running consumers. */
export interface Runner {
  health(): RunnerHealth;
  /**
   * Stops every consumer gracefully (in parallel), runs `onShutdown`, and removes the signal
   * handlers. Never exits the process. Safe to repeat: later calls share the first one's promise.
   */
  stop(): Promise<void>;
}

/**
 * Time added to the consumers' `shutdownTimeoutMs` in the default exit deadline, ms: covers the
 * commits still in flight (ConsumerBase `commitDeadlineMs`, default 10 000, never cut short by
 * shutdown), the releases of aborted handlers and the closing of the sources.
 */
export const EXIT_MARGIN_MS = 15_000;

/** Default `shutdownTimeoutMs` assumed for a consumer that does not report its own. */
const DEFAULT_SHUTDOWN_TIMEOUT_MS = 30_000;

const RUNNER_OPTION_NAMES = optionNames<RunnerOptions>()(['signals', 'onShutdown', 'closeTimeoutMs', 'exitProcess', 'exitDeadlineMs', 'logger']);

/**
 * Starts every consumer. If one fails to start, every consumer is stopped, the `onShutdown`
 * steps run (so the clients the application wired are closed), and the error is rethrown
 * (startup fails closed); the process is never exited on this path. The signal handlers are installed first, so a signal
 * during startup stops every consumer (the one starting included), starts no more, and resolves
 * at once with the runner, already stopping (without waiting for a start that hangs).
 *
 * On a signal: logs "shutting down", stops every consumer, runs `onShutdown`, logs "stopped",
 * then applies the exit policy ({@link RunnerOptions.exitProcess}).
 * @throws ConfigurationError for invalid options (an unknown name, a bad timeout)
 * @throws ConfigurationError when `consumers` is not an array of consumers, or for an invalid option
 * @throws the first start error (for example DeploymentValidationError)
 */
export async function runConsumers(consumers: readonly RunnableConsumer[], options: RunnerOptions = {}): Promise<Runner> {
  if (!Array.isArray(consumers)) {
    throw new ConfigurationError(`runConsumers(consumers, options): consumers must be an array (runConsumers([consumer])), got ${describeType(consumers)}`);
  }
  const notConsumer = consumers.findIndex((c: unknown) => typeof (c as RunnableConsumer | undefined)?.start !== 'function' || typeof (c as RunnableConsumer).stop !== 'function');
  if (notConsumer >= 0) throw new ConfigurationError(`runConsumers: consumers[${notConsumer}] is not a consumer (no start() and stop()), got ${describeType(consumers[notConsumer])}`);
  checkKnownOptions('runConsumers options', options, RUNNER_OPTION_NAMES);
  const logger = guardLogger(options.logger ?? consoleInfoLogger);
  const signals = options.signals ?? ['SIGTERM', 'SIGINT'];
  const steps = options.onShutdown === undefined ? [] : typeof options.onShutdown === 'function' ? [options.onShutdown] : [...options.onShutdown];
  if (steps.some((s) => typeof s !== 'function')) throw new ConfigurationError('onShutdown must be a function or an array of functions');
  const closeTimeoutMs = checkMs('closeTimeoutMs', options.closeTimeoutMs ?? 5000);
  const exitProcess = options.exitProcess ?? true;
  checkBoolean('exitProcess', exitProcess);
  const exitDeadlineMs = checkMs(
    'exitDeadlineMs',
    options.exitDeadlineMs ?? Math.max(0, ...consumers.map((c) => c.shutdownTimeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_MS)) + EXIT_MARGIN_MS + closeTimeoutMs * steps.length,
  );

  let stopping: Promise<void> | undefined;
  let signalled!: () => void;
  const onStopping = new Promise<'stopping'>((resolve) => (signalled = () => resolve('stopping')));
  const stop = (signal?: NodeJS.Signals) => {
    stopping ??= (async () => {
      for (const s of signals) process.removeListener(s, onSignal);
      await Promise.allSettled(consumers.map((c) => c.stop()));
      for (const step of steps) await runStep(step, signal, closeTimeoutMs, logger);
    })();
    return stopping;
  };
  let firstSignal: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (firstSignal !== undefined) {
      // Our handler replaced the default one; a second signal is the operator's "now".
      logger.warn({ signal, firstSignal }, 'twophase: second signal, exiting now without waiting for the graceful shutdown');
      if (exitProcess) process.exit(128 + (osConstants.signals[signal] ?? 15));
      return;
    }
    firstSignal = signal;
    const started = Date.now();
    logger.info({ signal, consumers: consumers.length, exitProcess, exitDeadlineMs }, 'twophase: shutting down');
    let deadline: NodeJS.Timeout | undefined;
    if (exitProcess) {
      deadline = setTimeout(() => {
        const states = consumers.map((c) => c.health()).map((h) => ({ name: h.name, state: h.state, inFlight: h.inFlight }));
        logger.error({ signal, exitDeadlineMs, consumers: states }, 'twophase: graceful shutdown did not finish within exitDeadlineMs; exiting with code 1');
        process.exit(1);
      }, exitDeadlineMs); // not unref'd: a shutdown stuck on a promise with no handle left still ends here, with its log line
    }
    const stopped = stop(signal); // removes the first-signal handlers before its first await
    // Listen again at once: a second signal must still be ours (the default action would kill the
    // process without a log line).
    for (const s of signals) process.on(s, onSecondSignal);
    void stopped.then(() => {
      logger.info({ signal, durationMs: Date.now() - started }, 'twophase: stopped');
      process.exitCode = process.exitCode ?? 0;
      if (!exitProcess) {
        for (const s of signals) process.removeListener(s, onSecondSignal);
        return;
      }
      clearTimeout(deadline);
      process.exit(process.exitCode);
    });
    signalled();
  };
  const onSecondSignal = (signal: NodeJS.Signals) => onSignal(signal);
  for (const s of signals) process.on(s, onSignal);
  const runner: Runner = {
    stop: () => stop(undefined),
    health: () => {
      const list = consumers.map((c) => c.health());
      return { live: list.every((h) => h.live), ready: list.every((h) => h.ready), consumers: list };
    },
  };
  for (const consumer of consumers) {
    if (stopping) break;
    const starting = consumer.start();
    starting.catch(() => undefined); // may be left behind by a signal
    try {
      // A signal ends the wait: a start that hangs (a claimer's ready()) must not hold the runner.
      if ((await Promise.race([starting, onStopping])) === 'stopping') break;
    } catch (error) {
      if (stopping) break; // stopped by a signal while starting: not a startup failure
      logger.error({ err: error }, 'twophase: a consumer failed to start; stopping the others and running onShutdown');
      // The same path as a signal (consumers stopped, then the steps), so the clients the
      // application wired are closed and the process can end once the caller handled the error.
      await stop(undefined);
      throw error;
    }
  }
  return runner;
}

/** Runs one shutdown step for at most `timeoutMs`; failures and timeouts are logged, never thrown. */
async function runStep(step: ShutdownStep, signal: NodeJS.Signals | undefined, timeoutMs: number, logger: Logger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const finished = await Promise.race([
      Promise.resolve()
        .then(() => step(signal))
        .then(() => true),
      new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
        timer.unref();
      }),
    ]);
    if (!finished) logger.warn({ step: step.name || 'anonymous', closeTimeoutMs: timeoutMs }, 'twophase: an onShutdown step did not finish within closeTimeoutMs; going on');
  } catch (error) {
    logger.warn({ err: error, step: step.name || 'anonymous' }, 'twophase: an onShutdown step failed; going on');
  } finally {
    clearTimeout(timer);
  }
}

function checkMs(field: string, value: unknown): number {
  return checkInteger(field, value, 1, 3_600_000, 'ms');
}
