/**
 * The per-delivery pipeline: validate → derive key → claim → handle → commit, asking the
 * settlement table (settlement-table.ts) at each fork and carrying its answer out
 * (apply-decision.ts). ConsumerBase owns the lifecycle and hands each delivery here.
 */
import { setMaxListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import type { ClaimResult, JsonValue } from '../claim/claimer';
import { ClaimStep } from './claim-step';
import { CommitBatcher } from '../claim/commit-batcher';
import type { ResolvedConsumerOptions } from '../config/consumer-options';
import type { Delivery, Message } from '../ports/delivery';
import { DeliveryRun, type RunHost } from './delivery-run';
import { InvalidMessageError, ShutdownError, TimeoutError, TransactionUnavailableError } from '../util/errors';
import { FailureLog } from './failure-log';
import { LazyContext } from './handler-signal';
import { LeaseKeeper } from '../claim/keep-alive';
import { namespaceKey } from '../claim/keys';
import { DeliveryCounter, type DeliveryCounts } from './delivery-counts';
import { commitAfterAck, type CommitContext } from './commit-step';
import { LogLimiter } from '../util/log-limiter';
import { callHandle, decodeBody, deriveKey, type PipelineHooks } from './message-intake';
import type { Logger } from '../util/logger';
import { type DeliveryResult, INERT_TRACE, ObservationFanout } from '../ports/observer';
import { applySettlement, type ApplyContext, reportEvents } from './apply-decision';
import { backoffDelay } from '../util/retry';
import type { Semaphore } from '../util/semaphore';
import { releaseWithin } from '../claim/settlement';
import {
  attemptOf,
  claimFailure,
  decide,
  handlerEnd,
  type HandlerEnd,
  type SettlementEvent,
  type SettlementRules,
} from './settlement-table';
import type { PreparedClaim } from '../ports/source';

/** The release of a claim made ahead whose handler never ran: its attempt does not count. */
const UNCOUNTED = Object.freeze({ uncountAttempt: true });

export class DeliveryPipeline<TBody, TTransaction> {
  private readonly logger: Logger;
  private readonly observation: ObservationFanout;
  /** Rate-limited failure lines and dead-letter counts (see failure-log.ts). */
  private readonly logLimiter: LogLimiter;
  private readonly failures: FailureLog;
  private readonly counter: DeliveryCounter;
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
  private readonly commitContext: CommitContext;
  /** The consumer's `isPermanent` hook, bound once (handlerEnd calls it for a thrown error). */
  private readonly isPermanent = (error: unknown): boolean => this.hooks.isPermanent(error);

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
    this.counter = new DeliveryCounter();
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
    // Commits without a transaction are gathered into commitMany calls (options.batchCommits).
    const batcher = options.batchCommits && typeof claimer.commitMany === 'function' ? new CommitBatcher(claimer as Required<Pick<typeof claimer, 'commitMany'>>) : undefined;
    this.commitContext = { commitDeadlineMs: options.commitDeadlineMs, logger, batcher };
  }

  /** Dead-letters issued since construction, by reason. */
  deadLetters(): Record<string, number> {
    return this.failures.deadLetters();
  }

  /** Commits, duplicates skipped, busy requeues and retries since construction (a copy). */
  counts(): DeliveryCounts {
    return this.counter.snapshot();
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
    return this.claims.claimBatch(deliveries, (delivery) => deriveKey(this.hooks, this.keyPrefix, delivery));
  }

  /**
   * Runs one delivery (its concurrency permit already taken) to its settlement. Never rejects.
   * The permit is given back once the handler is done (or when the delivery ends). `onHandled`
   * is called exactly once: with `true` when the delivery is bound to end in an ack (see
   * markHandled), else with `false` as the delivery ends, before the returned promise resolves.
   */
  async run(delivery: Delivery, preclaimed: PreparedClaim | undefined, onHandled?: (early: boolean) => void): Promise<DeliveryResult> {
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
      // A bug in the pipeline or a subclass hook: the table decides (ack or requeue); the log says which.
      const decision = decide({ kind: 'unexpected', error, handled: run.handled }, this.rules);
      this.logger.error(
        { err: error, consumer: this.options.name },
        decision.broker.kind === 'ack'
          ? 'unexpected pipeline error after the handler acked; acking the delivery (the commit may not have landed)'
          : 'unexpected pipeline error; requeueing the delivery',
      );
      result = await applySettlement(this.applyContext, run, decision);
    }
    const notHandled = run.onHandled;
    if (notHandled !== undefined) {
      run.onHandled = undefined;
      notHandled(false);
    }
    (result as { durationMs: number }).durationMs = performance.now() - started;
    trace.end(result);
    this.failures.record(result, delivery);
    this.counter.record(result);
    run.releasePermit();
    this.ended();
    return result;
  }

  private settle(run: DeliveryRun, event: SettlementEvent & { readonly kind: 'stopping' | 'invalid' | 'key_conflict' | 'done' | 'busy' | 'commit_ended' | 'unexpected' }): Promise<DeliveryResult> {
    return applySettlement(this.applyContext, run, decide(event, this.rules));
  }

  /**
   * Intake, claim, then the claim's state. Not an async function: a claim made ahead (claimBatch)
   * goes on to the handler without an await of its own; only a claim still to make is awaited
   * (claimThenSettle). A synchronous throw is a bug, handled by `run` like a rejection.
   */
  private steps(run: DeliveryRun, preclaimed: PreparedClaim | undefined): Promise<DeliveryResult> {
    const delivery = run.delivery;
    if (this.stopping) return this.refuse(run, preclaimed, { kind: 'stopping', during: 'intake' });
    let message: Message<TBody>;
    try {
      const key = preclaimed && preclaimed.kind !== 'skipped' ? preclaimed.key : deriveKey(this.hooks, this.keyPrefix, delivery);
      run.key = key;
      message = { key, body: decodeBody(this.hooks, delivery), raw: delivery.body, headers: delivery.headers, messageId: delivery.messageId, metadata: delivery.metadata };
    } catch (error) {
      return this.refuse(run, preclaimed, { kind: 'invalid', reason: error instanceof InvalidMessageError ? error.reason : 'invalid_body', error });
    }
    // Without an observer wrapping the step, a claim prepared by claimBatch is taken as it is.
    if (!run.trace.wrapsSteps && preclaimed?.kind === 'claimed') return this.claimed(run, message, preclaimed.result);
    return this.claimThenSettle(run, message, preclaimed);
  }

  /** Gives back a claim made ahead (its handler will not run), then settles `event`. */
  private async refuse(run: DeliveryRun, preclaimed: PreparedClaim | undefined, event: SettlementEvent & { readonly kind: 'stopping' | 'invalid' }): Promise<DeliveryResult> {
    await this.releasePreclaimed(preclaimed);
    return this.settle(run, event);
  }

  /** Claims (the claimer's own promise awaited; the retries start only if it failed), then goes on by the claim's state. */
  private async claimThenSettle(run: DeliveryRun, message: Message<TBody>, preclaimed: PreparedClaim | undefined): Promise<DeliveryResult> {
    let claim: ClaimResult;
    try {
      if (run.trace.wrapsSteps) claim = await run.trace.step('claim', () => this.claim(message, preclaimed));
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
    return await this.claimed(run, message, claim);
  }

  /** Goes on by the claim's state: acquired → the handler (or retry_exhausted), done → duplicate, busy → requeue. */
  private claimed(run: DeliveryRun, message: Message<TBody>, claim: ClaimResult): Promise<DeliveryResult> {
    run.claimState = claim.state;
    if (claim.state === 'acquired') {
      run.receipt = claim.receipt;
      run.attempt = attemptOf(claim.attempt, run.delivery.metadata.priorAttempts);
      run.fencingToken = claim.receipt.fencingToken;
      const decision = decide({ kind: 'acquired', attempt: run.attempt }, this.rules);
      if (decision.kind === 'settle') return applySettlement(this.applyContext, run, decision);
      reportEvents(run, decision.events, undefined);
      return this.handleAndSettle(run, message, true);
    }
    if (claim.state === 'done') return this.duplicate(run, message, claim.result);
    return this.settle(run, { kind: 'busy' });
  }

  /** A done key: the onDuplicate hook (its failure logged, never fatal), then an ack as a duplicate. */
  private async duplicate(run: DeliveryRun, message: Message<TBody>, result: JsonValue | undefined): Promise<DeliveryResult> {
    const decision = decide({ kind: 'done' }, this.rules);
    reportEvents(run, decision.events, undefined);
    try {
      await this.hooks.onDuplicate(message, result);
    } catch (error) {
      this.logger.warn({ err: error, key: message.key }, 'onDuplicate hook threw; the duplicate is acked anyway');
    }
    return applySettlement(this.applyContext, run, decision, false);
  }

  private claim(message: Message<TBody>, preclaimed: PreparedClaim | undefined): Promise<ClaimResult> {
    if (preclaimed?.kind === 'claimed') return Promise.resolve(preclaimed.result);
    return this.claims.claim(message.key, message, this.hooks.fingerprint(message), preclaimed);
  }

  /** Gives back a lease taken ahead by claimBatch for a delivery that will not be handled. */
  private async releasePreclaimed(preclaimed: PreparedClaim | undefined): Promise<void> {
    if (preclaimed?.kind === 'claimed' && preclaimed.result.state === 'acquired') {
      // Its handler never ran: the attempt the claim counted is taken off again.
      await releaseWithin(preclaimed.result.receipt, this.options.releaseDeadlineMs, this.logger, UNCOUNTED);
    }
  }

  private async claimFailed(run: DeliveryRun, message: Message<TBody>, error: unknown): Promise<DeliveryResult> {
    const decision = decide(claimFailure(error, this.options.failOpen), this.rules);
    if (decision.kind === 'settle') return applySettlement(this.applyContext, run, decision);
    // Fail-open: no claim, no commit; the same table decides how the handler's end settles.
    run.attempt = attemptOf(undefined, run.delivery.metadata.priorAttempts);
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
      const handling = run.trace.wrapsSteps ? run.trace.step('handle', () => callHandle(this.hooks, message, context)) : callHandle(this.hooks, message, context);
      end = handlerEnd(true, await run.race(handling), run.reason, run.lost, this.isPermanent);
    } catch (error) {
      // A handler that read an absent ctx.transaction and then threw: name the fix, not the TypeError.
      const failure = context.readAbsentTransaction && error instanceof TypeError && /undefined/.test(error.message) ? new TransactionUnavailableError({ cause: error }) : error;
      end = handlerEnd(false, failure, run.reason, run.lost, this.isPermanent);
    } finally {
      if (timer !== undefined) clock.clearTimeout(timer);
      const extending = keepAlive?.stop();
      if (extending) await extending;
      this.flights.delete(run);
    }
    const decision = decide({ kind: 'handler_end', guarded, attempt: run.attempt!, end }, this.rules);
    if (decision.kind === 'settle') return await applySettlement(this.applyContext, run, decision);
    const commit = await commitAfterAck(this.commitContext, run, decision.result);
    return await applySettlement(this.applyContext, run, decide({ kind: 'commit_ended', attempt: run.attempt!, commit, transactional: run.receipt!.transaction !== undefined }, this.rules));
  }
}
