/**
 * ConsumerBase: subclass it, implement `handle`, and every delivery runs
 * validate → derive key → claim → handle → settle, per the settlement table in README.md.
 *
 * This class keeps the lifecycle (start, stop, health, dispatch with its concurrency bound) and
 * the hooks a subclass overrides. Each delivery runs in delivery-pipeline.ts; the settlement
 * rules are one pure function in settlement-table.ts, carried out by apply-decision.ts.
 */
import type { JsonValue } from '../claim/claimer';
import type { TimerHandle } from '../util/clock';
import { type ConsumerOptions, resolveConsumerOptions, type ResolvedConsumerOptions } from '../config/consumer-options';
import type { Delivery, HandlerContext, Message } from '../ports/delivery';
import { DeliveryPipeline } from '../pipeline/delivery-pipeline';
import type { Disposition } from '../ports/disposition';
import { ConfigurationError, InvalidDispositionError, InvalidMessageError, OutboxNotAvailableError, PermanentError, ShutdownError, TransactionUnavailableError } from '../util/errors';
import { consoleInfoLogger, type Logger } from '../util/logger';
import { defaultMessageKey } from '../ports/message-key';
import type { DeliveryResult } from '../ports/observer';
import { Semaphore } from '../util/semaphore';
import type { DeliverySink, PreparedClaim, Submission } from '../ports/source';
import { validateDeployment } from '../config/startup-validation';
import type { EffectiveTtl } from '../config/ttl-policy';

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
  /** Deliveries committed and acked since construction. */
  readonly commits: number;
  /** Deliveries of a key already done, acked without running the handler. */
  readonly duplicatesSkipped: number;
  /** Deliveries requeued because another worker held the key's lease. */
  readonly busyRequeues: number;
  /** Deliveries requeued for a retry (the handler threw or asked for a requeue). */
  readonly retries: number;
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
  private readonly limiter: Semaphore;
  /** Runs each delivery: validate, key, claim, handle, settle (delivery-pipeline.ts). */
  private readonly pipeline: DeliveryPipeline<TBody, TTransaction>;
  /** Deliveries between dispatch and their DeliveryResult. */
  private inFlightCount = 0;
  private drainWaiters: (() => void)[] = [];
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
    this.options = resolveConsumerOptions(options, options?.logger ?? consoleInfoLogger);
    this.logger = this.options.logger;
    this.limiter = new Semaphore(this.options.concurrency);
    this.pipeline = new DeliveryPipeline<TBody, TTransaction>(
      this.options,
      {
        handle: (message, context) => this.handle(message, context),
        decode: (raw, delivery) => this.decode(raw, delivery),
        messageKey: (delivery) => this.messageKey(delivery),
        fingerprint: (message) => this.fingerprint(message),
        onDuplicate: (message, result) => this.onDuplicate(message, result),
        isPermanent: (error) => this.isPermanent(error),
      },
      this.limiter,
      () => this.deliveryEnded(),
    );
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
   * Decodes the raw body. Default: UTF-8 JSON, for a body of at most `maxBodyBytes`; a larger
   * body is not parsed. Throw to dead-letter the delivery with reason `invalid_body` (no claim is made).
   * @throws InvalidMessageError (`invalid_body`) when the body is larger than `maxBodyBytes`
   */
  protected decode(raw: Buffer, _delivery: Delivery): TBody {
    const max = this.options.maxBodyBytes;
    if (raw.length > max) throw new InvalidMessageError('invalid_body', `body is ${raw.length} bytes, more than maxBodyBytes (${max}); not parsed`);
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

  /**
   * True for errors that retrying cannot fix. Default: {@link PermanentError},
   * {@link InvalidMessageError}, and the wiring errors {@link TransactionUnavailableError}
   * (`ctx.transaction` with a claimer that gives none) and {@link OutboxNotAvailableError}
   * (`ctx.outbox` where nothing can stage): the deployment must change, so the message is
   * dead-lettered at once (`permanent_error`) and a replay after the fix runs it again. The error
   * counts when it is one of these or was caused by one (its `cause`, up to 4 levels: a database
   * library that wraps the driver's error, as Drizzle does, keeps it there). So does an error with
   * the code `TRANSACTION_MISUSE` (a transactional claimer refused a BEGIN, COMMIT or ROLLBACK sent
   * through `ctx.transaction`): Prisma rebuilds a driver's error as its own, keeping only the code.
   */
  protected isPermanent(error: unknown): boolean {
    let current: unknown = error;
    for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
      if (
        current instanceof PermanentError ||
        current instanceof InvalidMessageError ||
        current instanceof InvalidDispositionError ||
        current instanceof TransactionUnavailableError ||
        current instanceof OutboxNotAvailableError ||
        (current as { code?: unknown }).code === 'TRANSACTION_MISUSE'
      ) {
        return true;
      }
      current = current.cause;
    }
    return false;
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
      const warning = this.options.claimer.startWarning?.({ concurrency: this.options.concurrency });
      if (warning !== undefined) this.logger.warn({ consumer: this.name, claimer: this.options.claimer.kind, concurrency: this.options.concurrency }, warning);
      await this.options.source.start(this, {
        concurrency: this.options.concurrency,
        leaseTtlMs: this.options.ttls.shortestLeaseTtlMs,
        ...(this.options.handlerTimeoutMs === undefined ? {} : { handlerTimeoutMs: this.options.handlerTimeoutMs }),
      });
      if (!this.stopRequested) this.state = 'running';
      const source = this.options.source;
      this.logger.info(
        { consumer: this.name, source: source.system, destination: source.destinationName, claimer: this.options.claimer.kind, ...(this.options.claimer.describe ? { claimerDetails: this.options.claimer.describe() } : {}), concurrency: this.options.concurrency, ttls: this.options.ttls.describe() },
        'twophase: consumer started',
      );
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
      deadLetters: this.pipeline.deadLetters(),
      ...this.pipeline.counts(),
    };
  }

  /** {@inheritDoc twophase/adapter-kit!DeliverySink.dispatch} */
  dispatch(delivery: Delivery, preclaimed?: PreparedClaim): Promise<DeliveryResult> {
    this.inFlightCount++;
    if (this.limiter.tryAcquire()) return this.pipeline.run(delivery, preclaimed);
    return this.limiter.acquire().then(() => this.pipeline.run(delivery, preclaimed));
  }

  /** {@inheritDoc twophase/adapter-kit!DeliverySink.submit} */
  submit(delivery: Delivery, preclaimed?: PreparedClaim): Submission {
    let onHandled!: (early: boolean) => void;
    const handled = new Promise<boolean>((resolve) => {
      onHandled = resolve;
    });
    this.inFlightCount++;
    // The pipeline calls onHandled once: `true` at the handled moment, else `false` as the
    // delivery ends (before `settled` resolves).
    const settled = this.limiter.tryAcquire()
      ? this.pipeline.run(delivery, preclaimed, onHandled)
      : this.limiter.acquire().then(() => this.pipeline.run(delivery, preclaimed, onHandled));
    return { handled, settled };
  }

  /** {@inheritDoc twophase/adapter-kit!DeliverySink.fail} */
  fail(error: Error): void {
    if (this.state === 'stopped') return;
    this.logger.error({ err: error, consumer: this.name }, 'the source stopped for good; the consumer is no longer live');
    this.state = 'failed';
  }

  /** {@inheritDoc twophase/adapter-kit!DeliverySink.claimBatch} */
  claimBatch(deliveries: readonly Delivery[]): Promise<PreparedClaim[]> {
    return this.pipeline.claimBatch(deliveries);
  }

  private async stopNow(): Promise<void> {
    if (this.state === 'created') {
      this.state = 'stopped';
      this.pipeline.beginShutdown(); // a delivery dispatched now is requeued, never handled
      return;
    }
    // During start(), never wait for it (a claimer's ready() or a broker connect can take long):
    // start() sees the request, does not start a source that was not started yet, and does not
    // mark the consumer running.
    if (this.state === 'starting') this.stopRequested = true;
    this.state = 'stopping';
    this.pipeline.beginShutdown();
    try {
      await this.options.source.stopIntake();
    } catch (error) {
      this.logger.warn({ err: error, consumer: this.name }, 'stopping intake failed');
    }
    const drained = this.drained();
    const clock = this.options.clock;
    let timer: TimerHandle | undefined;
    const timedOut = await Promise.race([
      drained.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = clock.setTimeout(() => resolve(true), this.options.shutdownTimeoutMs);
      }),
    ]);
    clock.clearTimeout(timer);
    if (timedOut) {
      this.logger.warn({ consumer: this.name, inFlight: this.inFlightCount }, 'shutdown deadline passed: aborting in-flight handlers (they release and requeue)');
      this.pipeline.abortHandlers(new ShutdownError('shutdown deadline passed'));
    }
    await this.drained();
    this.pipeline.close();
    try {
      await this.options.source.close();
    } catch (error) {
      this.logger.warn({ err: error, consumer: this.name }, 'closing the source failed');
    }
    this.state = 'stopped';
  }

  /** Resolves when no delivery is in flight. */
  private drained(): Promise<void> {
    if (this.inFlightCount === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /** One delivery ended: wakes `stop()` once none is in flight. */
  private deliveryEnded(): void {
    if (--this.inFlightCount === 0 && this.drainWaiters.length > 0) {
      const waiters = this.drainWaiters;
      this.drainWaiters = [];
      for (const resolve of waiters) resolve();
    }
  }
}
