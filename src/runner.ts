/**
 * Deployment helper: starts consumers, turns SIGTERM/SIGINT into graceful shutdown, and exposes
 * liveness and readiness for a deployment's probes.
 */
import type { ConsumerHealth } from './consumer-base';
import { consoleWarnLogger, type Logger } from './logger';

/** What the runner needs of a consumer. */
export interface RunnableConsumer {
  start(): Promise<void>;
  stop(): Promise<void>;
  health(): ConsumerHealth;
}

/** Options of {@link runConsumers}. */
export interface RunnerOptions {
  /** Signals that trigger graceful shutdown. Default ['SIGTERM', 'SIGINT']. */
  readonly signals?: readonly NodeJS.Signals[];
  /** Called after every consumer stopped because of a signal. Default: sets `process.exitCode` to 0. */
  readonly onShutdown?: (signal: NodeJS.Signals) => void;
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
  /** Stops every consumer gracefully (in parallel) and removes the signal handlers. Safe to repeat. */
  stop(): Promise<void>;
}

/**
 * Starts every consumer. If one fails to start, the ones already started are stopped and the
 * error is rethrown (startup fails closed). The signal handlers are installed first, so a signal
 * during startup stops every consumer (the one starting included), starts no more, and resolves
 * at once with the runner, already stopping (without waiting for a start that hangs).
 * @throws the first start error (for example DeploymentValidationError)
 */
export async function runConsumers(consumers: readonly RunnableConsumer[], options: RunnerOptions = {}): Promise<Runner> {
  const logger = options.logger ?? consoleWarnLogger;
  const signals = options.signals ?? ['SIGTERM', 'SIGINT'];
  let stopping: Promise<void> | undefined;
  let signalled!: () => void;
  const onStopping = new Promise<'stopping'>((resolve) => (signalled = () => resolve('stopping')));
  const stop = () => {
    stopping ??= (async () => {
      for (const s of signals) process.removeListener(s, onSignal);
      await Promise.allSettled(consumers.map((c) => c.stop()));
    })();
    return stopping;
  };
  const onSignal = (signal: NodeJS.Signals) => {
    logger.info({ signal }, 'twophase: signal received, shutting down gracefully');
    void stop().then(() => (options.onShutdown ? options.onShutdown(signal) : (process.exitCode = process.exitCode ?? 0)));
    signalled();
  };
  for (const s of signals) process.on(s, onSignal);
  const runner: Runner = {
    stop,
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
      for (const s of signals) process.removeListener(s, onSignal);
      await Promise.allSettled(consumers.map((c) => c.stop()));
      throw error;
    }
  }
  return runner;
}
