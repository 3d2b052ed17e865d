/**
 * The RabbitMQ {@link MessageSource}: consumes one work queue over amqp-connection-manager and
 * hands each delivery, with its {@link DeliverySettler}, to the consumer pipeline.
 *
 * This file is the façade: lifecycle (start, stopIntake, close, destroy) and the public surface.
 * The jobs live beside it: connections.ts (the consuming and republishing connections, backoff),
 * subscription.ts (channels, `basic.consume`, deliveries, broker cancels), reporting.ts
 * (counters, events, settlement log lines), settler.ts (one delivery's settlement).
 */
import type { Options } from 'amqplib';
import { type Claimer, ConfigurationError, consoleWarnLogger, type Logger, type MessageSource, ShutdownError, TimeoutError } from '../../src';
import { type AdapterSurface, type DeliverySink, withDeadline } from '../../src/adapter-kit';
import { ConfirmPublisher } from './confirm-publisher';
import { SourceConnections } from './connections';
import { BrokerUnavailableError } from './errors';
import type { RabbitMqSourceEvent, RabbitMqSourceEventName, RabbitMqSourceListener, RabbitMqSourceStats } from './events';
import { type RabbitMqSourceState, SourceLifecycle } from './lifecycle';
import { type RabbitMqSourceOptions, type ResolvedSourceOptions, resolveSourceOptions } from './options';
import { SourceReporter } from './reporting';
import type { SettlementContext } from './settler';
import { Subscription } from './subscription';
import { applyTopology, planTopology, type TopologyPlan } from './topology';
import { checkPeerVersion } from '../../src/adapter-kit';
import { SUPPORTED_RANGE } from './peer';

export type { RabbitMqSourceState } from './lifecycle';

/**
 * Consumes a RabbitMQ queue for a {@link twophase!ConsumerBase}.
 *
 * ```ts
 * const source = new RabbitMqSource({ url: 'amqp://guest:guest@127.0.0.1:5672', queue: 'payments' });
 * const consumer = new PaymentsConsumer({ name: 'payments', claimer, source, concurrency: 100 });
 * await consumer.start(); // declares the topology, subscribes with prefetch 100
 * ```
 *
 * - Reconnects and resubscribes through amqp-connection-manager (setup functions re-run on every
 *   new channel); a channel the broker closed alone (ack timeout, 404, 406) is replaced too.
 * - Prefetch (`basic.qos`, per consumer) equals the consumer's `concurrency`.
 * - Settles per the core table, each delivery at most once and only on its own channel; see
 *   `DeliverySettler` (settler.ts) and docs/rabbitmq.md.
 * - A broker cancel (queue deleted) emits `cancelled`, reports not consuming, lets in-flight
 *   deliveries finish, then resubscribes (re-declaring the queue in `declare` mode, waiting for
 *   it in `check` mode) or, with `onCancel: 'stop'`, stops with a {@link ConsumerCancelledError}.
 * - Operations surface, as every adapter: `settings`, `stats`, `on(listener)`.
 */
export class RabbitMqSource implements MessageSource, AdapterSurface<ResolvedSourceOptions, RabbitMqSourceStats, RabbitMqSourceEvent> {
  /** Messaging system name, as in OpenTelemetry `messaging.system`. */
  readonly system = 'rabbitmq';

  /** The queue consumed. */
  get destinationName(): string {
    return this.options.queue;
  }
  private readonly options: ResolvedSourceOptions;
  private readonly logger: Logger;
  private readonly plan: TopologyPlan;
  private readonly lifecycle = new SourceLifecycle();
  private readonly reporter: SourceReporter;
  private readonly connections: SourceConnections;
  private readonly subscription: Subscription;
  private readonly settlement: SettlementContext;
  private readonly pauses = new Set<() => void>();
  private publisher: ConfirmPublisher | undefined;
  /** Ends start()'s current wait with ShutdownError when close() comes first. */
  private abortStart: ((error: Error) => void) | undefined;
  private shuttingDown: Promise<void> | undefined;

  /** @throws ConfigurationError for any invalid option (see {@link RabbitMqSourceOptions}) */
  constructor(options: RabbitMqSourceOptions) {
    this.options = resolveSourceOptions(options);
    this.logger = this.options.logger ?? consoleWarnLogger;
    checkPeerVersion('amqplib', SUPPORTED_RANGE, this.logger);
    this.plan = planTopology(this.options);
    const o = this.options;
    this.reporter = new SourceReporter(o.queue, this.logger, () => this.lifecycle.closing);
    this.settlement = {
      queue: o.queue,
      queueType: o.queueType,
      deadLetterExchange: o.deadLetterExchange,
      deadLetterRoutingKey: o.deadLetterRoutingKey,
      delayTiersMs: o.delayTiersMs,
      failedPublishRequeueDelayMs: o.failedPublishRequeueDelayMs,
      publish: (exchange, routingKey, content, publishOptions) => this.republish(exchange, routingKey, content, publishOptions),
      pause: (ms) => this.pause(ms),
      now: () => Date.now(),
      ...this.reporter.settlementReports(o.failedPublishRequeueDelayMs),
    };
    this.connections = new SourceConnections(o, this.lifecycle, this.reporter, this.logger);
    this.subscription = new Subscription(o, {
      lifecycle: this.lifecycle,
      reporter: this.reporter,
      logger: this.logger,
      settlement: this.settlement,
      plan: this.plan,
      topologyChannel: () => this.connections.topologyChannel(),
    });
  }

  /** The options in force, defaults applied. */
  get settings(): ResolvedSourceOptions {
    return this.options;
  }

  /** True with `batchClaims`: deliveries of one claim window (`batchWindowMs`) are claimed together, ahead of dispatch. */
  get claimsAhead(): boolean {
    return this.options.batchClaims;
  }

  /** False: the deliveries of a claim window are not run one after the other (see {@link RabbitMqSource.dispatchesBatchesTogether}). */
  readonly adoptsSharedTransactions = false;

  /**
   * True: the deliveries of one claim window are dispatched together (a window never holds more
   * than the prefetch), so with a claimer that shares one transaction per batch claim
   * (PostgresClaimer `transactionBatch: 'per-chunk'`) each delivery's commit waits for the
   * window's COMMIT, then each is acked.
   */
  readonly dispatchesBatchesTogether = true;

  /**
   * Fits the claim window to the consumer's claimer (called by the consumer at construction): with
   * a claimer that shares one transaction per batch claim, a redelivered message is claimed on its
   * own, not in a window, so deliveries whose window rolled back run again one by one.
   */
  fitClaimer(claimer: Claimer): void {
    this.subscription.claimRedeliveriesAlone = claimer.sharesTransactions === true;
  }

  /**
   * The options in force, defaults applied.
   * @deprecated use {@link RabbitMqSource.settings}, the name every adapter uses
   */
  get config(): ResolvedSourceOptions {
    return this.options;
  }

  /** A snapshot of the counters since construction (a fresh copy on every read). */
  get stats(): RabbitMqSourceStats {
    return this.reporter.snapshot(this.subscription.generations);
  }

  /** The topology this source declares or checks. */
  get topology(): TopologyPlan {
    return this.plan;
  }

  /** Current lifecycle state. */
  get state(): RabbitMqSourceState {
    return this.lifecycle.state;
  }

  /** Why the source failed, when `state` is `failed`. */
  get error(): Error | undefined {
    return this.lifecycle.failure;
  }

  /**
   * Connects, declares or checks the topology, opens the publisher and consuming channels, and
   * subscribes with prefetch = `concurrency`. Resolves once the first `basic.consume` succeeded.
   * Called by `ConsumerBase.start()`.
   * @param options.concurrency prefetch count, 1 … 65 535 (AMQP `prefetch-count` is a short)
   * @throws ConfigurationError for an invalid topology (missing entity in `check` mode, a queue
   *   with other arguments, in particular without a dead-letter exchange), or when called twice
   * @throws BrokerUnavailableError when no connection opens within `connectTimeoutMs`
   * @throws ShutdownError when `close()` was called before it finished (everything it opened is closed)
   */
  async start(sink: DeliverySink, options: { readonly concurrency: number }): Promise<void> {
    const lifecycle = this.lifecycle;
    if (lifecycle.state !== 'created') throw new ConfigurationError(`start() called on a RabbitMQ source that is ${lifecycle.state}`);
    const concurrency = options?.concurrency;
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 65_535) {
      throw new ConfigurationError(`concurrency (the prefetch count) must be an integer in [1, 65535], got ${String(concurrency)}`);
    }
    lifecycle.state = 'starting';
    const o = this.options;
    // close() during start() ends every wait below at once (ShutdownError), so a stop during a
    // slow connect or subscribe neither waits for it nor leaves a timer behind.
    const closed = new Promise<never>((_, reject) => {
      this.abortStart = reject;
    });
    closed.catch(() => undefined);
    const untilClosed = <T>(step: Promise<T>): Promise<T> => Promise.race([step, closed]);
    try {
      await this.connections.open(untilClosed);
      await untilClosed(applyTopology(() => this.connections.topologyChannel(), this.plan));
      this.publisher = new ConfirmPublisher(this.connections.publish!, { name: `${o.connectionName}:publish`, timeoutMs: o.publishTimeoutMs, recoveryDelayMs: o.reconnectDelayMs, logger: this.logger });
      await untilClosed(this.publisher.start(o.connectTimeoutMs)).catch((error: unknown) => {
        if (error instanceof ShutdownError) throw error;
        throw new BrokerUnavailableError('the publisher channel did not open', { cause: error });
      });
      const subscribed = this.subscription.start(this.connections.consume!, sink, concurrency);
      await withDeadline(untilClosed(subscribed), o.connectTimeoutMs, `subscribing to queue "${o.queue}"`).catch((error: unknown) => {
        if (error instanceof TimeoutError) throw new BrokerUnavailableError(`could not subscribe to queue "${o.queue}" within ${o.connectTimeoutMs} ms`, { cause: error });
        throw error;
      });
      if (lifecycle.state === 'starting') lifecycle.state = 'consuming';
    } catch (error) {
      this.subscription.abandonStart();
      if (error instanceof ShutdownError) lifecycle.state = 'closed';
      else lifecycle.fail(error as Error);
      await this.shutdown();
      throw error;
    } finally {
      this.abortStart = undefined;
    }
  }

  /**
   * Stops intake: cancels the consumer (`basic.cancel`) and never resubscribes. Channels stay
   * open so in-flight deliveries can still settle. Safe to repeat.
   */
  async stopIntake(): Promise<void> {
    const lifecycle = this.lifecycle;
    if (lifecycle.intakeStopped) return;
    lifecycle.intakeStopped = true;
    if (lifecycle.state !== 'failed' && lifecycle.state !== 'closed') lifecycle.state = 'stopping';
    await this.subscription.stopIntake();
  }

  /**
   * Closes the channels and the connection gracefully. Unsettled deliveries return to the queue
   * (the broker requeues unacknowledged messages of a closed channel). Safe to repeat.
   */
  async close(): Promise<void> {
    this.lifecycle.intakeStopped = true;
    this.abortStart?.(new ShutdownError('the RabbitMQ source was closed while starting'));
    await this.shutdown();
    this.lifecycle.closed();
  }

  /**
   * Simulates a crash of this consumer's process for demos and tests: destroys the TCP sockets
   * of both connections at once, without settling anything and without a graceful AMQP close. The broker then requeues
   * every unacknowledged delivery of the connection and redelivers it (with `redelivered` set)
   * to another consumer. Later settles of this source's deliveries are skipped as stale, and
   * the source never reconnects. Handlers already running in this process go on running; abort
   * or ignore them to complete the simulation. Safe to repeat.
   */
  async destroy(): Promise<void> {
    this.lifecycle.intakeStopped = true;
    this.lifecycle.closing = true;
    this.subscription.markClosed();
    await this.connections.destroy();
    await this.shutdown();
    this.lifecycle.closed();
  }

  /** True while subscribed on an open channel (for readiness probes). */
  isConsuming(): boolean {
    return this.lifecycle.state === 'consuming' && this.subscription.isSubscribed();
  }

  /**
   * Adds a listener of every source event (`{ type, …payload }`, see {@link RabbitMqSourceEvents});
   * returns a function removing it. A throwing listener is logged and ignored.
   */
  on(listener: (event: RabbitMqSourceEvent) => void): () => void;
  /**
   * Adds a listener of one named event; it gets the event (the payload, with `type`).
   * @deprecated use `on(listener)` and switch on `event.type`, the form every adapter uses
   */
  on<E extends RabbitMqSourceEventName>(event: E, listener: RabbitMqSourceListener<E>): this;
  on<E extends RabbitMqSourceEventName>(eventOrListener: E | ((event: RabbitMqSourceEvent) => void), listener?: RabbitMqSourceListener<E>): this | (() => void) {
    if (typeof eventOrListener === 'function') return this.reporter.on(eventOrListener);
    if (typeof listener !== 'function') throw new ConfigurationError(`on("${String(eventOrListener)}", listener): the listener must be a function`);
    this.reporter.onNamed(eventOrListener, listener);
    return this;
  }

  /**
   * Removes a listener added with `on(event, listener)`.
   * @deprecated call the function `on(listener)` returned
   */
  off<E extends RabbitMqSourceEventName>(event: E, listener: RabbitMqSourceListener<E>): this {
    this.reporter.offNamed(event, listener);
    return this;
  }

  private async republish(exchange: string, routingKey: string, content: Buffer, options: Options.Publish): Promise<void> {
    if (!this.publisher) throw new BrokerUnavailableError('the source is not started');
    await this.publisher.publish(exchange, routingKey, content, options);
  }

  /** Resolves after `ms`, or at once when the source closes. */
  private pause(ms: number): Promise<void> {
    if (ms <= 0 || this.lifecycle.closing) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.pauses.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.pauses.add(wake);
    });
  }

  /** Closes channels and connections once; concurrent callers (close() during start()) share it. */
  private shutdown(): Promise<void> {
    this.shuttingDown ??= this.shutdownNow();
    return this.shuttingDown;
  }

  private async shutdownNow(): Promise<void> {
    this.lifecycle.closing = true;
    for (const wake of [...this.pauses]) wake();
    await this.subscription.close();
    await this.publisher?.close();
    await this.connections.close();
  }
}
