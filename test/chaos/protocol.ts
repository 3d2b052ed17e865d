/**
 * What the harness and its worker processes tell each other over the IPC channel of `fork`.
 */
import type { GatedClaimerStats } from '../../adapters/gated';
import type { ArmedFault, HandlerProfile } from './chaos-consumer';
import type { ChaosKafkaClient } from './kafka-client';

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
  readonly kafka?: { readonly brokers: readonly string[]; readonly topic: string; readonly groupId: string; readonly sessionTimeoutMs: number; readonly client: ChaosKafkaClient };
}

/**
 * An outbox relay process (relay-worker.ts): an OutboxRelay on the run's outbox schema, its
 * PostgreSQL sessions named `<sessionPrefix>-<workerId>` (pg_terminate finds them by it), its
 * RabbitMQ connection named `chaos-<runId>-<workerId>` (close_connections finds it by it).
 */
export interface RelayWorkerConfig {
  readonly broker: 'rabbitmq' | 'kafka';
  readonly schema: string;
  readonly sessionPrefix: string;
  readonly runId: string;
  readonly workerId: string;
  readonly leaseMs: number;
  readonly batchSize: number;
  /** Where a relay writes the faults it fires, one JSON line each, before it SIGKILLs itself. */
  readonly faultFile: string;
  readonly runStartedAt: number;
  readonly amqpUrl?: string;
  readonly kafkaBrokers?: readonly string[];
}

/** Kills armed in an outbox relay, fired at a step of its next claim. */
export type RelayFault = 'kill_after_claim' | 'kill_before_confirm' | 'kill_after_confirm';

/** The outbox stacks' downstream consumer (outbox-consumer.ts): the inbox on the run's schema. */
export interface OutboxConsumerConfig {
  readonly broker: 'rabbitmq' | 'kafka';
  readonly schema: string;
  readonly runId: string;
  readonly workerId: string;
  readonly amqp?: { readonly url: string; readonly queue: string };
  readonly kafka?: { readonly brokers: readonly string[]; readonly topic: string; readonly groupId: string; readonly client: ChaosKafkaClient };
}

export type ToWorker = { readonly t: 'arm'; readonly fault: ArmedFault | RelayFault } | { readonly t: 'stop' };

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
      /** Deliveries found already done (`done_duplicate`): the outbox consumer's deduplicated republishes. */
      readonly duplicates?: number;
    }
  | { readonly t: 'start_failed'; readonly workerId: string; readonly error: string };
