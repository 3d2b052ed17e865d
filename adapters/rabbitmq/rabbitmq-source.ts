/**
 * The RabbitMQ {@link MessageSource}: consumes one work queue over amqp-connection-manager and
 * hands each delivery, with its {@link DeliverySettler}, to the consumer pipeline.
 */
import type { Channel, ChannelModel, ConsumeMessage, Options } from 'amqplib';
import { type AmqpConnectionManager, connect } from 'amqp-connection-manager';
import {
  ConfigurationError,
  consoleWarnLogger,
  type Delivery,
  type Logger,
  type MessageSource,
  type RequeueCause,
  ShutdownError,
  TimeoutError,
} from '../../src';
import { type DeliverySink, type PreparedClaim, withDeadline } from '../../src/adapter-kit';
import { ChannelGeneration } from './channel-generation';
import { SupervisedChannel } from './channel-supervisor';
import { ConfirmPublisher } from './confirm-publisher';
import { BrokerConnectionError, connectFailureReason, isPermanentConnectFailure } from './connection-error';
import { BrokerUnavailableError, ConsumerCancelledError, type StaleDeliveryError } from './errors';
import type { RabbitMqSourceEventName, RabbitMqSourceEvents, RabbitMqSourceListener, RabbitMqSourceStats } from './events';
import { DELIVERY_COUNT_HEADER, HEADERS, priorAttempts, readCount } from './headers';
import { type RabbitMqSourceOptions, type ResolvedSourceOptions, resolveSourceOptions } from './options';
import { DeliverySettler, type SettleAction, type SettlementContext } from './settler';
import { applyTopology, planTopology, type TopologyPlan } from './topology';

/**
 * Lifecycle of a source: `created` → `starting` → `consuming` ⇄ `recovering` (connection or
 * channel lost) / `cancelled` (broker cancel, waiting to resubscribe) → `stopping` (intake
 * stopped, settling) → `closed`; `failed` after a failed start or a broker cancel with
 * `onCancel: 'stop'`.
 */
export type RabbitMqSourceState = 'created' | 'starting' | 'consuming' | 'recovering' | 'cancelled' | 'stopping' | 'closed' | 'failed';

type MutableStats = { -readonly [K in keyof RabbitMqSourceStats]: RabbitMqSourceStats[K] } & { requeues: Record<RequeueCause, number> };

/**
 * Consumes a RabbitMQ queue for a {@link ConsumerBase}.
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
 *   {@link DeliverySettler} and docs/rabbitmq.md.
 * - A broker cancel (queue deleted) emits `cancelled`, reports not consuming, lets in-flight
 *   deliveries finish, then resubscribes (re-declaring the queue in `declare` mode, waiting for
 *   it in `check` mode) or, with `onCancel: 'stop'`, stops with a {@link ConsumerCancelledError}.
 */
export class RabbitMqSource implements MessageSource {
  /** Messaging system name, as in OpenTelemetry `messaging.system`. */
  readonly system = 'rabbitmq';
  private readonly options: ResolvedSourceOptions;
  private readonly logger: Logger;
  private readonly plan: TopologyPlan;
  private readonly listeners = new Map<RabbitMqSourceEventName, Set<(payload: never) => void>>();
  private readonly settlement: SettlementContext;
  private readonly pauses = new Set<() => void>();
  private stateValue: RabbitMqSourceState = 'created';
  private sink: DeliverySink | undefined;
  private prefetch = 0;
  private manager: AmqpConnectionManager | undefined;
  private publishManager: AmqpConnectionManager | undefined;
  private publisher: ConfirmPublisher | undefined;
  private consumeChannel: SupervisedChannel | undefined;
  private current: ChannelGeneration | undefined;
  private generationCounter = 0;
  private connects = 0;
  private topologyFresh = false;
  private intakeStopped = false;
  private closing = false;
  /** Ends start()'s current wait with ShutdownError when close() comes first. */
  private abortStart: ((error: Error) => void) | undefined;
  private shuttingDown: Promise<void> | undefined;
  private failure: Error | undefined;
  private resubscribeTimer: NodeJS.Timeout | undefined;
  /** Failed connect attempts in a row, per connection role (reset on connect); drives the backoff. */
  private readonly connectFailures = { consume: 0, publish: 0 };
  /** The newest connect error and the URL it came from, for the error start() ends with. */
  private lastConnectFailure: { error: Error; url: string } | undefined;
  /** Rejects start()'s connect wait at once on a failure retrying cannot fix (credentials, vhost). */
  private failConnect: ((error: Error) => void) | undefined;
  private firstSubscription: { resolve: () => void; reject: (error: Error) => void } | undefined;
  private batch: { delivery: Delivery; settler: DeliverySettler }[] = [];
  private batchScheduled = false;
  private readonly counters: MutableStats = {
    generation: 0,
    deliveries: 0,
    acks: 0,
    requeues: { busy: 0, retry: 0, claimer_unavailable: 0, shutdown: 0, lease_lost: 0 },
    rejects: 0,
    staleSettlesSkipped: 0,
    repeatedSettlesIgnored: 0,
    publishFailures: 0,
    fallbackNacks: 0,
    strippedDeadLetters: 0,
    channelsClosed: 0,
    reconnects: 0,
    cancels: 0,
    subscriptions: 0,
  };

  /** @throws ConfigurationError for any invalid option (see {@link RabbitMqSourceOptions}) */
  constructor(options: RabbitMqSourceOptions) {
    this.options = resolveSourceOptions(options);
    this.logger = this.options.logger ?? consoleWarnLogger;
    this.plan = planTopology(this.options);
    const o = this.options;
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
      onSettled: (action, cause) => this.onSettled(action, cause),
      onStale: (error, message) => this.onStale(error, message),
      onRepeated: (action, first, message, generation) => {
        this.counters.repeatedSettlesIgnored++;
        this.logger.warn({ queue: o.queue, action, first, deliveryTag: message.fields.deliveryTag, generation }, 'second settle of a delivery ignored: only the first reaches the broker');
        this.emit('repeated_settle', { generation, action, first, deliveryTag: message.fields.deliveryTag });
      },
      onPublishFailed: (action, error, message, generation) => {
        this.counters.publishFailures++;
        this.logger.error(
          { err: error, queue: o.queue, action, deliveryTag: message.fields.deliveryTag, generation, pauseMs: o.failedPublishRequeueDelayMs },
          `the ${action === 'requeue' ? 'delay' : 'dead-letter'} publish failed; returning the message to the queue after a pause`,
        );
        this.emit('publish_failed', { generation, action, error, deliveryTag: message.fields.deliveryTag });
      },
      onStripped: (error, message, generation) => {
        this.counters.strippedDeadLetters++;
        this.logger.error(
          { err: error, queue: o.queue, deliveryTag: message.fields.deliveryTag, generation },
          'the dead-letter copy could not be encoded; dead-lettered with the twophase headers only (the others are named in twophase-headers-dropped)',
        );
        this.emit('dead_letter_stripped', { generation, error, deliveryTag: message.fields.deliveryTag });
      },
      onFallbackNack: () => {
        this.counters.fallbackNacks++;
      },
    };
  }

  /** The resolved options (defaults applied). */
  get config(): ResolvedSourceOptions {
    return this.options;
  }

  /** The topology this source declares or checks. */
  get topology(): TopologyPlan {
    return this.plan;
  }

  /** Current lifecycle state. */
  get state(): RabbitMqSourceState {
    return this.stateValue;
  }

  /** Why the source failed, when `state` is `failed`. */
  get error(): Error | undefined {
    return this.failure;
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
    if (this.stateValue !== 'created') throw new ConfigurationError(`start() called on a RabbitMQ source that is ${this.stateValue}`);
    const concurrency = options?.concurrency;
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 65_535) {
      throw new ConfigurationError(`concurrency (the prefetch count) must be an integer in [1, 65535], got ${String(concurrency)}`);
    }
    this.stateValue = 'starting';
    this.sink = sink;
    this.prefetch = concurrency;
    const o = this.options;
    const manager = this.connectionManager(o.connectionName);
    this.manager = manager;
    this.watchConnection(manager, 'consume');
    // Republishes (requeue, dead-letter) use their own connection: under a resource alarm the
    // broker blocks connections that publish, and a shared one would stop the acks as well
    // ("Connections" docs and "Blocked Connection Notifications": use separate connections for
    // publishing and consuming).
    const publishManager = this.connectionManager(`${o.connectionName}:publish`);
    this.publishManager = publishManager;
    this.watchConnection(publishManager, 'publish');
    // close() during start() ends every wait below at once (ShutdownError), so a stop during a
    // slow connect or subscribe neither waits for it nor leaves a timer behind.
    const closed = new Promise<never>((_, reject) => {
      this.abortStart = reject;
    });
    closed.catch(() => undefined);
    const untilClosed = <T>(step: Promise<T>): Promise<T> => Promise.race([step, closed]);
    const permanent = new Promise<never>((_, reject) => {
      this.failConnect = reject;
    });
    permanent.catch(() => undefined);
    const connectStarted = Date.now();
    try {
      try {
        // Not amqp-connection-manager's own connect timeout: close() would not cancel its timer.
        await withDeadline(untilClosed(Promise.race([Promise.all([manager.connect(), publishManager.connect()]), permanent])), o.connectTimeoutMs, 'connecting to RabbitMQ');
      } catch (error) {
        if (error instanceof ShutdownError) throw error;
        const last = this.lastConnectFailure;
        const attempts = Math.max(this.connectFailures.consume, this.connectFailures.publish);
        if (last) throw new BrokerConnectionError(last.url, last.error, { attempts, elapsedMs: Date.now() - connectStarted });
        if (error instanceof TimeoutError) throw new BrokerUnavailableError(`could not connect to RabbitMQ at ${redact(o.urls[0])} within ${o.connectTimeoutMs} ms`, { cause: error });
        throw new BrokerConnectionError(o.urls[0]!, error, { attempts: Math.max(1, attempts), elapsedMs: Date.now() - connectStarted });
      } finally {
        this.failConnect = undefined;
      }
      await untilClosed(applyTopology(() => this.openTopologyChannel(), this.plan));
      this.topologyFresh = true;
      this.publisher = new ConfirmPublisher(publishManager, { name: `${o.connectionName}:publish`, timeoutMs: o.publishTimeoutMs, recoveryDelayMs: o.reconnectDelayMs, logger: this.logger });
      await untilClosed(this.publisher.start(o.connectTimeoutMs)).catch((error: unknown) => {
        if (error instanceof ShutdownError) throw error;
        throw new BrokerUnavailableError('the publisher channel did not open', { cause: error });
      });
      const subscribed = new Promise<void>((resolve, reject) => {
        this.firstSubscription = { resolve, reject };
      });
      this.consumeChannel = new SupervisedChannel(manager, {
        name: `${o.connectionName}:consume`,
        confirm: false,
        recoveryDelayMs: o.reconnectDelayMs,
        logger: this.logger,
        setup: (channel) => this.onChannel(channel),
        onClose: (channel, error, recovering) => this.onChannelClosed(channel, error, recovering),
      });
      this.consumeChannel.start();
      await withDeadline(untilClosed(subscribed), o.connectTimeoutMs, `subscribing to queue "${o.queue}"`).catch((error: unknown) => {
        if (error instanceof TimeoutError) throw new BrokerUnavailableError(`could not subscribe to queue "${o.queue}" within ${o.connectTimeoutMs} ms`, { cause: error });
        throw error;
      });
      if (this.stateValue === 'starting') this.stateValue = 'consuming';
    } catch (error) {
      this.firstSubscription = undefined;
      if (error instanceof ShutdownError) {
        this.stateValue = 'closed';
      } else {
        this.stateValue = 'failed';
        this.failure = error as Error;
      }
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
    if (this.intakeStopped) return;
    this.intakeStopped = true;
    clearTimeout(this.resubscribeTimer);
    if (this.stateValue !== 'failed' && this.stateValue !== 'closed') this.stateValue = 'stopping';
    this.flushBatch();
    const generation = this.current;
    const tag = generation?.consumerTag;
    if (generation?.open && tag !== undefined) {
      generation.consumerTag = undefined;
      try {
        await generation.channel.cancel(tag);
      } catch (error) {
        this.logger.warn({ err: error, queue: this.options.queue }, 'basic.cancel failed; the channel closes with the source');
      }
    }
  }

  /**
   * Closes the channels and the connection gracefully. Unsettled deliveries return to the queue
   * (the broker requeues unacknowledged messages of a closed channel). Safe to repeat.
   */
  async close(): Promise<void> {
    this.intakeStopped = true;
    this.abortStart?.(new ShutdownError('the RabbitMQ source was closed while starting'));
    await this.shutdown();
    if (this.stateValue !== 'failed') this.stateValue = 'closed';
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
    this.intakeStopped = true;
    this.closing = true;
    clearTimeout(this.resubscribeTimer);
    if (this.current) this.current.open = false;
    await Promise.all([destroySocket(this.manager), destroySocket(this.publishManager)]);
    await this.shutdown();
    if (this.stateValue !== 'failed') this.stateValue = 'closed';
  }

  /** True while subscribed on an open channel (for readiness probes). */
  isConsuming(): boolean {
    const generation = this.current;
    return this.stateValue === 'consuming' && generation !== undefined && generation.open && generation.consumerTag !== undefined;
  }

  /** A snapshot of the counters. */
  stats(): RabbitMqSourceStats {
    return { ...this.counters, requeues: { ...this.counters.requeues }, generation: this.generationCounter };
  }

  /** Adds a listener. A throwing listener is logged and ignored. */
  on<E extends RabbitMqSourceEventName>(event: E, listener: RabbitMqSourceListener<E>): this {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(listener as (payload: never) => void);
    return this;
  }

  /** Removes a listener. */
  off<E extends RabbitMqSourceEventName>(event: E, listener: RabbitMqSourceListener<E>): this {
    this.listeners.get(event)?.delete(listener as (payload: never) => void);
    return this;
  }

  private emit<E extends RabbitMqSourceEventName>(event: E, payload: RabbitMqSourceEvents[E]): void {
    const set = this.listeners.get(event);
    if (!set) return;
    for (const listener of set) {
      try {
        (listener as RabbitMqSourceListener<E>)(payload);
      } catch (error) {
        this.logger.warn({ err: error, event }, 'twophase/rabbitmq event listener threw; ignored');
      }
    }
  }

  private connectionManager(connectionName: string): AmqpConnectionManager {
    const o = this.options;
    return connect([...o.urls], {
      heartbeatIntervalInSeconds: o.heartbeatSeconds,
      reconnectTimeInSeconds: o.reconnectDelayMs / 1000,
      connectionOptions: { clientProperties: { connection_name: connectionName } },
    });
  }

  private watchConnection(manager: AmqpConnectionManager, role: 'consume' | 'publish'): void {
    manager.on('connect', ({ url }: { url: unknown }) => {
      this.connectFailures[role] = 0;
      manager.reconnectTimeInSeconds = this.options.reconnectDelayMs / 1000;
      if (role === 'publish') return;
      const reconnect = this.connects++ > 0;
      if (reconnect) this.counters.reconnects++;
      this.emit('connected', { url: redact(url), reconnect });
    });
    manager.on('disconnect', ({ err }: { err?: Error }) => {
      if (this.closing) return;
      this.logger.warn({ err, queue: this.options.queue, connection: role, reconnectDelayMs: this.options.reconnectDelayMs }, 'RabbitMQ connection lost; reconnecting');
      if (role === 'publish') return;
      if (this.stateValue === 'consuming' || this.stateValue === 'cancelled') this.stateValue = 'recovering';
      this.emit('disconnected', { error: err });
    });
    manager.on('connectFailed', ({ err, url }: { err: Error; url: unknown }) => {
      if (this.closing) return;
      const o = this.options;
      const failures = ++this.connectFailures[role];
      const from = typeof url === 'string' ? url : (url as { url?: unknown } | undefined)?.url;
      this.lastConnectFailure = { error: err, url: typeof from === 'string' ? from : o.urls[0]! };
      const reason = connectFailureReason(err);
      if (this.stateValue === 'starting' && isPermanentConnectFailure(reason)) {
        this.failConnect?.(err);
        return;
      }
      // Exponential backoff: reconnectDelayMs, doubling after each failure in a row, at most
      // 16 × reconnectDelayMs and 30 s (amqp-connection-manager waits reconnectTimeInSeconds).
      const delayMs = Math.min(o.reconnectDelayMs * 2 ** Math.min(failures, 4), Math.max(o.reconnectDelayMs, 30_000));
      manager.reconnectTimeInSeconds = delayMs / 1000;
      // Few lines: the 1st, 2nd, 4th, 8th … failure in a row, and during start() only for the
      // consuming connection (the publishing one fails alike).
      if ((failures & (failures - 1)) !== 0 || (this.stateValue === 'starting' && role === 'publish')) return;
      const error = new BrokerConnectionError(this.lastConnectFailure.url, err, { attempts: failures });
      this.logger.warn({ err, queue: o.queue, connection: role, attempts: failures, reason, nextAttemptInMs: delayMs }, `${error.message}; retrying with backoff`);
    });
    manager.on('blocked', ({ reason }: { reason: string }) => {
      this.logger.warn({ reason, queue: this.options.queue, connection: role }, 'RabbitMQ blocked the connection (resource alarm): republishes wait');
      this.emit('blocked', { reason });
    });
    manager.on('unblocked', () => this.emit('unblocked', {}));
  }

  private async openTopologyChannel(): Promise<Channel> {
    const model = this.manager?.connection as ChannelModel | undefined;
    if (!model) throw new BrokerUnavailableError('not connected');
    return model.createChannel();
  }

  /** Setup function of the consuming channel: runs on every new underlying channel. */
  private async onChannel(channel: Channel): Promise<void> {
    const generation = new ChannelGeneration(++this.generationCounter, channel);
    this.current = generation;
    this.counters.generation = generation.id;
    channel.once('close', () => {
      generation.open = false;
    });
    this.emit('channel_opened', { generation: generation.id });
    if (this.intakeStopped || this.closing) return;
    try {
      await channel.prefetch(this.prefetch, false);
    } catch (error) {
      this.logger.warn({ err: error, generation: generation.id }, 'basic.qos failed on a new channel');
      return;
    }
    await this.subscribe(generation);
  }

  private onChannelClosed(channel: Channel, error: Error | undefined, recovering: boolean): void {
    const generation = this.current?.channel === channel ? this.current : undefined;
    const id = generation?.id ?? -1;
    this.counters.channelsClosed++;
    if (generation && !this.closing && (this.stateValue === 'consuming' || this.stateValue === 'cancelled')) this.stateValue = 'recovering';
    if (!this.closing) {
      this.logger.warn({ err: error, queue: this.options.queue, generation: id, inFlight: generation?.inFlight, recovering }, 'consuming channel closed: its unsettled deliveries are stale and will be redelivered');
    }
    this.emit('channel_closed', { generation: id, error, recovering });
  }

  /**
   * Subscribes `generation`'s channel to the queue; re-declares or checks the topology first,
   * except right after `start()` did. On failure, tries again after `resubscribeIntervalMs`
   * while `generation` is current and open.
   */
  private async subscribe(generation: ChannelGeneration): Promise<void> {
    if (!this.mayConsumeOn(generation)) return;
    try {
      if (this.topologyFresh) this.topologyFresh = false;
      // The first start() declared it (and would have cleaned up); a re-declare needs no look-ups.
      else await applyTopology(() => this.openTopologyChannel(), this.plan, { removeCreatedOnFailure: false });
      if (!this.mayConsumeOn(generation)) return;
      const { consumerTag } = await generation.channel.consume(this.options.queue, (message) => this.onMessage(generation, message), { noAck: false });
      if (!this.mayConsumeOn(generation)) {
        if (generation.open) await generation.channel.cancel(consumerTag).catch(() => undefined);
        return;
      }
      generation.consumerTag = consumerTag;
      this.counters.subscriptions++;
      if (this.stateValue !== 'starting') this.stateValue = 'consuming';
      this.emit('subscribed', { generation: generation.id, consumerTag, queue: this.options.queue });
      this.firstSubscription?.resolve();
      this.firstSubscription = undefined;
    } catch (error) {
      if (!this.mayConsumeOn(generation)) return;
      if (this.firstSubscription && error instanceof ConfigurationError) {
        this.firstSubscription.reject(error);
        this.firstSubscription = undefined;
        return;
      }
      this.logger.warn({ err: error, queue: this.options.queue, generation: generation.id, retryInMs: this.options.resubscribeIntervalMs }, 'subscribing failed; trying again');
      this.emit('subscribe_failed', { generation: generation.id, error: error as Error });
      clearTimeout(this.resubscribeTimer);
      this.resubscribeTimer = setTimeout(() => void this.subscribe(generation), this.options.resubscribeIntervalMs);
    }
  }

  private mayConsumeOn(generation: ChannelGeneration): boolean {
    return generation === this.current && generation.open && !this.intakeStopped && !this.closing && this.stateValue !== 'failed';
  }

  private onMessage(generation: ChannelGeneration, message: ConsumeMessage | null): void {
    if (message === null) {
      this.onCancelled(generation);
      return;
    }
    this.counters.deliveries++;
    generation.begin();
    const settler = new DeliverySettler(this.settlement, generation, message);
    const headers = withoutPublishId(message.properties.headers ?? {});
    const fields = message.fields;
    const messageId = message.properties.messageId;
    const delivery: Delivery = {
      body: message.content,
      headers,
      messageId: typeof messageId === 'string' && messageId.length > 0 ? messageId : undefined,
      metadata: {
        system: 'rabbitmq',
        destination: this.options.queue,
        redelivered: fields.redelivered,
        priorAttempts: priorAttempts(headers, this.settlement),
        attributes: {
          exchange: fields.exchange,
          routingKey: fields.routingKey,
          deliveryTag: fields.deliveryTag,
          consumerTag: fields.consumerTag,
          channelGeneration: generation.id,
          deliveryCount: readCount(headers, DELIVERY_COUNT_HEADER),
        },
      },
      settler,
    };
    if (this.options.batchClaims) {
      this.batch.push({ delivery, settler });
      if (!this.batchScheduled) {
        this.batchScheduled = true;
        setImmediate(() => this.flushBatch());
      }
      return;
    }
    this.dispatch(delivery, settler, undefined);
  }

  private dispatch(delivery: Delivery, settler: DeliverySettler, preclaimed: PreparedClaim | undefined): void {
    this.sink!.dispatch(delivery, preclaimed).then(
      () => settler.finish(),
      (error: unknown) => {
        settler.finish();
        this.logger.error({ err: error, queue: this.options.queue }, 'dispatch rejected (a pipeline bug); the message is redelivered when its channel closes');
      },
    );
  }

  private flushBatch(): void {
    this.batchScheduled = false;
    if (this.batch.length === 0) return;
    const batch = this.batch;
    this.batch = [];
    this.sink!.claimBatch(batch.map((b) => b.delivery)).then(
      (prepared) => batch.forEach((b, i) => this.dispatch(b.delivery, b.settler, prepared[i])),
      (error: unknown) => {
        this.logger.warn({ err: error, queue: this.options.queue }, 'claimBatch failed; claiming one by one');
        batch.forEach((b) => this.dispatch(b.delivery, b.settler, undefined));
      },
    );
  }

  /** The broker cancelled the consumer (the callback got `null`). */
  private onCancelled(generation: ChannelGeneration): void {
    generation.consumerTag = undefined;
    if (generation !== this.current || this.closing) return;
    this.counters.cancels++;
    const queue = this.options.queue;
    this.logger.warn({ queue, generation: generation.id, inFlight: generation.inFlight, onCancel: this.options.onCancel }, 'the broker cancelled the consumer (queue deleted or unavailable)');
    if (this.intakeStopped) {
      this.emit('cancelled', { generation: generation.id, queue, inFlight: generation.inFlight });
      return;
    }
    this.stateValue = 'cancelled';
    this.emit('cancelled', { generation: generation.id, queue, inFlight: generation.inFlight });
    if (this.options.onCancel === 'stop') {
      const error = new ConsumerCancelledError(queue);
      this.failure = error;
      this.stateValue = 'failed';
      this.logger.error({ err: error, queue }, 'source stopped: the broker cancelled the consumer and onCancel is "stop"');
      this.emit('failed', { error });
      // In-flight deliveries still settle on this channel; the consumer stops being live.
      this.sink?.fail?.(error);
      return;
    }
    // Let in-flight deliveries finish on this channel, then re-declare (or wait for) the queue.
    void generation.whenIdle().then(() => this.subscribe(generation));
  }

  private async republish(exchange: string, routingKey: string, content: Buffer, options: Options.Publish): Promise<void> {
    if (!this.publisher) throw new BrokerUnavailableError('the source is not started');
    await this.publisher.publish(exchange, routingKey, content, options);
  }

  private onSettled(action: SettleAction, cause: RequeueCause | undefined): void {
    if (action === 'ack') this.counters.acks++;
    else if (action === 'reject') this.counters.rejects++;
    else if (cause !== undefined) this.counters.requeues[cause] = (this.counters.requeues[cause] ?? 0) + 1;
  }

  private onStale(error: StaleDeliveryError, message: ConsumeMessage): void {
    this.counters.staleSettlesSkipped++;
    const messageId = typeof message.properties.messageId === 'string' ? message.properties.messageId : undefined;
    if (!this.closing) {
      this.logger.warn({ queue: this.options.queue, action: error.action, generation: error.generation, deliveryTag: error.deliveryTag, messageId }, error.message);
    }
    this.emit('stale_settle', { generation: error.generation, action: error.action, deliveryTag: error.deliveryTag, messageId });
  }

  /** Resolves after `ms`, or at once when the source closes. */
  private pause(ms: number): Promise<void> {
    if (ms <= 0 || this.closing) return Promise.resolve();
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
    this.closing = true;
    clearTimeout(this.resubscribeTimer);
    for (const wake of [...this.pauses]) wake();
    await this.consumeChannel?.close();
    await this.publisher?.close();
    for (const manager of [this.manager, this.publishManager]) {
      await manager?.close().catch((error: unknown) => this.logger.warn({ err: error }, 'closing a RabbitMQ connection failed'));
    }
  }
}

/**
 * Destroys a manager's socket without an AMQP close (a simulated crash) and waits until amqplib
 * noticed, so a later graceful close has nothing to send.
 */
async function destroySocket(manager: AmqpConnectionManager | undefined): Promise<void> {
  const model = manager?.connection as ChannelModel | undefined;
  const stream = (model?.connection as unknown as { stream?: { destroy(error?: Error): void } } | undefined)?.stream;
  if (!manager || !stream) return;
  const gone = new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 2000);
    manager.once('disconnect', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  // With an error, so amqplib sees the socket die (it listens for 'error' and 'end', not 'close').
  stream.destroy(new BrokerUnavailableError('connection destroyed to simulate a crash'));
  await gone;
}

function redact(url: unknown): string {
  const text = typeof url === 'string' ? url : typeof url === 'object' && url !== null && 'url' in url ? String((url as { url: unknown }).url) : 'amqp';
  return text.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}

/** The headers without `twophase-publish-id`, which earlier versions sent (the input is not changed). */
function withoutPublishId(headers: Record<string, unknown>): Record<string, unknown> {
  if (!(HEADERS.publishId in headers)) return headers;
  const copy = { ...headers };
  delete copy[HEADERS.publishId];
  return copy;
}
