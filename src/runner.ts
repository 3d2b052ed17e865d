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
 * during startup stops every consumer (the one starting included) and starts no more; the
 * returned runner is then already stopping.
 * @throws the first start error (for example DeploymentValidationError)
 */
export async function runConsumers(consumers: readonly RunnableConsumer[], options: RunnerOptions = {}): Promise<Runner> {
  const logger = options.logger ?? consoleWarnLogger;
  const signals = options.signals ?? ['SIGTERM', 'SIGINT'];
  let stopping: Promise<void> | undefined;
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
    try {
      await consumer.start();
    } catch (error) {
      if (stopping) break; // stopped by a signal while starting: not a startup failure
      for (const s of signals) process.removeListener(s, onSignal);
      await Promise.allSettled(consumers.map((c) => c.stop()));
      throw error;
    }
  }
  return runner;
}
