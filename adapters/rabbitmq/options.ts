/**
 * Options of {@link RabbitMqSource}: meaning, unit, default and range of each field; defaults in
 * one constant; {@link resolveSourceOptions} merges them into a copy and validates at
 * construction, naming the field and the value.
 */
import { ConfigurationError, type Logger } from '../../src';
import { checkBoolean, checkInteger, checkKnownOptions, optionNames, withoutPasswords } from '../../src/adapter-kit';

/** RabbitMQ queue types the adapter supports ("Quorum Queues" and "Classic Queues" docs). */
export type QueueType = 'classic' | 'quorum';

/**
 * What the source does with the topology at start and after each reconnect:
 * - `declare`: asserts the work queue, the dead-letter exchange and queue, the delay queues and
 *   the bindings (idempotent; a mismatch with an existing entity fails start);
 * - `check`: creates nothing; every entity must exist, and the work queue must have been
 *   declared with the same arguments the `declare` mode would use (so its dead-letter route is
 *   proven).
 */
export type TopologyMode = 'declare' | 'check';

/** What the source does when the broker cancels its consumer (queue deleted; callback gets `null`). */
export type CancelPolicy = 'resubscribe' | 'stop';

/** A binding of the work queue to an exchange, declared in `declare` mode. */
export interface QueueBinding {
  /** Exchange name (not empty: the default exchange binds every queue by name already). */
  readonly exchange: string;
  /** Binding key. */
  readonly routingKey: string;
  /** Exchange type, asserted durable in `declare` mode. Default `direct`. */
  readonly exchangeType?: 'direct' | 'topic' | 'fanout' | 'headers';
}

/** Options of a RabbitMQ source. */
export interface RabbitMqSourceOptions {
  /**
   * AMQP URL(s), tried round-robin on reconnect, for example `amqp://guest:guest@127.0.0.1:5672`.
   * A `heartbeat` query parameter overrides {@link RabbitMqSourceOptions.heartbeatSeconds}.
   */
  readonly url: string | readonly string[];
  /** The work queue to consume. Non-empty, at most 255 bytes, not starting with `amq.`. */
  readonly queue: string;
  /** Work queue type. Default `classic`. */
  readonly queueType?: QueueType;
  /** Declare or only check the topology. Default `declare`. */
  readonly topology?: TopologyMode;
  /** Dead-letter exchange (direct, durable). Default `<queue>.dlx`. */
  readonly deadLetterExchange?: string;
  /** Dead-letter queue bound to the exchange. Default `<queue>.dlq`. */
  readonly deadLetterQueue?: string;
  /** Routing key of dead-lettered messages (and the DLQ binding key). Default: the queue name. */
  readonly deadLetterRoutingKey?: string;
  /** Type of the dead-letter queue. Default `classic`. */
  readonly deadLetterQueueType?: QueueType;
  /**
   * True when a broker policy (not queue arguments) sets the work queue's
   * `dead-letter-exchange`. The adapter then neither declares nor checks the
   * `x-dead-letter-*` arguments; AMQP 0-9-1 cannot read policies, so the operator vouches for
   * the route. Default false.
   */
  readonly deadLetterViaPolicy?: boolean;
  /**
   * Delay tiers of the requeue path, ms: one queue per tier, named `<queue>.delay.<ms>ms`, with a
   * queue-wide `x-message-ttl` of that many ms that dead-letters back to the work queue. A
   * queue-wide TTL expires messages in order, which a per-message TTL would not ("Time-To-Live
   * and Expiration" docs: per-message TTL expires only at the queue head). A requeue takes the
   * tier nearest its delay on a log scale. Default `[1000, 5000, 15000, 60000, 300000]`.
   * Integers in [1, 86 400 000], at most 20, strictly increasing.
   */
  readonly delayTiersMs?: readonly number[];
  /**
   * Quorum queues only: `x-delivery-limit`, the returns after which the broker dead-letters a
   * message itself (a crash loop). Undefined (default) leaves it unset.
   */
  readonly deliveryLimit?: number;
  /** Extra arguments of the work queue (for example `x-max-length`). Must not repeat managed ones. */
  readonly queueArguments?: Readonly<Record<string, unknown>>;
  /** Bindings of the work queue, declared in `declare` mode. Default none. */
  readonly bindings?: readonly QueueBinding[];
  /** Broker-cancelled consumer: resubscribe when the queue is back, or stop. Default `resubscribe`. */
  readonly onCancel?: CancelPolicy;
  /** Pause between resubscribe attempts while the queue is missing, ms. Default 1000. [10, 600 000]. */
  readonly resubscribeIntervalMs?: number;
  /** Pause before reconnecting after a lost connection or channel, ms. Default 1000. [10, 600 000]. */
  readonly reconnectDelayMs?: number;
  /** AMQP heartbeat, seconds. Default 5. [0, 600]; 0 turns heartbeats off. */
  readonly heartbeatSeconds?: number;
  /** How long `start()` waits for the first connection, ms. Default 30 000. [100, 3 600 000]. */
  readonly connectTimeoutMs?: number;
  /** Confirm deadline of a republish (requeue, dead-letter), ms. Default 10 000. [10, 600 000]. */
  readonly publishTimeoutMs?: number;
  /**
   * When the delay or dead-letter publish fails, the original is returned to the work queue with
   * `nack(requeue=true)` after this pause, ms, so nothing is lost and nothing hot-loops.
   * Default 5000. [0, 600 000].
   */
  readonly failedPublishRequeueDelayMs?: number;
  /**
   * Group the deliveries that arrive close together (see {@link RabbitMqSourceOptions.batchWindowMs})
   * and claim them with one `DeliverySink.claimBatch` call (one `claimMany` round trip when the
   * claimer has it) before dispatching each. Each delivery is still settled alone on its own
   * channel. Default false (the Redis claimer coalesces concurrent claims on its own).
   */
  readonly batchClaims?: boolean;
  /**
   * With `batchClaims: true`: how long a claim window stays open after its first delivery, ms.
   * 0 (default) closes it at the end of the event-loop turn: only the deliveries amqplib parsed
   * together share a claim. A longer window gathers more deliveries per claim round trip at the
   * cost of up to that much added latency per delivery. A window closes early once the channel's
   * unsettled deliveries reach the prefetch (no more can arrive), on `stopIntake` (what waits is
   * dispatched unclaimed, so a stopping consumer requeues it) and on a channel close (what waits
   * is dropped, never dispatched; the broker redelivers it). Integer in [0, 1000].
   * @throws ConfigurationError (at construction) when > 0 without `batchClaims: true`
   */
  readonly batchWindowMs?: number;
  /**
   * Client-provided name of the consuming connection (shown in the management UI); the
   * publishing connection gets `<connectionName>:publish`. Default `twophase:<queue>`.
   */
  readonly connectionName?: string;
  /** pino-compatible logger. Default: the core's warn/error JSON logger. */
  readonly logger?: Logger;
}

/** Options after defaults. */
export interface ResolvedSourceOptions {
  readonly urls: readonly string[];
  readonly queue: string;
  readonly queueType: QueueType;
  readonly topology: TopologyMode;
  readonly deadLetterExchange: string;
  readonly deadLetterQueue: string;
  readonly deadLetterRoutingKey: string;
  readonly deadLetterQueueType: QueueType;
  readonly deadLetterViaPolicy: boolean;
  readonly delayTiersMs: readonly number[];
  readonly deliveryLimit: number | undefined;
  readonly queueArguments: Readonly<Record<string, unknown>>;
  readonly bindings: readonly QueueBinding[];
  readonly onCancel: CancelPolicy;
  readonly resubscribeIntervalMs: number;
  readonly reconnectDelayMs: number;
  readonly heartbeatSeconds: number;
  readonly connectTimeoutMs: number;
  readonly publishTimeoutMs: number;
  readonly failedPublishRequeueDelayMs: number;
  readonly batchClaims: boolean;
  readonly batchWindowMs: number;
  readonly connectionName: string;
  readonly logger: Logger | undefined;
}

/** Defaults of the optional fields of {@link RabbitMqSourceOptions} that do not depend on the queue name. */
export const SOURCE_DEFAULTS = {
  queueType: 'classic',
  topology: 'declare',
  deadLetterQueueType: 'classic',
  deadLetterViaPolicy: false,
  delayTiersMs: [1000, 5000, 15_000, 60_000, 300_000],
  onCancel: 'resubscribe',
  resubscribeIntervalMs: 1000,
  reconnectDelayMs: 1000,
  heartbeatSeconds: 5,
  connectTimeoutMs: 30_000,
  publishTimeoutMs: 10_000,
  failedPublishRequeueDelayMs: 5000,
  batchClaims: false,
  batchWindowMs: 0,
} as const satisfies Partial<RabbitMqSourceOptions>;

/** Every name {@link RabbitMqSourceOptions} accepts; any other is refused (a misspelling would silently keep a default). */
const SOURCE_OPTION_NAMES = optionNames<RabbitMqSourceOptions>()([
  'url',
  'queue',
  'queueType',
  'topology',
  'deadLetterExchange',
  'deadLetterQueue',
  'deadLetterRoutingKey',
  'deadLetterQueueType',
  'deadLetterViaPolicy',
  'delayTiersMs',
  'deliveryLimit',
  'queueArguments',
  'bindings',
  'onCancel',
  'resubscribeIntervalMs',
  'reconnectDelayMs',
  'heartbeatSeconds',
  'connectTimeoutMs',
  'publishTimeoutMs',
  'failedPublishRequeueDelayMs',
  'batchClaims',
  'batchWindowMs',
  'connectionName',
  'logger',
]);
const PREFETCH_HINTS = {
  prefetch: "the prefetch is the consumer's concurrency option",
  prefetchCount: "the prefetch is the consumer's concurrency option",
};
const BINDING_NAMES = optionNames<QueueBinding>()(['exchange', 'routingKey', 'exchangeType']);

/** Queue arguments the adapter manages itself; `queueArguments` may not set them. */
export const MANAGED_QUEUE_ARGUMENTS = ['x-queue-type', 'x-dead-letter-exchange', 'x-dead-letter-routing-key', 'x-delivery-limit'] as const;

/**
 * Applies defaults to a copy of `options` and validates every field.
 * @throws ConfigurationError naming the field and the value
 */
export function resolveSourceOptions(options: RabbitMqSourceOptions): ResolvedSourceOptions {
  if (!options || typeof options !== 'object') throw new ConfigurationError('RabbitMQ source options are required');
  checkKnownOptions('RabbitMqSource options', options, SOURCE_OPTION_NAMES, PREFETCH_HINTS);
  if (Array.isArray(options.bindings)) options.bindings.forEach((b, i) => checkKnownOptions(`RabbitMqSource options.bindings[${i}]`, b, BINDING_NAMES));
  const urls = typeof options.url === 'string' ? [options.url] : Array.isArray(options.url) ? [...options.url] : [];
  if (urls.length === 0 || urls.some((u) => typeof u !== 'string' || !/^amqps?:\/\//.test(u))) {
    throw new ConfigurationError(`url must be an amqp:// or amqps:// URL (or a non-empty list of them), got ${withoutPasswords(JSON.stringify(options.url) ?? String(options.url))}`);
  }
  checkName('queue', options.queue);
  if (options.queue.startsWith('amq.')) throw new ConfigurationError(`queue must not start with "amq." (reserved by the broker), got ${JSON.stringify(options.queue)}`);
  const queue = options.queue;
  const resolved: ResolvedSourceOptions = {
    urls,
    queue,
    queueType: options.queueType ?? SOURCE_DEFAULTS.queueType,
    topology: options.topology ?? SOURCE_DEFAULTS.topology,
    deadLetterExchange: options.deadLetterExchange ?? `${queue}.dlx`,
    deadLetterQueue: options.deadLetterQueue ?? `${queue}.dlq`,
    deadLetterRoutingKey: options.deadLetterRoutingKey ?? queue,
    deadLetterQueueType: options.deadLetterQueueType ?? SOURCE_DEFAULTS.deadLetterQueueType,
    deadLetterViaPolicy: options.deadLetterViaPolicy ?? SOURCE_DEFAULTS.deadLetterViaPolicy,
    delayTiersMs: [...(options.delayTiersMs ?? SOURCE_DEFAULTS.delayTiersMs)],
    deliveryLimit: options.deliveryLimit,
    queueArguments: { ...(options.queueArguments ?? {}) },
    bindings: (options.bindings ?? []).map((b) => ({ ...b })),
    onCancel: options.onCancel ?? SOURCE_DEFAULTS.onCancel,
    resubscribeIntervalMs: options.resubscribeIntervalMs ?? SOURCE_DEFAULTS.resubscribeIntervalMs,
    reconnectDelayMs: options.reconnectDelayMs ?? SOURCE_DEFAULTS.reconnectDelayMs,
    heartbeatSeconds: options.heartbeatSeconds ?? SOURCE_DEFAULTS.heartbeatSeconds,
    connectTimeoutMs: options.connectTimeoutMs ?? SOURCE_DEFAULTS.connectTimeoutMs,
    publishTimeoutMs: options.publishTimeoutMs ?? SOURCE_DEFAULTS.publishTimeoutMs,
    failedPublishRequeueDelayMs: options.failedPublishRequeueDelayMs ?? SOURCE_DEFAULTS.failedPublishRequeueDelayMs,
    batchClaims: options.batchClaims ?? SOURCE_DEFAULTS.batchClaims,
    batchWindowMs: options.batchWindowMs ?? SOURCE_DEFAULTS.batchWindowMs,
    connectionName: options.connectionName ?? `twophase:${queue}`,
    logger: options.logger,
  };
  checkOneOf('queueType', resolved.queueType, ['classic', 'quorum']);
  checkOneOf('deadLetterQueueType', resolved.deadLetterQueueType, ['classic', 'quorum']);
  checkOneOf('topology', resolved.topology, ['declare', 'check']);
  checkOneOf('onCancel', resolved.onCancel, ['resubscribe', 'stop']);
  checkName('deadLetterExchange', resolved.deadLetterExchange);
  checkName('deadLetterQueue', resolved.deadLetterQueue);
  if (typeof resolved.deadLetterRoutingKey !== 'string' || Buffer.byteLength(resolved.deadLetterRoutingKey) > 255) {
    throw new ConfigurationError(`deadLetterRoutingKey must be a string of at most 255 bytes, got ${JSON.stringify(resolved.deadLetterRoutingKey)}`);
  }
  if (resolved.deadLetterQueue === queue) throw new ConfigurationError(`deadLetterQueue must differ from queue ("${queue}")`);
  checkBoolean('deadLetterViaPolicy', resolved.deadLetterViaPolicy);
  checkBoolean('batchClaims', resolved.batchClaims);
  const tiers = resolved.delayTiersMs;
  if (tiers.length === 0 || tiers.length > 20) throw new ConfigurationError(`delayTiersMs must hold 1 to 20 tiers, got ${tiers.length}`);
  tiers.forEach((t, i) => {
    checkInteger(`delayTiersMs[${i}]`, t, 1, 86_400_000);
    if (i > 0 && t <= tiers[i - 1]!) throw new ConfigurationError(`delayTiersMs must be strictly increasing, got ${JSON.stringify(tiers)}`);
  });
  if (resolved.deliveryLimit !== undefined) {
    if (resolved.queueType !== 'quorum') throw new ConfigurationError('deliveryLimit applies to quorum queues only (queueType: "quorum")');
    checkInteger('deliveryLimit', resolved.deliveryLimit, 1, 1_000_000);
  }
  for (const name of MANAGED_QUEUE_ARGUMENTS) {
    if (name in resolved.queueArguments) throw new ConfigurationError(`queueArguments must not set "${name}": use the matching option`);
  }
  resolved.bindings.forEach((b, i) => {
    checkName(`bindings[${i}].exchange`, b.exchange);
    if (typeof b.routingKey !== 'string') throw new ConfigurationError(`bindings[${i}].routingKey must be a string`);
    if (b.exchangeType !== undefined) checkOneOf(`bindings[${i}].exchangeType`, b.exchangeType, ['direct', 'topic', 'fanout', 'headers']);
  });
  checkInteger('resubscribeIntervalMs', resolved.resubscribeIntervalMs, 10, 600_000);
  checkInteger('reconnectDelayMs', resolved.reconnectDelayMs, 10, 600_000);
  checkInteger('heartbeatSeconds', resolved.heartbeatSeconds, 0, 600);
  checkInteger('connectTimeoutMs', resolved.connectTimeoutMs, 100, 3_600_000);
  checkInteger('publishTimeoutMs', resolved.publishTimeoutMs, 10, 600_000);
  checkInteger('failedPublishRequeueDelayMs', resolved.failedPublishRequeueDelayMs, 0, 600_000);
  checkInteger('batchWindowMs', resolved.batchWindowMs, 0, 1000);
  if (resolved.batchWindowMs > 0 && !resolved.batchClaims) {
    throw new ConfigurationError(`batchWindowMs (${resolved.batchWindowMs}) applies only with batchClaims: true; set batchClaims: true or leave batchWindowMs out`);
  }
  if (typeof resolved.connectionName !== 'string' || resolved.connectionName.length === 0) {
    throw new ConfigurationError(`connectionName must be a non-empty string, got ${JSON.stringify(resolved.connectionName)}`);
  }
  return resolved;
}

function checkName(field: string, value: unknown): asserts value is string {
  if (typeof value !== 'string' || value.length === 0 || Buffer.byteLength(value) > 255) {
    throw new ConfigurationError(`${field} must be a non-empty string of at most 255 bytes, got ${JSON.stringify(value)}`);
  }
}


function checkOneOf(field: string, value: unknown, allowed: readonly string[]): void {
  if (typeof value !== 'string' || !allowed.includes(value)) {
    throw new ConfigurationError(`${field} must be one of ${allowed.map((a) => JSON.stringify(a)).join(', ')}, got ${JSON.stringify(value)}`);
  }
}
