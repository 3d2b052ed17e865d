/**
 * The per-delivery pipeline: validate → derive key → claim → handle → commit, asking the
 * settlement table (settlement-table.ts) at each fork and carrying its answer out
 * (apply-decision.ts). ConsumerBase owns the lifecycle and hands each delivery here.
 */
import { setMaxListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import type { ClaimResult, JsonValue } from './claimer';
import { ClaimStep } from './claim-step';
import { CommitBatcher } from './commit-batcher';
import type { ResolvedConsumerOptions } from './consumer-options';
import type { Delivery, HandlerContext, Message } from './delivery';
import { DeliveryRun, type RunHost } from './delivery-run';
import { type Disposition, isDisposition } from './disposition';
import {
  ConfigurationError,
  InvalidDispositionError,
  InvalidKeyError,
  InvalidMessageError,
  KeyConflictError,
  RetryableError,
  ShutdownError,
  TimeoutError,
} from './errors';
import { FailureLog } from './failure-log';
import { LazyContext } from './handler-signal';
import { LeaseKeeper } from './keep-alive';
import { namespaceKey, validateKey } from './keys';
import { LogLimiter } from './log-limiter';
import type { Logger } from './logger';
import { type DeliveryResult, INERT_TRACE, ObservationFanout } from './observer';
import { applySettlement, type ApplyContext, reportEvents } from './apply-decision';
import { backoffDelay } from './retry';
import type { Semaphore } from './semaphore';
import { type CommitOutcome, commitWithin, releaseWithin, truncateErrorMessage } from './settlement';
import { decide, type HandlerEnd, type SettlementEvent, type SettlementRules } from './settlement-table';
import type { PreparedClaim } from './source';

/** The consumer's overridable steps (ConsumerBase's `handle` and protected hooks). */
export interface PipelineHooks<TBody, TTransaction> {
  handle(message: Message<TBody>, context: HandlerContext<TTransaction>): Disposition | Promise<Disposition>;
  decode(raw: Buffer, delivery: Delivery): TBody;
  messageKey(delivery: Delivery): string;
  fingerprint(message: Message<TBody>): string | undefined;
  onDuplicate(message: Message<TBody>, result: JsonValue | undefined): void | Promise<void>;
  isPermanent(error: unknown): boolean;
}

const ACK_END: HandlerEnd = Object.freeze({ kind: 'ack' });

export class DeliveryPipeline<TBody, TTransaction> {
  private readonly logger: Logger;
  private readonly observation: ObservationFanout;
  /** Rate-limited failure lines and dead-letter counts (see failure-log.ts). */
  private readonly logLimiter: LogLimiter;
  private readonly failures: FailureLog;
  private readonly claims: ClaimStep;
  private readonly keeper: LeaseKeeper | undefined;
  private readonly rules: SettlementRules;
  private readonly applyContext: ApplyContext;
  private readonly host: RunHost;
  /** The escaped consumer name and `:`, prepended to every message key. */
  private readonly keyPrefix: string;
  /** Handlers running now, so shutdown can abort them. */
  private readonly flights = new Set<DeliveryRun>();
  /** Aborts local waits (claim backoff) at shutdown. Receipt operations never listen to it. */
  private readonly shutdown = new AbortController();
  private stopping = false;
  /** Gathers commits without a transaction into commitMany calls (options.batchCommits). */
  private readonly batcher: CommitBatcher | undefined;

  constructor(
    private readonly options: ResolvedConsumerOptions,
    private readonly hooks: PipelineHooks<TBody, TTransaction>,
    private readonly limiter: Semaphore,
    /** Called as each delivery ends, after its permit was given back. */
    private readonly ended: () => void,
  ) {
    const logger = options.logger;
    this.logger = logger;
    this.observation = new ObservationFanout(options.observers, logger);
    this.logLimiter = new LogLimiter(logger, { consumer: options.name });
    this.failures = new FailureLog(options.name, logger, this.logLimiter, options.maxAttempts);
    // Every claim backoff waits on this one signal: up to `concurrency` listeners during a store
    // outage, by design (Node would warn of a leak past 10).
    setMaxListeners(0, this.shutdown.signal);
    this.claims = new ClaimStep(options, this.shutdown.signal);
    this.keeper = options.keepAlive ? new LeaseKeeper(options.leaseTtlMs, Math.max(1, Math.floor(options.leaseTtlMs / 3)), options.clock, options.ttls.shortestLeaseTtlMs) : undefined;
    this.rules = {
      maxAttempts: options.maxAttempts,
      busyRequeueDelayMs: options.busyRequeueDelayMs,
      unavailableRequeueDelayMs: options.unavailableRequeueDelayMs,
      retryDelayMs: (attempt) => backoffDelay(options.retryBackoff, attempt),
    };
    this.applyContext = { name: options.name, logger, logLimiter: this.logLimiter, releaseDeadlineMs: options.releaseDeadlineMs };
    this.host = { name: options.name, floodLogger: this.logLimiter.limited(logger, 'lease_extend_failed') };
    this.keyPrefix = namespaceKey(options.name, 'x').slice(0, -1);
    const claimer = options.claimer;
    this.batcher = options.batchCommits && typeof claimer.commitMany === 'function' ? new CommitBatcher(claimer as Required<Pick<typeof claimer, 'commitMany'>>) : undefined;
  }

  /** Dead-letters issued since construction, by reason. */
  deadLetters(): Record<string, number> {
    return this.failures.deadLetters();
  }

  /** From now on, deliveries are requeued without a claim and claim backoffs end. */
  beginShutdown(): void {
    this.stopping = true;
    this.shutdown.abort(new ShutdownError());
  }

  /** Aborts every running handler (they release and requeue). */
  abortHandlers(reason: ShutdownError): void {
    for (const run of this.flights) run.abort(reason);
  }

  /** Stops lease keep-alive and logs the last summary of failures not logged one by one. */
  close(): void {
    this.keeper?.close();
    this.logLimiter.flush();
  }

  /** See {@link ClaimStep.claimBatch}. */
  claimBatch(deliveries: readonly Delivery[]): Promise<PreparedClaim[]> {
    return this.claims.claimBatch(deliveries, (delivery) => this.deriveKey(delivery));
  }

  /**
   * Runs one delivery (its concurrency permit already taken) to its settlement. Never rejects.
   * The permit is given back once the handler is done (or when the delivery ends). `onHandled`
   * is called at most once, when the delivery is bound to end in an ack (see markHandled).
   */
  async run(delivery: Delivery, preclaimed: PreparedClaim | undefined, onHandled?: () => void): Promise<DeliveryResult> {
    const started = performance.now();
    const trace = this.observation.active
      ? this.observation.start({ consumer: this.options.name, headers: delivery.headers, messageId: delivery.messageId, metadata: delivery.metadata })
      : INERT_TRACE;
    const run = new DeliveryRun(this.host, this.limiter, delivery, trace);
    run.onHandled = onHandled;
    let result: DeliveryResult;
    try {
      result = await this.steps(run, preclaimed);
    } catch (error) {
      // A bug in the pipeline or a subclass hook: never lose the message (or, once the handler
      // acked and its commit was started, ack: the source may have moved on).
      this.logger.error(
        { err: error, consumer: this.options.name },
        run.handled
          ? 'unexpected pipeline error after the handler acked; acking the delivery (the commit may not have landed)'
          : 'unexpected pipeline error; requeueing the delivery',
      );
      result = await this.settle(run, { kind: 'unexpected', error, handled: run.handled });
    }
    (result as { durationMs: number }).durationMs = performance.now() - started;
    trace.end(result);
    this.failures.record(result, delivery);
    run.releasePermit();
    this.ended();
    return result;
  }

  private settle(run: DeliveryRun, event: SettlementEvent & { readonly kind: 'stopping' | 'invalid' | 'key_conflict' | 'done' | 'busy' | 'commit_ended' | 'unexpected' }): Promise<DeliveryResult> {
    return applySettlement(this.applyContext, run, decide(event, this.rules));
  }

  private async steps(run: DeliveryRun, preclaimed: PreparedClaim | undefined): Promise<DeliveryResult> {
    const delivery = run.delivery;
    if (this.stopping) {
      await this.releasePreclaimed(preclaimed);
      return this.settle(run, { kind: 'stopping', during: 'intake' });
    }
    let message: Message<TBody>;
    try {
      const key = preclaimed && preclaimed.kind !== 'skipped' ? preclaimed.key : this.deriveKey(delivery);
      run.key = key;
      message = { key, body: this.decode(delivery), raw: delivery.body, headers: delivery.headers, messageId: delivery.messageId, metadata: delivery.metadata };
    } catch (error) {
      await this.releasePreclaimed(preclaimed);
      return this.settle(run, { kind: 'invalid', reason: error instanceof InvalidMessageError ? error.reason : 'invalid_body', error });
    }

    let claim: ClaimResult;
    try {
      // Without an observer wrapping the step: a claim prepared by claimBatch is taken as it is (no
      // await), else the claimer's own promise is awaited and the retries start only if it failed.
      if (run.trace.wrapsSteps) claim = await run.trace.step('claim', () => this.claim(message, preclaimed));
      else if (preclaimed?.kind === 'claimed') claim = preclaimed.result;
      else {
        const fingerprint = this.hooks.fingerprint(message);
        try {
          claim = await this.claims.first(message.key, message, fingerprint, preclaimed);
        } catch (error) {
          claim = await this.claims.retryAfter(error, message.key, message, fingerprint);
        }
      }
    } catch (error) {
      return this.claimFailed(run, message, error);
    }
    run.claimState = claim.state;
    if (claim.state === 'acquired') {
      run.receipt = claim.receipt;
      run.attempt = Math.max(claim.attempt, (delivery.metadata.priorAttempts ?? 0) + 1);
      run.fencingToken = claim.receipt.fencingToken;
      const decision = decide({ kind: 'acquired', attempt: run.attempt }, this.rules);
      if (decision.kind === 'settle') return applySettlement(this.applyContext, run, decision);
      reportEvents(run, decision.events, undefined);
      return await this.handleAndSettle(run, message, true);
    }
    if (claim.state === 'done') {
      const decision = decide({ kind: 'done' }, this.rules);
      reportEvents(run, decision.events, undefined);
      try {
        await this.hooks.onDuplicate(message, claim.result);
      } catch (error) {
        this.logger.warn({ err: error, key: message.key }, 'onDuplicate hook threw; the duplicate is acked anyway');
      }
      return applySettlement(this.applyContext, run, decision, false);
    }
    return this.settle(run, { kind: 'busy' });
  }

  private claim(message: Message<TBody>, preclaimed: PreparedClaim | undefined): Promise<ClaimResult> {
    if (preclaimed?.kind === 'claimed') return Promise.resolve(preclaimed.result);
    return this.claims.claim(message.key, message, this.hooks.fingerprint(message), preclaimed);
  }

  /** Gives back a lease taken ahead by claimBatch for a delivery that will not be handled. */
  private async releasePreclaimed(preclaimed: PreparedClaim | undefined): Promise<void> {
    if (preclaimed?.kind === 'claimed' && preclaimed.result.state === 'acquired') {
      await releaseWithin(preclaimed.result.receipt, this.options.releaseDeadlineMs, this.logger);
    }
  }

  private async claimFailed(run: DeliveryRun, message: Message<TBody>, error: unknown): Promise<DeliveryResult> {
    if (error instanceof KeyConflictError) return this.settle(run, { kind: 'key_conflict', error });
    if (error instanceof InvalidKeyError || error instanceof ConfigurationError) return this.settle(run, { kind: 'invalid', reason: 'invalid_key', error });
    if (error instanceof ShutdownError) return this.settle(run, { kind: 'stopping', during: 'claim', error });
    const decision = decide({ kind: 'claim_failed', error, failOpen: this.options.failOpen }, this.rules);
    if (decision.kind === 'settle') return applySettlement(this.applyContext, run, decision);
    // Fail-open: no claim, no commit; the same table decides how the handler's end settles.
    run.attempt = (run.delivery.metadata.priorAttempts ?? 0) + 1;
    run.fencingToken = 0;
    reportEvents(run, decision.events, decision.error);
    if (this.logLimiter.admit('fail_open')) this.logger.warn({ consumer: this.options.name, key: message.key }, 'failOpen: running the handler without a claim');
    return this.handleAndSettle(run, message, false);
  }

  /**
   * Runs `handle()` with the run's signal, the handler timeout and (with a claim) lease
   * keep-alive, then settles its end by the table (a commit first when it acked with a claim).
   * Stops waiting once the handler is aborted (shutdown deadline, handler timeout): a handler that
   * ignores its signal must not hold the delivery, its lease or shutdown forever.
   */
  private async handleAndSettle(run: DeliveryRun, message: Message<TBody>, guarded: boolean): Promise<DeliveryResult> {
    const receipt = guarded ? run.receipt : undefined;
    this.flights.add(run);
    const timeoutMs = this.options.handlerTimeoutMs;
    const clock = this.options.clock;
    const timer = timeoutMs === undefined ? undefined : clock.setTimeout(() => run.abort(new TimeoutError(`handler passed handlerTimeoutMs (${timeoutMs} ms)`)), timeoutMs);
    const keepAlive = receipt ? this.keeper?.keep(receipt, run, this.options.ttls.claimOptions(run.delivery).leaseTtlMs) : undefined;
    const context = new LazyContext(run, run.fencingToken!, run.attempt!, run.delivery.metadata, receipt?.transaction as TTransaction, receipt?.outbox, message.key);
    let end: HandlerEnd;
    try {
      const handling = run.trace.wrapsSteps ? run.trace.step('handle', () => this.callHandle(message, context)) : this.callHandle(message, context);
      const value = await run.race(handling);
      end = isDisposition(value) ? this.endOf(run, value, undefined) : this.endOf(run, undefined, new InvalidDispositionError(value));
    } catch (error) {
      end = this.endOf(run, undefined, error);
    } finally {
      if (timer !== undefined) clock.clearTimeout(timer);
      const extending = keepAlive?.stop();
      if (extending) await extending;
      this.flights.delete(run);
    }
    const decision = decide({ kind: 'handler_end', guarded, attempt: run.attempt!, end }, this.rules);
    if (decision.kind === 'settle') return await applySettlement(this.applyContext, run, decision);
    const commit = await this.commit(run, decision.result);
    return await applySettlement(this.applyContext, run, decide({ kind: 'commit_ended', attempt: run.attempt!, commit, transactional: run.receipt!.transaction !== undefined }, this.rules));
  }

  /** How the handler ended: an ack wins; then an abort (shutdown, lost lease, timeout); then what it returned or threw. */
  private endOf(run: DeliveryRun, value: Disposition | undefined, error: unknown): HandlerEnd {
    if (value?.type === 'ack') return value.result === undefined ? ACK_END : { kind: 'ack', result: value.result };
    const abortReason = run.reason;
    if (abortReason instanceof ShutdownError) return { kind: 'aborted', cause: 'shutdown', error: abortReason };
    if (run.lost) return { kind: 'aborted', cause: 'lease_lost', error: run.lost };
    if (value) return value.type === 'reject' ? { kind: 'reject', reason: value.reason } : { kind: 'requeue', delayMs: value.delayMs };
    if (error instanceof TimeoutError && error === abortReason) return { kind: 'aborted', cause: 'timeout', error };
    // `throw undefined` (or null) must not read as a requeue request: give it an error object.
    const thrown = error ?? new RetryableError(`the handler threw ${String(error)} (no error object)`);
    return { kind: 'threw', error: thrown, permanent: this.hooks.isPermanent(thrown) };
  }

  /**
   * Commits after an ack (never throws; see commitWithin). Without a transaction the effect is
   * done once the commit is issued: the handler slot is freed and the source may move on
   * (submit's `handled`). Such a commit goes through the batcher when there is one (one
   * commitMany call per event-loop turn; the outcome stays this delivery's own). A receipt
   * carrying the handler's transaction commits the effect with the claim, alone: the delivery
   * counts as handled only once that commit succeeded (see Receipt.transaction).
   */
  private commit(run: DeliveryRun, value: JsonValue | undefined): Promise<CommitOutcome> {
    const receipt = run.receipt!;
    const deadlineMs = this.options.commitDeadlineMs;
    const batch = receipt.transaction === undefined ? this.batcher?.commit : undefined;
    // No closure on the per-message path unless an observer wraps the step (as for claim, handle, settle).
    const committing = run.trace.wrapsSteps
      ? run.trace.step('commit', () => commitWithin(receipt, value, deadlineMs, this.logger, batch))
      : commitWithin(receipt, value, deadlineMs, this.logger, batch);
    if (receipt.transaction === undefined) {
      this.markHandled(run, true);
      return committing;
    }
    // A failed one is logged with the delivery's result (FailureLog: transaction_rolled_back).
    return committing.then((commit) => {
      if (commit.outcome === 'committed') this.markHandled(run, false);
      return commit;
    });
  }

  /**
   * The handler's effect is done and the delivery ends in an ack: free its slot, tell the source
   * (`onHandled`, the `handled` moment of DeliverySink.submit), and (`signal`: no transaction)
   * the settler's deprecated `handled` hook.
   */
  private markHandled(run: DeliveryRun, signal: boolean): void {
    run.releasePermit();
    run.handled = true;
    const onHandled = run.onHandled;
    if (onHandled !== undefined) {
      run.onHandled = undefined;
      onHandled();
    }
    const settler = run.delivery.settler;
    if (!signal || !settler.handled) return;
    try {
      settler.handled();
    } catch (error) {
      this.logger.warn({ err: error, key: run.key }, "the settler's handled hook threw; ignored");
    }
  }

  /**
   * Runs `handle()` and always returns a promise: a synchronous return value is wrapped, and a
   * synchronous throw becomes a rejection (so both are judged like an `async` handler's).
   */
  private callHandle(message: Message<TBody>, context: HandlerContext<TTransaction>): Promise<Disposition> {
    try {
      return Promise.resolve(this.hooks.handle(message, context));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  private decode(delivery: Delivery): TBody {
    try {
      return this.hooks.decode(delivery.body, delivery);
    } catch (error) {
      if (error instanceof InvalidMessageError) throw error;
      throw new InvalidMessageError('invalid_body', `body could not be decoded: ${truncateErrorMessage(error, 200)}`, { cause: error });
    }
  }

  private deriveKey(delivery: Delivery): string {
    const raw = this.hooks.messageKey(delivery);
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
}
