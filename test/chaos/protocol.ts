/**
 * What the harness and its worker processes tell each other over the IPC channel of `fork`.
 */
import type { GatedClaimerStats } from '../../adapters/gated';
import type { ArmedFault, HandlerProfile } from './chaos-consumer';

/** The claim store of a broker stack's workers. */
export type StoreConfig =
  /** RedisClaimer on the run's private redis-server, claims under `prefix`. */
  | { readonly kind: 'redis'; readonly port: number; readonly prefix: string }
  /**
   * PostgresClaimer in transactional mode on the ledger's PostgreSQL, inbox tables in `schema`;
   * the effect goes through `ctx.transaction`. The worker's claim sessions carry the
   * `application_name` `<sessionPrefix>-<workerId>` (the pg_terminate fault finds them by it).
   */
  | { readonly kind: 'postgres'; readonly schema: string; readonly sessionPrefix: string }
  /**
   * GatedClaimer: a RedisClaimer gate on the run's private redis-server (no persistence), keys
   * under `redisPrefix`, in front of the PostgreSQL inbox configured as for `postgres`.
   */
  | {
      readonly kind: 'gated';
      readonly schema: string;
      readonly sessionPrefix: string;
      readonly redisPort: number;
      readonly redisPrefix: string;
    };

/** Everything a worker process needs, passed as JSON in its first argument. */
export interface WorkerConfig {
  readonly broker: 'rabbitmq' | 'kafka';
  readonly store: StoreConfig;
  readonly runId: string;
  readonly workerId: string;
  readonly seed: number;
  /** Armed kills wait until no handler of the worker is between its effect and its commit. */
  readonly strict: boolean;
  readonly leaseTtlMs: number;
  readonly concurrency: number;
  readonly handler: HandlerProfile;
  readonly runStartedAt: number;
  readonly amqp?: { readonly url: string; readonly queue: string; readonly delayTiersMs: readonly number[] };
  readonly kafka?: { readonly brokers: readonly string[]; readonly topic: string; readonly groupId: string; readonly sessionTimeoutMs: number };
}

export type ToWorker = { readonly t: 'arm'; readonly fault: ArmedFault } | { readonly t: 'stop' };

export type FromWorker =
  | { readonly t: 'ready'; readonly workerId: string }
  | {
      readonly t: 'stats';
      readonly workerId: string;
      readonly inFlight: number;
      readonly handled: number;
      readonly consuming: boolean;
      /** The GatedClaimer's counters since the worker started (gated stores only). */
      readonly gate?: GatedClaimerStats;
    }
  | { readonly t: 'start_failed'; readonly workerId: string; readonly error: string };
