/**
 * What the harness and its worker processes tell each other over the IPC channel of `fork`.
 */
import type { ArmedFault, HandlerProfile } from './chaos-consumer';

/** Everything a worker process needs, passed as JSON in its first argument. */
export interface WorkerConfig {
  readonly stack: 'rabbitmq-redis' | 'kafka-redis';
  readonly runId: string;
  readonly workerId: string;
  readonly seed: number;
  readonly strict: boolean;
  readonly leaseTtlMs: number;
  readonly concurrency: number;
  readonly handler: HandlerProfile;
  readonly runStartedAt: number;
  readonly redisPort: number;
  /** Redis key prefix of the run's claims. */
  readonly redisPrefix: string;
  readonly amqp?: { readonly url: string; readonly queue: string; readonly delayTiersMs: readonly number[] };
  readonly kafka?: { readonly brokers: readonly string[]; readonly topic: string; readonly groupId: string; readonly sessionTimeoutMs: number };
}

export type ToWorker = { readonly t: 'arm'; readonly fault: ArmedFault } | { readonly t: 'stop' };

export type FromWorker =
  | { readonly t: 'ready'; readonly workerId: string }
  | { readonly t: 'stats'; readonly workerId: string; readonly inFlight: number; readonly handled: number; readonly consuming: boolean }
  | { readonly t: 'start_failed'; readonly workerId: string; readonly error: string };
