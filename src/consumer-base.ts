/**
 * ConsumerBase: subclass it, implement `handle`, and every delivery runs
 * validate → derive key → claim → handle → settle, per the settlement table in README.md.
 */
import { performance } from 'node:perf_hooks';
import type { AcquiredClaim, ClaimOptions, ClaimResult, JsonValue } from './claimer';
import { type ConsumerOptions, resolveConsumerOptions, type ResolvedConsumerOptions } from './consumer-options';
import type { Delivery, HandlerContext, Message } from './delivery';
import { type Disposition, isDisposition } from './disposition';
import {
  ConfigurationError,
  InvalidDispositionError,
  InvalidKeyError,
  InvalidMessageError,
  isRetriable,
  KeyConflictError,
  LeaseLostError,
  PermanentError,
  ShutdownError,
  TimeoutError,
} from './errors';
import { LazyAbort, LazyContext } from './handler-signal';
import { FailureLog } from './failure-log';
import { type KeptLeaseCallbacks, LeaseKeeper } from './keep-alive';
import { namespaceKey, validateKey } from './keys';
import { LogLimiter } from './log-limiter';
import { consoleWarnLogger, type Logger } from './logger';
import { defaultMessageKey } from './message-key';
import {
  type ConsumerEvent,
  type DeliveryResult,
  DeliveryTrace,
  INERT_TRACE,
  ObservationFanout,
} from './observer';
import { backoffDelay, sleep } from './retry';
import { Semaphore } from './semaphore';
import { commitWithin, errorType, releaseWithin, truncateErrorMessage } from './settlement';
import type { AckInfo, RejectInfo, RequeueInfo, Settler } from './settler';
import type { DeliverySink, PreparedClaim } from './source';
import { validateDeployment } from './startup-validation';
import type { EffectiveTtl } from './ttl-policy';

/** Lifecycle states of a consumer. */
export type ConsumerState = 'created' | 'starting' | 'running' | 'stopping' | 'stopped' | 'failed';

/** What {@link ConsumerBase.describe} returns. */
export interface ConsumerDescription {
  readonly name: string;
  /** The effective TTLs, ms: the consumer's own (`type` undefined) first, then each listed message type. */
  readonly ttls: readonly EffectiveTtl[];
}

/** What liveness and readiness probes read. */
export interface ConsumerHealth {
  readonly name: string;
  readonly state: ConsumerState;
  /** False only when start failed or the consumer crashed. */
  readonly live: boolean;
  /** True while running and the source reports it is consuming. */
  readonly ready: boolean;
  readonly inFlight: number;
  /** Dead-letters issued since construction, by reason (`missing_key`, `retry_exhausted`, …). */
  readonly deadLetters: Readonly<Record<string, number>>;
}

type HandlerEnd =
  | { readonly kind: 'disposition'; readonly disposition: Disposition }
  | { readonly kind: 'error'; readonly error: unknown };

const RESET_ATTEMPTS = Object.freeze({ resetAttempts: true });

/** A delivery result before its duration is known (`durationMs` is set once the delivery ends). */
type PendingResult = DeliveryResult;
/** What a settle step is given to build the result from. */
type ResultFields = Omit<DeliveryResult, 'action' | 'durationMs'>;

const ACK_NEW: AckInfo = Object.freeze({ duplicate: false });
const ACK_DUPLICATE: AckInfo = Object.freeze({ duplicate: true });

/**
 * The final result: every field present, always in the same order, so all results share one
 * object shape (this is on the per-message path).
 */
function resultOf(action: DeliveryResult['action'], r: ResultFields, reason?: string, delayMs?: number, error?: unknown): PendingResult {
  return {
    action,
    outcome: r.outcome,
    key: r.key,
    claimState: r.claimState,
    attempt: r.attempt,
    fencingToken: r.fencingToken,
    reason: reason ?? r.reason,
    delayMs: delayMs ?? r.delayMs,
    error: error ?? r.error,
    handled: r.handled,
    durationMs: 0,
  };
}

function callSettler(settler: Settler, action: 'ack' | 'requeue' | 'reject', info: AckInfo | RequeueInfo | RejectInfo, delayMs: number): Promise<void> {
  if (action === 'ack') return settler.ack(info as AckInfo);
  if (action === 'requeue') return settler.requeue(delayMs, info as RequeueInfo);
  return settler.reject(info as RejectInfo);
}

/**
 * Base class of an effect-once consumer.
 *
 * @typeParam TBody - the decoded body type (see {@link ConsumerBase.decode}).
 * @typeParam TTransaction - the type of `ctx.transaction`: set it (e.g. to `pg`'s PoolClient) only
 *   with a transactional claimer (`PostgresClaimer` in `transactional` mode); otherwise leave it
 *   `undefined`.
 */
export abstract class ConsumerBase<TBody = unknown, TTransaction = undefined> implements DeliverySink {
  protected readonly options: ResolvedConsumerOptions;
  protected readonly logger: Logger;
  private readonly observation: ObservationFanout;
  /** Rate-limited failure lines and dead-letter counts (see failure-log.ts). */
  private readonly logLimiter: LogLimiter;
  private readonly failures: FailureLog;
  /** The logger of per-message warnings that can flood (settle and lease-extend failures). */
  private readonly floodLogger: Logger;
  private readonly limiter: Semaphore;
  /** Deliveries between dispatch and their DeliveryResult. */
  private inFlightCount = 0;
  private drainWaiters: (() => void)[] = [];
  /** Handlers running now, so shutdown can abort them. */
  private readonly flights = new Set<Flight>();
  /** The escaped consumer name and `:`, prepended to every message key. */
  private readonly keyPrefix: string;
  private readonly keeper: LeaseKeeper | undefined;
  /** Aborts local waits (claim backoff) at shutdown. Receipt operations never listen to it. */
  private readonly shutdown = new AbortController();
  private state: ConsumerState = 'created';
  private stopping: Promise<void> | undefined;
  /** Set by a stop() that came while start() was running. */
  private stopRequested = false;

  /**
   * @throws ConfigurationError for any invalid option (see {@link ConsumerOptions}), or when the
   *   subclass has no `handle()` method (possible from JavaScript)
   */
  constructor(options: ConsumerOptions) {
    if (typeof (this as { handle?: unknown }).handle !== 'function') {
      throw new ConfigurationError(`${new.target.name || 'the consumer class'} must implement handle(message, context) as a method (a class field is set only after this constructor ran)`);
    }
    this.options = resolveConsumerOptions(options, options?.logger ?? consoleWarnLogger);
    this.logger = this.options.logger;
    this.observation = new ObservationFanout(this.options.observers, this.logger);
    this.limiter = new Semaphore(this.options.concurrency);
    this.logLimiter = new LogLimiter(this.logger, { consumer: this.options.name });
    this.failures = new FailureLog(this.options.name, this.logger, this.logLimiter, this.options.maxAttempts);
    this.floodLogger = this.logLimiter.limited(this.logger, 'lease_extend_failed');
    this.keyPrefix = namespaceKey(this.options.name, 'x').slice(0, -1);
    this.keeper = this.options.keepAlive ? new LeaseKeeper(this.options.leaseTtlMs, Math.max(1, Math.floor(this.options.leaseTtlMs / 3)), this.options.ttls.shortestLeaseTtlMs) : undefined;
    if (this.options.failOpen) {
      this.logger.warn({ consumer: this.name }, 'failOpen is on: while the claim store is unavailable, handlers run WITHOUT a claim and effects may repeat');
    }
  }

  /**
   * The business effect of one message. Return `ack(result?)`, `requeue(...)` or `reject(reason)`,
   * directly or as a promise (the handler may be synchronous or `async`); throw (or reject with)
   * {@link PermanentError} to dead-letter, any other error to retry with backoff. Any other return
   * value (`undefined`, a plain object) is dead-lettered once with reason `invalid_disposition`,
   * never retried and never an implicit ack.
   */
  abstract handle(message: Message<TBody>, context: HandlerContext<TTransaction>): Disposition | Promise<Disposition>;

  /** The key namespace. */
  get name(): string {
    return this.options.name;
  }

  /** How long `stop()` waits for in-flight handlers, ms (read by `runConsumers` for its exit deadline). */
  get shutdownTimeoutMs(): number {
    return this.options.shutdownTimeoutMs;
  }

  /**
   * Decodes the raw body. Default: UTF-8 JSON. Throw to dead-letter the delivery with reason
   * `invalid_body` (no claim is made).
   */
  protected decode(raw: Buffer, _delivery: Delivery): TBody {
    return JSON.parse(raw.toString('utf8')) as TBody;
  }

  /**
   * The message's idempotency key, before namespacing. Default: the `idempotency-key` header,
   * else the broker's message id. Throw {@link InvalidMessageError} to dead-letter.
   */
  protected messageKey(delivery: Delivery): string {
    return defaultMessageKey(delivery);
  }

  /** Optional payload digest stored with the claim; a different one for a known key is a `key_conflict`. */
  protected fingerprint(_message: Message<TBody>): string | undefined {
    return undefined;
  }

  /** Called for a done duplicate with the stored result (for example to re-send a reply). Errors are logged. */
  protected onDuplicate(_message: Message<TBody>, _result: JsonValue | undefined): void | Promise<void> {
    return undefined;
  }

  /** True for errors that retrying cannot fix. Default: {@link PermanentError} and {@link InvalidMessageError}. */
  protected isPermanent(error: unknown): boolean {
    return error instanceof PermanentError || error instanceof InvalidMessageError || error instanceof InvalidDispositionError;
  }

  /**
   * Validates the deployment, readies the claimer and starts the source.
   *
   * A `stop()` called while this runs does not wait for it. Before the claimer is ready, the
   * source is then never started (this rejects with ShutdownError once `ready()` settles); while
   * the source is starting, stop closes it as usual. Either way the consumer ends `stopped`.
   * @throws DeploymentValidationError when the claimer does not fit the declared deployment
   * @throws ConfigurationError when called twice
   * @throws ShutdownError when `stop()` was called before the claimer was ready (nothing was consumed)
   */
  start(): Promise<void> {
    if (this.state !== 'created') return Promise.reject(new ConfigurationError(`start() called on a consumer that is ${this.state}`));
    this.state = 'starting';
    return this.startNow();
  }

  private async startNow(): Promise<void> {
    try {
      validateDeployment(this.options.claimer.kind, this.options.deployment);
      await this.options.claimer.ready?.();
      if (this.stopRequested) throw new ShutdownError('stop() was called before start() finished; the source was not started');
      await this.options.source.start(this, {
        concurrency: this.options.concurrency,
        leaseTtlMs: this.options.ttls.shortestLeaseTtlMs,
        ...(this.options.handlerTimeoutMs === undefined ? {} : { handlerTimeoutMs: this.options.handlerTimeoutMs }),
      });
      if (!this.stopRequested) this.state = 'running';
      this.logger.info({ consumer: this.name, ttls: this.options.ttls.describe() }, 'twophase: effective TTLs (leaseTtlMs, doneTtlMs) per message type');
    } catch (error) {
      if (!this.stopRequested) this.state = 'failed';
      throw error;
    }
  }

  /**
   * Graceful shutdown: stop intake, wait for in-flight handlers up to `shutdownTimeoutMs`, then
   * abort the rest (they release and requeue), settle everything, close the source. Safe to call
   * more than once.
   */
  stop(): Promise<void> {
    this.stopping ??= this.stopNow();
    return this.stopping;
  }

  /** The consumer's name and effective TTLs: its own, then each message type of `typeTtls`. */
  describe(): ConsumerDescription {
    return { name: this.name, ttls: this.options.ttls.describe() };
  }

  /** Liveness and readiness for deployment probes. */
  health(): ConsumerHealth {
    return {
      name: this.name,
      state: this.state,
      live: this.state !== 'failed',
      ready: this.state === 'running' && this.options.source.isConsuming?.() !== false,
      inFlight: this.inFlightCount,
      deadLetters: this.failures.deadLetters(),
    };
  }

  /** {@inheritDoc twophase/adapter-kit!DeliverySink.dispatch} */
  dispatch(delivery: Delivery, preclaimed?: PreparedClaim): Promise<DeliveryResult> {
    this.inFlightCount++;
    if (this.limiter.tryAcquire()) return this.process(delivery, preclaimed);
    return this.limiter.acquire().then(() => this.process(delivery, preclaimed));
  }

  /** {@inheritDoc twophase/adapter-kit!DeliverySink.fail} */
  fail(error: Error): void {
    if (this.state === 'stopped') return;
    this.logger.error({ err: error, consumer: this.name }, 'the source stopped for good; the consumer is no longer live');
    this.state = 'failed';
  }

  /** {@inheritDoc twophase/adapter-kit!DeliverySink.claimBatch} */
  async claimBatch(deliveries: readonly Delivery[]): Promise<PreparedClaim[]> {
    const prepared: PreparedClaim[] = deliveries.map(() => ({ kind: 'skipped' }));
    const requests: { index: number; key: string; options: ClaimOptions }[] = [];
    deliveries.forEach((delivery, index) => {
      try {
        const key = this.deriveKey(delivery);
        requests.push({ index, key, options: this.options.ttls.claimOptions(delivery) });
      } catch {
        // left 'skipped': dispatch derives the key again and dead-letters with the reason
      }
    });
    if (requests.length === 0) return prepared;
    const claimer = this.options.claimer;
    try {
      if (claimer.claimMany) {
        const entries = await claimer.claimMany(requests.map((r) => ({ key: r.key, options: r.options })));
        entries.forEach((entry, i) => {
          const { index, key } = requests[i]!;
          prepared[index] = entry.ok ? { kind: 'claimed', key, result: entry.result } : { kind: 'failed', key, error: entry.error };
        });
      } else {
        await Promise.all(
          requests.map(async ({ index, key, options }) => {
            try {
              prepared[index] = { kind: 'claimed', key, result: await claimer.claim(key, options) };
            } catch (error) {
              prepared[index] = { kind: 'failed', key, error: error as Error };
            }
          }),
        );
      }
    } catch (error) {
      for (const { index, key } of requests) prepared[index] = { kind: 'failed', key, error: error as Error };
    }
    return prepared;
  }

  private async stopNow(): Promise<void> {
    if (this.state === 'created') {
      this.state = 'stopped';
      return;
    }
    // During start(), never wait for it (a claimer's ready() or a broker connect can take long):
    // start() sees the request, does not start a source that was not started yet, and does not
    // mark the consumer running.
    if (this.state === 'starting') this.stopRequested = true;
    this.state = 'stopping';
    this.shutdown.abort(new ShutdownError());
    try {
      await this.options.source.stopIntake();
    } catch (error) {
      this.logger.warn({ err: error, consumer: this.name }, 'stopping intake failed');
    }
    const drained = this.drained();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      drained.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), this.options.shutdownTimeoutMs);
      }),
    ]);
    clearTimeout(timer);
    if (timedOut) {
      this.logger.warn({ consumer: this.name, inFlight: this.inFlightCount }, 'shutdown deadline passed: aborting in-flight handlers (they release and requeue)');
      for (const flight of this.flights) flight.abort(new ShutdownError('shutdown deadline passed'));
    }
    await this.drained();
    this.keeper?.close();
    try {
      await this.options.source.close();
    } catch (error) {
      this.logger.warn({ err: error, consumer: this.name }, 'closing the source failed');
    }
    this.logLimiter.flush(); // the last summary of failures not logged one by one
    this.state = 'stopped';
  }

  /** Resolves when no delivery is in flight. */
  private drained(): Promise<void> {
    if (this.inFlightCount === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  private deriveKey(delivery: Delivery): string {
    const raw = this.messageKey(delivery);
    try {
      if (typeof raw !== 'string' || raw.length === 0) validateKey(raw);
      const key = this.keyPrefix + raw;
      validateKey(key);
      return key;
    } catch (error) {
      if (error instanceof InvalidKeyError) throw new InvalidMessageError('invalid_key', error.message, { cause: error });
      throw error;
    }
  }

  private async process(delivery: Delivery, preclaimed: PreparedClaim | undefined): Promise<DeliveryResult> {
    const started = performance.now();
    const trace = this.observation.active
      ? this.observation.start({ consumer: this.name, headers: delivery.headers, messageId: delivery.messageId, metadata: delivery.metadata })
      : INERT_TRACE;
    const permit = new Permit(this.limiter);
    let result: PendingResult;
    try {
      result = await this.pipeline(delivery, preclaimed, trace, permit);
    } catch (error) {
      if (permit.handled) {
        // The handler acked and its commit was started: the effect is applied, and the source
        // may have moved on (Settler.handled). Ack; the commit's outcome is unknown.
        this.logger.error({ err: error, consumer: this.name }, 'unexpected pipeline error after the handler acked; acking the delivery (the commit may not have landed)');
        result = await this.ack(delivery, trace, false, { outcome: 'commit_failed', handled: true, error });
      } else {
        // A bug in the pipeline or a subclass hook: never lose the message.
        this.logger.error({ err: error, consumer: this.name }, 'unexpected pipeline error; requeueing the delivery');
        result = await this.requeue(delivery, trace, { cause: 'retry' }, this.options.busyRequeueDelayMs, { outcome: 'claim_failed', handled: false, error });
      }
    }
    const final = result as { -readonly [K in keyof DeliveryResult]: DeliveryResult[K] };
    final.durationMs = performance.now() - started;
    trace.end(final);
    this.failures.record(final);
    permit.release();
    if (--this.inFlightCount === 0 && this.drainWaiters.length > 0) {
      const waiters = this.drainWaiters;
      this.drainWaiters = [];
      for (const resolve of waiters) resolve();
    }
    return final;
  }

  private async pipeline(delivery: Delivery, preclaimed: PreparedClaim | undefined, trace: DeliveryTrace, permit: Permit): Promise<PendingResult> {
    if (this.state === 'stopping' || this.state === 'stopped') {
      await this.releasePreclaimed(preclaimed);
      return this.requeue(delivery, trace, { cause: 'shutdown' }, 0, { outcome: 'released', handled: false });
    }
    let key: string;
    let message: Message<TBody>;
    try {
      key = preclaimed && preclaimed.kind !== 'skipped' ? preclaimed.key : this.deriveKey(delivery);
      let body: TBody;
      try {
        body = this.decode(delivery.body, delivery);
      } catch (error) {
        if (error instanceof InvalidMessageError) throw error;
        throw new InvalidMessageError('invalid_body', `body could not be decoded: ${truncateErrorMessage(error, 200)}`, { cause: error });
      }
      message = { key, body, raw: delivery.body, headers: delivery.headers, messageId: delivery.messageId, metadata: delivery.metadata };
    } catch (error) {
      const reason = error instanceof InvalidMessageError ? error.reason : 'invalid_body';
      await this.releasePreclaimed(preclaimed);
      return this.reject(delivery, trace, { reason, attempts: 0, error }, { outcome: 'rejected', handled: false });
    }

    let claim: ClaimResult;
    try {
      if (trace.wrapsSteps) claim = await trace.step('claim', () => this.claim(key, message, preclaimed));
      else if (preclaimed?.kind === 'claimed') claim = preclaimed.result;
      else claim = await this.claim(key, message, preclaimed);
    } catch (error) {
      return this.onClaimError(delivery, message, trace, error);
    }
    if (claim.state === 'acquired') return this.runAcquired(delivery, message, claim, trace, permit);
    const base = { key, claimState: claim.state } as const;
    if (claim.state === 'done') {
      this.emit(trace, delivery, 'done_duplicate', key);
      try {
        await this.onDuplicate(message, claim.result);
      } catch (error) {
        this.logger.warn({ err: error, key }, 'onDuplicate hook threw; the duplicate is acked anyway');
      }
      return this.ack(delivery, trace, true, { ...base, outcome: 'done_duplicate', handled: false });
    }
    this.emit(trace, delivery, 'busy', key);
    return this.requeue(delivery, trace, { cause: 'busy' }, this.options.busyRequeueDelayMs, { ...base, outcome: 'busy', handled: false });
  }

  /** Gives back a lease taken ahead by claimBatch for a delivery that will not be handled. */
  private async releasePreclaimed(preclaimed: PreparedClaim | undefined): Promise<void> {
    if (preclaimed?.kind === 'claimed' && preclaimed.result.state === 'acquired') {
      await releaseWithin(preclaimed.result.receipt, this.options.releaseDeadlineMs, this.logger);
    }
  }

  private async claim(key: string, message: Message<TBody>, preclaimed: PreparedClaim | undefined): Promise<ClaimResult> {
    if (preclaimed?.kind === 'claimed') return preclaimed.result;
    if (preclaimed?.kind === 'failed' && !isRetriable(preclaimed.error)) throw preclaimed.error;
    const fingerprint = this.fingerprint(message);
    const ttl = this.options.ttls.claimOptions(message);
    const options = fingerprint === undefined ? ttl : { ...ttl, fingerprint };
    for (let retry = 0; ; retry++) {
      try {
        return await this.options.claimer.claim(key, options);
      } catch (error) {
        if (!isRetriable(error) || retry >= this.options.claimRetries) throw error;
        await sleep(backoffDelay(this.options.claimBackoff, retry + 1), this.shutdown.signal);
      }
    }
  }

  private async onClaimError(delivery: Delivery, message: Message<TBody>, trace: DeliveryTrace, error: unknown): Promise<PendingResult> {
    const key = message.key;
    if (error instanceof KeyConflictError) {
      this.emit(trace, delivery, 'key_conflict', key, { error });
      return this.reject(delivery, trace, { reason: 'key_conflict', attempts: 0, error }, { key, outcome: 'key_conflict', handled: false });
    }
    if (error instanceof InvalidKeyError || error instanceof ConfigurationError) {
      return this.reject(delivery, trace, { reason: 'invalid_key', attempts: 0, error }, { key, outcome: 'rejected', handled: false });
    }
    if (error instanceof ShutdownError) {
      return this.requeue(delivery, trace, { cause: 'shutdown' }, 0, { key, outcome: 'claim_failed', handled: false, error });
    }
    this.emit(trace, delivery, 'claim_failed', key, { error });
    if (this.options.failOpen) return this.runUnguarded(delivery, message, trace);
    return this.requeue(delivery, trace, { cause: 'claimer_unavailable' }, this.options.unavailableRequeueDelayMs, { key, outcome: 'claim_failed', handled: false, error });
  }

  private async runAcquired(delivery: Delivery, message: Message<TBody>, claim: AcquiredClaim, trace: DeliveryTrace, permit: Permit): Promise<PendingResult> {
    const { receipt } = claim;
    const key = message.key;
    const attempt = Math.max(claim.attempt, (delivery.metadata.priorAttempts ?? 0) + 1);
    const fencingToken = receipt.fencingToken;
    const base = { key, claimState: 'acquired' as const, attempt, fencingToken };
    this.emit(trace, delivery, 'acquired', key, { attempt, fencingToken });

    if (attempt > this.options.maxAttempts) {
      // Redelivered more often than allowed (for example a handler that crashes its process).
      this.emit(trace, delivery, 'retry_exhausted', key, { attempt, fencingToken });
      return this.deadLetter(delivery, trace, receipt, base, { reason: 'retry_exhausted', attempts: attempt - 1 }, { ...base, outcome: 'retry_exhausted', handled: false });
    }

    const flight = new Flight(this.onLeaseExtended, this.floodLogger, trace, delivery, key, attempt, fencingToken);
    this.flights.add(flight);
    const timer =
      this.options.handlerTimeoutMs === undefined
        ? undefined
        : setTimeout(() => flight.abort(new TimeoutError(`handler passed handlerTimeoutMs (${this.options.handlerTimeoutMs} ms)`)), this.options.handlerTimeoutMs);
    const keepAlive = this.keeper?.keep(receipt, flight, this.options.ttls.claimOptions(message).leaseTtlMs);
    const context = new LazyContext(flight, fencingToken, attempt, delivery.metadata, receipt.transaction as TTransaction);
    let end: HandlerEnd;
    try {
      // Stop waiting once the handler is aborted (shutdown deadline, handler timeout): a handler
      // that ignores its signal must not hold the delivery, its lease or shutdown forever.
      const value = await flight.race(trace.wrapsSteps ? trace.step('handle', () => this.callHandle(message, context)) : this.callHandle(message, context));
      end = isDisposition(value) ? { kind: 'disposition', disposition: value } : { kind: 'error', error: new InvalidDispositionError(value) };
    } catch (error) {
      end = { kind: 'error', error };
    } finally {
      clearTimeout(timer);
      const extending = keepAlive?.stop();
      if (extending) await extending;
      this.flights.delete(flight);
    }

    if (end.kind === 'disposition' && end.disposition.type === 'ack') {
      const value = end.disposition.result;
      const committing = trace.wrapsSteps
        ? trace.step('commit', () => commitWithin(receipt, value, this.options.commitDeadlineMs, this.logger))
        : commitWithin(receipt, value, this.options.commitDeadlineMs, this.logger);
      // A receipt carrying the handler's transaction commits the effect with the claim: the
      // delivery counts as handled only once that commit succeeded (see Receipt.transaction).
      const atomic = receipt.transaction !== undefined;
      if (!atomic) {
        // The effect is done and its commit is on its way; whatever the commit's outcome, the
        // delivery is acked. The handler slot is free now, and the source may move on (see Settler.handled).
        permit.release();
        permit.handled = true;
        if (delivery.settler.handled) this.signalHandled(delivery, key);
      }
      const commit = await committing;
      if (atomic) {
        if (commit.outcome !== 'committed') return this.rolledBack(delivery, trace, receipt, base, commit.error);
        permit.release();
        permit.handled = true;
      }
      const failed = commit.outcome === 'committed' ? undefined : commit.error;
      this.emit(trace, delivery, commit.outcome, key, { attempt, fencingToken, error: failed });
      if (trace.wrapsSteps) await this.settle(trace, delivery, key, attempt, fencingToken, 'ack', ACK_NEW);
      else {
        try {
          await delivery.settler.ack(ACK_NEW);
        } catch (error) {
          this.settleFailed(trace, delivery, key, attempt, fencingToken, error);
        }
      }
      return { action: 'ack', outcome: commit.outcome, key, claimState: 'acquired', attempt, fencingToken, reason: undefined, delayMs: undefined, error: failed, handled: true, durationMs: 0 };
    }

    const abortReason: unknown = flight.reason;
    const lostDuringHandler = flight.lost;
    const error = end.kind === 'error' ? end.error : undefined;
    if (abortReason instanceof ShutdownError) {
      await this.release(delivery, trace, receipt, base);
      return this.requeue(delivery, trace, { cause: 'shutdown' }, 0, { ...base, outcome: 'released', handled: true });
    }
    if (lostDuringHandler) {
      await this.release(delivery, trace, receipt, base);
      this.emit(trace, delivery, 'lease_lost', key, { attempt, fencingToken, error: lostDuringHandler });
      return this.requeue(delivery, trace, { cause: 'lease_lost' }, this.options.busyRequeueDelayMs, { ...base, outcome: 'lease_lost', handled: true, error: lostDuringHandler });
    }
    if (end.kind === 'disposition' && end.disposition.type === 'reject') {
      return this.deadLetter(delivery, trace, receipt, base, { reason: end.disposition.reason || 'handler_rejected', attempts: attempt }, { ...base, outcome: 'rejected', handled: true });
    }
    if (error !== undefined && this.isPermanent(error)) {
      const reason = error instanceof InvalidDispositionError ? 'invalid_disposition' : error instanceof InvalidMessageError ? error.reason : 'permanent_error';
      return this.deadLetter(delivery, trace, receipt, base, { reason, attempts: attempt, error }, { ...base, outcome: 'rejected', handled: true, error });
    }
    if (attempt >= this.options.maxAttempts) {
      this.emit(trace, delivery, 'retry_exhausted', key, { attempt, fencingToken, error });
      return this.deadLetter(delivery, trace, receipt, base, { reason: 'retry_exhausted', attempts: attempt, error }, { ...base, outcome: 'retry_exhausted', handled: true, error });
    }
    await this.release(delivery, trace, receipt, base);
    const asked = end.kind === 'disposition' && end.disposition.type === 'requeue' ? end.disposition.delayMs : undefined;
    const delayMs = asked ?? backoffDelay(this.options.retryBackoff, attempt);
    return this.requeue(delivery, trace, { cause: 'retry', attempt }, delayMs, { ...base, outcome: 'released', handled: true, error });
  }

  /**
   * Runs `handle()` and always returns a promise: a synchronous return value is wrapped, and a
   * synchronous throw becomes a rejection (so both are judged like an `async` handler's).
   */
  private callHandle(message: Message<TBody>, context: HandlerContext<TTransaction>): Promise<Disposition> {
    try {
      return Promise.resolve(this.handle(message, context));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * A transactional receipt's commit failed: the effect was rolled back with the claim, so the
   * delivery is requeued (never acked) and the redelivery claims again (the attempt was counted).
   */
  private async rolledBack(
    delivery: Delivery,
    trace: DeliveryTrace,
    receipt: AcquiredClaim['receipt'],
    base: { key: string; claimState: 'acquired'; attempt: number; fencingToken: number },
    error: unknown,
  ): Promise<PendingResult> {
    if (this.logLimiter.admit('transaction_rolled_back')) {
      this.logger.error(
        { consumer: this.name, key: base.key, reason: 'transaction_rolled_back', attempt: base.attempt, destination: 'requeue', err: error },
        'twophase: the transaction holding the claim and the effect did not commit; the effect was rolled back, message requeued',
      );
    }
    this.emit(trace, delivery, 'commit_failed', base.key, { attempt: base.attempt, fencingToken: base.fencingToken, error });
    await this.release(delivery, trace, receipt, base);
    const delayMs = backoffDelay(this.options.retryBackoff, base.attempt);
    return this.requeue(delivery, trace, { cause: 'retry', attempt: base.attempt }, delayMs, { ...base, outcome: 'commit_failed', handled: true, error });
  }

  /** Fail-open path: the store stayed unavailable and `failOpen` is on. No claim, no commit. */
  private async runUnguarded(delivery: Delivery, message: Message<TBody>, trace: DeliveryTrace): Promise<PendingResult> {
    const attempt = (delivery.metadata.priorAttempts ?? 0) + 1;
    this.emit(trace, delivery, 'fail_open', message.key, { attempt });
    if (this.logLimiter.admit('fail_open')) this.logger.warn({ consumer: this.name, key: message.key }, 'failOpen: running the handler without a claim');
    const flight = new Flight(this.onLeaseExtended, this.floodLogger, trace, delivery, message.key, attempt, 0);
    this.flights.add(flight);
    const base = { key: message.key, attempt, fencingToken: 0 };
    try {
      const value = await trace.step('handle', () => this.callHandle(message, new LazyContext(flight, 0, attempt, delivery.metadata, undefined as TTransaction)));
      if (!isDisposition(value)) throw new InvalidDispositionError(value);
      if (value.type === 'ack') return this.ack(delivery, trace, false, { ...base, outcome: 'claim_failed', handled: true });
      if (value.type === 'reject') return this.reject(delivery, trace, { reason: value.reason, attempts: attempt }, { ...base, outcome: 'rejected', handled: true });
      return this.requeue(delivery, trace, { cause: 'retry', attempt }, value.delayMs ?? backoffDelay(this.options.retryBackoff, attempt), { ...base, outcome: 'claim_failed', handled: true });
    } catch (error) {
      if (this.isPermanent(error) || attempt >= this.options.maxAttempts) {
        const reason = error instanceof InvalidDispositionError ? 'invalid_disposition' : this.isPermanent(error) ? 'permanent_error' : 'retry_exhausted';
        return this.reject(delivery, trace, { reason, attempts: attempt, error }, { ...base, outcome: 'rejected', handled: true, error });
      }
      return this.requeue(delivery, trace, { cause: 'retry', attempt }, backoffDelay(this.options.retryBackoff, attempt), { ...base, outcome: 'claim_failed', handled: true, error });
    } finally {
      this.flights.delete(flight);
    }
  }

  /**
   * Dead-letters, then releases. Only when the dead-letter copy is in place (the settle
   * succeeded) is the attempt count reset, so a replay from the dead-letter queue after a fix
   * starts at attempt 1; when the dead-letter failed (the broker returns the message), the count
   * is kept and the redelivery goes straight back to the dead-letter path without running the
   * handler again.
   */
  private async deadLetter(
    delivery: Delivery,
    trace: DeliveryTrace,
    receipt: AcquiredClaim['receipt'],
    base: { key: string; attempt: number; fencingToken: number },
    info: { reason: string; attempts: number; error?: unknown },
    result: ResultFields,
  ): Promise<PendingResult> {
    const settled = await this.rejectSettled(delivery, trace, info, result);
    await this.release(delivery, trace, receipt, base, settled);
    return resultOf('reject', result, info.reason, undefined, info.error);
  }

  /** Releases before a requeue (attempt count kept) or after a dead-letter (`deadLetter`: count reset). */
  private async release(
    delivery: Delivery,
    trace: DeliveryTrace,
    receipt: AcquiredClaim['receipt'],
    base: { key: string; attempt: number; fencingToken: number },
    deadLetter = false,
  ): Promise<void> {
    const options = deadLetter ? RESET_ATTEMPTS : undefined;
    const released = await trace.step('release', () => releaseWithin(receipt, this.options.releaseDeadlineMs, this.logger, options));
    if (released) this.emit(trace, delivery, 'released', base.key, base);
  }

  private async ack(delivery: Delivery, trace: DeliveryTrace, duplicate: boolean, result: ResultFields): Promise<PendingResult> {
    await this.settle(trace, delivery, result.key, result.attempt, result.fencingToken, 'ack', duplicate ? ACK_DUPLICATE : ACK_NEW);
    return resultOf('ack', result);
  }

  private async requeue(delivery: Delivery, trace: DeliveryTrace, info: RequeueInfo, delayMs: number, result: ResultFields): Promise<PendingResult> {
    await this.settle(trace, delivery, result.key, result.attempt, result.fencingToken, 'requeue', info, delayMs);
    return resultOf('requeue', result, info.cause, delayMs);
  }

  private async reject(
    delivery: Delivery,
    trace: DeliveryTrace,
    info: { reason: string; attempts: number; error?: unknown },
    result: ResultFields,
  ): Promise<PendingResult> {
    await this.rejectSettled(delivery, trace, info, result);
    return resultOf('reject', result, info.reason, undefined, info.error);
  }

  /** Dead-letters through the broker; true when the settle succeeded. */
  private async rejectSettled(
    delivery: Delivery,
    trace: DeliveryTrace,
    info: { reason: string; attempts: number; error?: unknown },
    result: ResultFields,
  ): Promise<boolean> {
    const rejectInfo: RejectInfo = {
      reason: info.reason,
      attempts: info.attempts,
      errorMessage: truncateErrorMessage(info.error),
      errorType: errorType(info.error),
    };
    this.emit(trace, delivery, 'rejected', result.key, { attempt: result.attempt, fencingToken: result.fencingToken, reason: info.reason, error: info.error });
    return this.settle(trace, delivery, result.key, result.attempt, result.fencingToken, 'reject', rejectInfo);
  }

  /**
   * Calls the broker (`info` is the settler call's argument); a failure is reported as
   * `ack_failed` and never retried elsewhere. True when the settle succeeded.
   */
  private async settle(
    trace: DeliveryTrace,
    delivery: Delivery,
    key: string | undefined,
    attempt: number | undefined,
    fencingToken: number | undefined,
    action: 'ack' | 'requeue' | 'reject',
    info: AckInfo | RequeueInfo | RejectInfo,
    delayMs = 0,
  ): Promise<boolean> {
    const settler = delivery.settler;
    try {
      if (!trace.wrapsSteps) await callSettler(settler, action, info, delayMs);
      else await trace.step('settle', () => callSettler(settler, action, info, delayMs));
      return true;
    } catch (error) {
      this.settleFailed(trace, delivery, key, attempt, fencingToken, error);
      return false;
    }
  }

  private settleFailed(trace: DeliveryTrace, delivery: Delivery, key: string | undefined, attempt: number | undefined, fencingToken: number | undefined, error: unknown): void {
    if (this.logLimiter.admit('ack_failed')) this.logger.warn({ err: error, consumer: this.name, key }, 'broker settle failed; the broker will redeliver and the claim decides');
    this.emit(trace, delivery, 'ack_failed', key, { attempt, fencingToken, error });
  }

  /** Calls the settler's `handled` hook; a hook that throws is logged and ignored. */
  private signalHandled(delivery: Delivery, key: string): void {
    try {
      delivery.settler.handled!();
    } catch (error) {
      this.logger.warn({ err: error, key }, 'the settler\'s handled hook threw; ignored');
    }
  }

  /** Reports a lease extension of a running handler (bound once, shared by every flight). */
  private readonly onLeaseExtended = (flight: Flight): void => {
    this.emit(flight.trace, flight.delivery, 'lease_extended', flight.key, { attempt: flight.attempt, fencingToken: flight.fencingToken });
  };

  /** Emits one event; builds nothing when no observer is registered. */
  private emit(
    trace: DeliveryTrace,
    delivery: Delivery,
    type: ConsumerEvent['type'],
    key: string | undefined,
    detail?: { attempt?: number; fencingToken?: number; error?: unknown; reason?: string },
  ): void {
    if (!trace.observed) return;
    trace.emit({ type, consumer: this.name, key, metadata: delivery.metadata, ...detail });
  }
}

/** One delivery's concurrency permit: released once, when its handler is done or when it ends. */
class Permit {
  private held = true;
  /** Set once the settler was told the delivery is handled: from then on it must end in an ack. */
  handled = false;

  constructor(private readonly limiter: Semaphore) {}

  release(): void {
    if (!this.held) return;
    this.held = false;
    this.limiter.release();
  }
}

/**
 * One running handler: its lazy abort signal, and the keep-alive callbacks of its lease, in one
 * object (one allocation per message instead of several closures).
 */
class Flight extends LazyAbort implements KeptLeaseCallbacks {
  /** Set when keep-alive found the lease taken over. */
  lost: LeaseLostError | undefined;
  private onAbandon: ((reason: unknown) => void) | undefined;

  constructor(
    private readonly extended: (flight: Flight) => void,
    private readonly logger: Logger,
    readonly trace: DeliveryTrace,
    readonly delivery: Delivery,
    readonly key: string,
    readonly attempt: number,
    readonly fencingToken: number,
  ) {
    super();
  }

  /**
   * Resolves or rejects as `work` does, or rejects with the abort reason as soon as the flight is
   * aborted for a shutdown or a handler timeout (not for a lost lease: that handler may finish,
   * and its commit is fenced). An abandoned `work` is left running with its rejection handled.
   */
  race<T>(work: Promise<T>): Promise<T> {
    if (this.aborted && this.abandonsOn(this.reason)) {
      work.catch(() => undefined);
      return Promise.reject(this.reason);
    }
    return new Promise<T>((resolve, reject) => {
      this.onAbandon = (reason) => {
        work.catch(() => undefined);
        reject(reason);
      };
      work.then(
        (value) => {
          this.onAbandon = undefined;
          resolve(value);
        },
        (error: unknown) => {
          this.onAbandon = undefined;
          reject(error);
        },
      );
    });
  }

  override abort(reason: unknown): void {
    super.abort(reason);
    if (this.onAbandon && this.abandonsOn(reason)) {
      const abandon = this.onAbandon;
      this.onAbandon = undefined;
      abandon(reason);
    }
  }

  private abandonsOn(reason: unknown): boolean {
    return reason instanceof ShutdownError || reason instanceof TimeoutError;
  }

  onLost(error: LeaseLostError): void {
    this.lost = error;
    this.abort(error);
  }

  onExtended(): void {
    if (this.trace.observed) this.extended(this);
  }

  onError(error: unknown): void {
    this.logger.warn({ err: error, key: this.key }, 'lease extend failed; will try again');
  }
}
