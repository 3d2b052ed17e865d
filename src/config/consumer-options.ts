/**
 * Options of {@link ConsumerBase}: meaning, units, defaults and the checks run at construction.
 */
import type { Claimer } from '../claim/claimer';
import { systemClock, type TimerClock } from '../util/clock';
import { ConfigurationError } from '../util/errors';
import { checkTtl, RUN_ONCE_NAMESPACE } from '../claim/keys';
import { checkKnownOptions, optionNames } from '../util/known-options';
import { checkBoolean, checkInteger } from '../util/option-checks';
import { MAX_DONE_TTL_MS, MAX_LEASE_TTL_MS, MIN_LEASE_TTL_MS } from '../util/limits';
import { guardLogger, type Logger } from '../util/logger';
import type { ConsumerObserver } from '../ports/observer';
import type { BackoffPolicy } from '../util/retry';
import { retryHorizonMs } from './retry-horizon';
import { resolveBackoffOption } from './backoff-options';
import type { MessageSource } from '../ports/source';
import type { DeploymentDeclaration } from './startup-validation';
import { ConsumerTtls, type TtlPolicy, type TypeTtls } from './ttl-policy';
import { checkClaimer, checkSource } from '../util/wiring-checks';

export interface ConsumerOptions {
  /**
   * Consumer name: the key namespace (use the consumer group or handler name), so two consumers
   * of the same messages never deduplicate each other. Non-empty, no longer than 128 characters.
   */
  readonly name: string;
  /** The claim store. */
  readonly claimer: Claimer;
  /** The broker adapter delivering messages. */
  readonly source: MessageSource;
  /**
   * Lease length, ms. Default: the `ttlPolicy`'s default, else 30 000. Range 100 ms … 1 day, and
   * within the `ttlPolicy`'s bounds. Kept alive every leaseTtlMs/3 while the handler runs.
   */
  readonly leaseTtlMs?: number;
  /**
   * How long a committed key stays done, ms. Default: the `ttlPolicy`'s default, else 7 days.
   * ≥ leaseTtlMs, ≤ 365 days, and within the `ttlPolicy`'s bounds.
   */
  readonly doneTtlMs?: number;
  /**
   * The service's TTL defaults and bounds (one {@link TtlPolicy} shared by its consumers): every
   * TTL this consumer and its `typeTtls` declare is checked against it at construction.
   * Default: the contract's limits (100 ms … 1 day leases, … 365 days retention).
   */
  readonly ttlPolicy?: TtlPolicy;
  /**
   * Lease and retention per message type routed inside this consumer (a payment and a
   * notification on one queue): `typeOf` names the type of a delivery, `types` gives each type's
   * TTLs. Listed by `describe()` and logged once at start. Default: one set of TTLs for all.
   */
  readonly typeTtls?: TypeTtls;
  /**
   * Messages being claimed and handled at once (the adapter's prefetch). A message whose handler
   * acked frees its slot as soon as its commit is issued. Default 10. 1 … 10 000.
   */
  readonly concurrency?: number;
  /** Handler attempts before a retryable failure is dead-lettered as `retry_exhausted`. Default 5. 1 … 1000. */
  readonly maxAttempts?: number;
  /** Backoff of requeues after a retryable failure. Default 1 s doubling to 60 s, ±20 % jitter. */
  readonly retryBackoff?: Partial<BackoffPolicy>;
  /** Requeue delay when another worker holds the lease, ms. Default 1000. At least 10. */
  readonly busyRequeueDelayMs?: number;
  /** Local claim retries while the store is unavailable before the message is requeued. Default 3. */
  readonly claimRetries?: number;
  /** Backoff of local claim retries. Default 100 ms doubling to 2 s, ±20 % jitter. */
  readonly claimBackoff?: Partial<BackoffPolicy>;
  /** Requeue delay after the claim store stayed unavailable, ms. Default 5000. At least 10. */
  readonly unavailableRequeueDelayMs?: number;
  /** Time allowed for a commit with its retries, ms. Default 10 000. Not cut short by shutdown. */
  readonly commitDeadlineMs?: number;
  /** Time allowed for a release with its retries, ms. Default 5000. Not cut short by shutdown. */
  readonly releaseDeadlineMs?: number;
  /**
   * Send the commits of acked deliveries issued within one event-loop turn as one
   * `claimer.commitMany` call (one store round trip) instead of one call each. Only the I/O is
   * batched: each delivery keeps its own commit outcome, retries and `commitDeadlineMs`, and a
   * batch leaves when the turn ends, never waiting for a slower handler. Applies only when the
   * claimer has `commitMany`, and never to a receipt with a transaction. A crash between a batch's
   * effects and its commit leaves those keys leased until `leaseTtlMs`, then they run again (as
   * for one message; see docs/guarantees.md). Default false: measured on Kafka with the Redis
   * claimer (whose own coalescer already gathers concurrent commits under load), it cut Redis
   * script calls by about a quarter but moved neither Redis server CPU nor Node CPU per record by
   * more than the noise (docs/performance.md), and it delays every commit to the end of its turn.
   * Try it when the number of calls to the claim store is what limits you. A batch leaves on
   * `setImmediate`: under fake timers that replace it, advance them for commits to go out.
   */
  readonly batchCommits?: boolean;
  /** Extend the lease while the handler runs. Default true. */
  readonly keepAlive?: boolean;
  /** Abort the handler's signal after this many ms; undefined (default) for no limit. */
  readonly handlerTimeoutMs?: number;
  /** How long `stop()` waits for in-flight handlers before aborting them, ms. Default 30 000. */
  readonly shutdownTimeoutMs?: number;
  /**
   * Largest body the default JSON decode parses, bytes, 1 … 2 147 483 647. Default 16 777 216
   * (16 MiB). A larger body is not parsed: the delivery is dead-lettered with reason
   * `invalid_body` and the error `body is <n> bytes, more than maxBodyBytes (<max>); not parsed`
   * (logged like every dead-letter), before any claim. A {@link ConsumerBase.decode} override
   * sees every body; call `super.decode` to keep the limit.
   */
  readonly maxBodyBytes?: number;
  /** Declared deployment, checked against the claimer's kind at start. */
  readonly deployment?: DeploymentDeclaration;
  /**
   * Run the handler WITHOUT a claim when the claim store stays unavailable. Default false: the
   * handler never runs unguarded. Turning it on trades duplicates for availability and logs a
   * warning at construction and on every unguarded run (rate-limited like every per-message failure line).
   * Refused (`ConfigurationError`) with a transactional claimer ({@link Claimer.transactional}).
   */
  readonly failOpen?: boolean;
  /**
   * The handler writes its effect through `ctx.transaction`: refused at construction
   * (`ConfigurationError`) unless the claimer is transactional ({@link Claimer.transactional}, e.g.
   * `new PostgresClaimer({ pool }, { mode: 'transactional' })`), so a claimer without a transaction
   * is found before the first message. Default false (without it, a handler that uses an absent
   * `ctx.transaction` fails each delivery with `TransactionUnavailableError`).
   */
  readonly requireTransaction?: boolean;
  /** pino-compatible logger. Default: `consoleInfoLogger` (info, warn and error as JSON lines on stderr). */
  readonly logger?: Logger;
  /** Observers of every outcome (logging, metrics, tracing). */
  readonly observers?: readonly ConsumerObserver[];
  /**
   * Time source and timers of the consumer: the handler timeout, the shutdown deadline and lease
   * keep-alive (ms). Default: the system clock (`performance.now()` and Node's timers). Meant for
   * tests, which pass a manual clock to advance time without sleeping (give the claimer the same
   * clock so leases expire on it). Commit and release retries and claim backoff keep real time.
   */
  readonly clock?: TimerClock;
}

/** Resolved options: every default applied. */
export type ResolvedConsumerOptions = Required<Omit<ConsumerOptions, 'handlerTimeoutMs' | 'deployment' | 'retryBackoff' | 'claimBackoff' | 'ttlPolicy' | 'typeTtls'>> & {
  /** The effective TTLs (`leaseTtlMs` and `doneTtlMs` above are the consumer's own, `ttls.base`). */
  readonly ttls: ConsumerTtls;
  readonly handlerTimeoutMs: number | undefined;
  readonly deployment: DeploymentDeclaration | undefined;
  readonly retryBackoff: BackoffPolicy;
  readonly claimBackoff: BackoffPolicy;
};

/** Every name ConsumerOptions accepts; any other is refused (issue #12 item 5). */
const CONSUMER_OPTION_NAMES = optionNames<ConsumerOptions>()([
  'name',
  'claimer',
  'source',
  'leaseTtlMs',
  'doneTtlMs',
  'ttlPolicy',
  'typeTtls',
  'concurrency',
  'maxAttempts',
  'retryBackoff',
  'busyRequeueDelayMs',
  'claimRetries',
  'claimBackoff',
  'unavailableRequeueDelayMs',
  'commitDeadlineMs',
  'releaseDeadlineMs',
  'batchCommits',
  'keepAlive',
  'handlerTimeoutMs',
  'shutdownTimeoutMs',
  'maxBodyBytes',
  'deployment',
  'failOpen',
  'requireTransaction',
  'logger',
  'observers',
  'clock',
]);
const DEPLOYMENT_OPTION_NAMES = optionNames<DeploymentDeclaration>()(['replicas']);

/** Smallest busy and unavailable requeue delay, ms. */
export const MIN_REQUEUE_DELAY_MS = 10;

export const DEFAULT_RETRY_BACKOFF: Readonly<BackoffPolicy> = { initialDelayMs: 1000, maxDelayMs: 60_000, multiplier: 2, jitter: 0.2 };
export const DEFAULT_CLAIM_BACKOFF: Readonly<BackoffPolicy> = { initialDelayMs: 100, maxDelayMs: 2000, multiplier: 2, jitter: 0.2 };

export const CONSUMER_DEFAULTS = {
  leaseTtlMs: 30_000,
  doneTtlMs: 7 * 24 * 60 * 60 * 1000,
  concurrency: 10,
  maxAttempts: 5,
  busyRequeueDelayMs: 1000,
  claimRetries: 3,
  unavailableRequeueDelayMs: 5000,
  commitDeadlineMs: 10_000,
  releaseDeadlineMs: 5000,
  batchCommits: false,
  keepAlive: true,
  shutdownTimeoutMs: 30_000,
  maxBodyBytes: 16 * 1024 * 1024,
  failOpen: false,
  requireTransaction: false,
} as const;

/**
 * Applies defaults to a copy of `options` and checks every field and cross-field rule.
 * @throws ConfigurationError naming the field and the value
 */
export function resolveConsumerOptions(options: ConsumerOptions, defaultLogger: Logger): ResolvedConsumerOptions {
  if (!options || typeof options !== 'object') throw new ConfigurationError('consumer options are required');
  checkKnownOptions('consumer options', options, CONSUMER_OPTION_NAMES);
  const retryBackoff = resolveBackoffOption('retryBackoff', options.retryBackoff, DEFAULT_RETRY_BACKOFF);
  const claimBackoff = resolveBackoffOption('claimBackoff', options.claimBackoff, DEFAULT_CLAIM_BACKOFF);
  checkDeployment(options.deployment);
  if (typeof options.name !== 'string' || options.name.length === 0 || options.name.length > 128) {
    throw new ConfigurationError(`name must be a non-empty string of at most 128 characters, got ${JSON.stringify(options.name)}`);
  }
  if (options.name === RUN_ONCE_NAMESPACE) {
    throw new ConfigurationError(
      `name "${RUN_ONCE_NAMESPACE}" is reserved for runOnce: a consumer's claim keys start with its name, so its messages could plant the stored results runOnce replays; choose another name`,
    );
  }
  checkClaimer('claimer', options.claimer);
  checkSource(options.source);
  const resolved = {
    ...CONSUMER_DEFAULTS,
    logger: defaultLogger,
    observers: [],
    clock: systemClock,
    ...stripUndefined(options),
    name: options.name,
    claimer: options.claimer,
    source: options.source,
    handlerTimeoutMs: options.handlerTimeoutMs,
    deployment: options.deployment,
    retryBackoff,
    claimBackoff,
  } as ResolvedConsumerOptions;
  if (options.ttlPolicy === undefined) {
    checkTtl('leaseTtlMs', resolved.leaseTtlMs, MIN_LEASE_TTL_MS, MAX_LEASE_TTL_MS);
    checkTtl('doneTtlMs', resolved.doneTtlMs, MIN_LEASE_TTL_MS, MAX_DONE_TTL_MS);
    if (resolved.doneTtlMs < resolved.leaseTtlMs) {
      throw new ConfigurationError(`doneTtlMs (${resolved.doneTtlMs}) must be ≥ leaseTtlMs (${resolved.leaseTtlMs})`);
    }
  }
  // The consumer's own TTLs (the policy's defaults when it sets none) and each type's, checked against the policy.
  const ttls = new ConsumerTtls(options.name, { leaseTtlMs: options.leaseTtlMs, doneTtlMs: options.doneTtlMs }, options.ttlPolicy, options.typeTtls);
  Object.assign(resolved, { ttls, leaseTtlMs: ttls.base.leaseTtlMs, doneTtlMs: ttls.base.doneTtlMs });
  checkInteger('concurrency', resolved.concurrency, 1, 10_000);
  checkInteger('maxAttempts', resolved.maxAttempts, 1, 1000);
  checkInteger('claimRetries', resolved.claimRetries, 0, 100);
  // At least 10 ms: a requeue with no delay turns a held lease or an outage into a hot loop.
  checkInteger('busyRequeueDelayMs', resolved.busyRequeueDelayMs, MIN_REQUEUE_DELAY_MS, MAX_LEASE_TTL_MS);
  checkInteger('unavailableRequeueDelayMs', resolved.unavailableRequeueDelayMs, MIN_REQUEUE_DELAY_MS, MAX_LEASE_TTL_MS);
  checkInteger('commitDeadlineMs', resolved.commitDeadlineMs, 1, 600_000);
  checkInteger('releaseDeadlineMs', resolved.releaseDeadlineMs, 1, 600_000);
  checkInteger('shutdownTimeoutMs', resolved.shutdownTimeoutMs, 0, 3_600_000);
  checkInteger('maxBodyBytes', resolved.maxBodyBytes, 1, 2_147_483_647);
  if (resolved.handlerTimeoutMs !== undefined) checkInteger('handlerTimeoutMs', resolved.handlerTimeoutMs, 1, MAX_LEASE_TTL_MS);
  checkBackoff('retryBackoff', resolved.retryBackoff);
  checkBackoff('claimBackoff', resolved.claimBackoff);
  checkBoolean('keepAlive', resolved.keepAlive);
  checkBoolean('batchCommits', resolved.batchCommits);
  checkBoolean('failOpen', resolved.failOpen);
  checkBoolean('requireTransaction', resolved.requireTransaction);
  if (resolved.requireTransaction && resolved.claimer.transactional !== true) {
    const details = resolved.claimer.describe?.();
    const says = details ? ` (it says: ${Object.entries(details).map(([name, value]) => `${name} ${String(value)}`).join(', ')})` : '';
    throw new ConfigurationError(
      `requireTransaction: the handler writes through ctx.transaction, but the claimer gives no transaction${says}: use a transactional claimer ` +
        "(for a GatedClaimer, a transactional truth), e.g. new PostgresClaimer({ pool }, { mode: 'transactional' })",
    );
  }
  if (resolved.failOpen && resolved.claimer.transactional === true) {
    throw new ConfigurationError('failOpen cannot be used with a transactional claimer: an unguarded run has no claim and so no transaction for the handler\'s effect');
  }
  const source = resolved.source as Partial<MessageSource> | undefined;
  if (resolved.claimer.sharesTransactions === true && source?.claimsAhead === true && source.adoptsSharedTransactions !== true && source.dispatchesBatchesTogether !== true) {
    throw new ConfigurationError(
      `the claimer shares one transaction per batch claim (transactionBatch: 'per-chunk'), but the ${String(source.system)} source claims ahead without adopting it: ` +
        'each commit would wait for the whole batch. Turn the source\'s claims ahead off (RabbitMQ batchClaims: false) or use per-record transactions',
    );
  }
  source?.fitClaimer?.(resolved.claimer);
  const logger = resolved.logger as Partial<Logger> | null;
  if (!logger || typeof logger !== 'object' || (['debug', 'info', 'warn', 'error'] as const).some((m) => typeof logger[m] !== 'function')) {
    throw new ConfigurationError('logger must be a pino-compatible logger with debug, info, warn and error methods');
  }
  (resolved as { logger: Logger }).logger = guardLogger(resolved.logger);
  const clock = resolved.clock as Partial<TimerClock> | null;
  if (!clock || typeof clock !== 'object' || (['now', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] as const).some((m) => typeof clock[m] !== 'function')) {
    throw new ConfigurationError('clock must be a TimerClock with now, setTimeout, clearTimeout, setInterval and clearInterval methods');
  }
  if (!Array.isArray(resolved.observers) || resolved.observers.some((o) => !o || typeof o !== 'object')) {
    throw new ConfigurationError('observers must be an array of ConsumerObserver objects');
  }
  const horizonMs = retryHorizonMs(resolved);
  if (ttls.shortestDoneTtlMs < horizonMs) {
    resolved.logger.warn(
      { consumer: resolved.name, doneTtlMs: ttls.shortestDoneTtlMs, retryHorizonMs: horizonMs },
      'doneTtlMs is shorter than the retry horizon (longest time from first delivery to dead-letter through retries and busy requeues): a copy of a message still being retried may outlive the committed record and repeat its effect; raise doneTtlMs',
    );
  }
  if (!resolved.keepAlive && resolved.handlerTimeoutMs === undefined) {
    resolved.logger.warn({ consumer: resolved.name }, 'keepAlive is off and no handlerTimeoutMs is set: a handler longer than leaseTtlMs lets a duplicate run concurrently');
  }
  return resolved;
}

/**
 * `deployment` at construction: known names only, and `replicas` an integer ≥ 1 (a misspelled
 * or mistyped declaration would otherwise turn the in-memory/replicas startup check off).
 */
function checkDeployment(deployment: unknown): void {
  checkKnownOptions('deployment', deployment, DEPLOYMENT_OPTION_NAMES);
  const replicas = (deployment as DeploymentDeclaration | undefined)?.replicas;
  if (replicas !== undefined) checkInteger('deployment.replicas', replicas, 1, Infinity);
}


function checkBackoff(field: string, p: BackoffPolicy): void {
  checkInteger(`${field}.initialDelayMs`, p.initialDelayMs, 0, MAX_LEASE_TTL_MS);
  checkInteger(`${field}.maxDelayMs`, p.maxDelayMs, p.initialDelayMs, MAX_LEASE_TTL_MS);
  if (typeof p.multiplier !== 'number' || !(p.multiplier >= 1)) throw new ConfigurationError(`${field}.multiplier must be ≥ 1, got ${String(p.multiplier)}`);
  if (typeof p.jitter !== 'number' || !(p.jitter >= 0 && p.jitter <= 1)) throw new ConfigurationError(`${field}.jitter must be in [0, 1], got ${String(p.jitter)}`);
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(value)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}
