/**
 * The subscription of a {@link RabbitMqSource}: the consuming channel (one generation per
 * underlying channel), `basic.qos` and `basic.consume` on each new channel, turning each message
 * into a {@link Delivery} with its {@link DeliverySettler}, handing it to the sink (alone, or
 * through the {@link ClaimWindow} in a batch claimed in one round trip), and the broker's consumer
 * cancel (resubscribe, or stop).
 *
 * Prefetch (`basic.qos`, per consumer) equals the consumer's `concurrency`. Delivery tags are
 * scoped to their channel, so a delivery settles only on the generation that delivered it.
 */
import type { Channel, ConsumeMessage } from 'amqplib';
import type { AmqpConnectionManager } from 'amqp-connection-manager';
import { ConfigurationError, type Delivery, type Logger } from '../../src';
import type { DeliverySink, PreparedClaim } from '../../src/adapter-kit';
import { ChannelGeneration } from './channel-generation';
import { ClaimWindow } from './claim-window';
import { SupervisedChannel } from './channel-supervisor';
import { ConsumerCancelledError } from './errors';
import { DELIVERY_COUNT_HEADER, HEADERS, priorAttempts, readCount } from './headers';
import type { SourceLifecycle } from './lifecycle';
import type { ResolvedSourceOptions } from './options';
import type { SourceReporter } from './reporting';
import { DeliverySettler, type SettlementContext } from './settler';
import { applyTopology, type TopologyPlan } from './topology';

/** What the subscription needs besides its options: the source's other parts. */
export interface SubscriptionParts {
  readonly lifecycle: SourceLifecycle;
  readonly reporter: SourceReporter;
  readonly logger: Logger;
  readonly settlement: SettlementContext;
  readonly plan: TopologyPlan;
  /** A plain channel for topology declares and checks. */
  topologyChannel(): Promise<Channel>;
}

export class Subscription {
  /** The newest consuming channel, if any. */
  private current: ChannelGeneration | undefined;
  private generationCounter = 0;
  private channel: SupervisedChannel | undefined;
  private sink: DeliverySink | undefined;
  private prefetch = 0;
  /** True right after start() declared the topology: the first subscribe skips the re-declare. */
  private topologyFresh = false;
  private resubscribeTimer: NodeJS.Timeout | undefined;
  private firstSubscription: { resolve: () => void; reject: (error: Error) => void } | undefined;
  /** With `batchClaims`: where deliveries wait for their batch claim. */
  private window: ClaimWindow | undefined;
  /**
   * Set (by RabbitMqSource.fitClaimer) for a claimer that shares one transaction per batch claim:
   * a delivery that ran before (redelivered, or back from a delayed requeue) skips the window and
   * is claimed on its own, so the deliveries of a window that rolled back run one by one.
   */
  claimRedeliveriesAlone = false;

  constructor(
    private readonly options: ResolvedSourceOptions,
    private readonly parts: SubscriptionParts,
  ) {}

  /** Channel generations opened so far (0 before the first). */
  get generations(): number {
    return this.generationCounter;
  }

  /**
   * Opens the consuming channel on `manager` and subscribes with prefetch `prefetch`. Resolves
   * once the first `basic.consume` succeeded; rejects with a ConfigurationError from the topology
   * check of the first subscribe. The caller bounds the wait.
   */
  start(manager: AmqpConnectionManager, sink: DeliverySink, prefetch: number): Promise<void> {
    this.sink = sink;
    this.prefetch = prefetch;
    if (this.options.batchClaims) {
      this.window = new ClaimWindow(this.options.batchWindowMs, {
        sink,
        logger: this.parts.logger,
        queue: this.options.queue,
        dispatch: (delivery, settler, preclaimed) => this.dispatch(delivery, settler, preclaimed),
        onDropped: () => this.parts.reporter.counters.waitingDeliveriesDropped++,
        onBatch: () => this.parts.reporter.counters.claimBatches++,
      });
    }
    this.topologyFresh = true;
    const subscribed = new Promise<void>((resolve, reject) => {
      this.firstSubscription = { resolve, reject };
    });
    this.channel = new SupervisedChannel(manager, {
      name: `${this.options.connectionName}:consume`,
      confirm: false,
      recoveryDelayMs: this.options.reconnectDelayMs,
      logger: this.parts.logger,
      setup: (channel) => this.onChannel(channel),
      onClose: (channel, error, recovering) => this.onChannelClosed(channel, error, recovering),
    });
    this.channel.start();
    return subscribed;
  }

  /** Forgets the first-subscription wait (start() failed or gave up). */
  abandonStart(): void {
    this.firstSubscription = undefined;
  }

  /**
   * Cancels the consumer (`basic.cancel`), then hands the deliveries waiting in the claim window
   * to the sink unclaimed (a stopping consumer requeues them; after the cancel, their copies are
   * not delivered back to this consumer) and waits until the batch claims in flight handed theirs
   * over. The channel stays open so in-flight deliveries can settle.
   */
  async stopIntake(): Promise<void> {
    clearTimeout(this.resubscribeTimer);
    try {
      await this.cancelConsumer();
    } finally {
      await this.window?.drain();
    }
  }

  private async cancelConsumer(): Promise<void> {
    const generation = this.current;
    const tag = generation?.consumerTag;
    if (generation?.open && tag !== undefined) {
      generation.consumerTag = undefined;
      try {
        await generation.channel.cancel(tag);
      } catch (error) {
        this.parts.logger.warn({ err: error, queue: this.options.queue }, 'basic.cancel failed; the channel closes with the source');
      }
    }
  }

  /** Marks the current channel closed at once (a simulated crash: later settles are stale). */
  markClosed(): void {
    clearTimeout(this.resubscribeTimer);
    if (this.current) this.current.open = false;
    this.window?.discard({ crashed: true });
  }

  /** Closes the consuming channel; deliveries still waiting in the claim window are dropped (the broker requeues them). Safe to repeat. */
  async close(): Promise<void> {
    clearTimeout(this.resubscribeTimer);
    this.window?.discard();
    await this.channel?.close();
  }

  /** True while subscribed on an open channel. */
  isSubscribed(): boolean {
    const generation = this.current;
    return generation !== undefined && generation.open && generation.consumerTag !== undefined;
  }

  /** Setup function of the consuming channel: runs on every new underlying channel. */
  private async onChannel(channel: Channel): Promise<void> {
    const { lifecycle, reporter, logger } = this.parts;
    const generation = new ChannelGeneration(++this.generationCounter, channel);
    this.current = generation;
    reporter.counters.generation = generation.id;
    channel.once('close', () => {
      generation.open = false;
    });
    reporter.emit('channel_opened', { generation: generation.id });
    if (lifecycle.intakeStopped || lifecycle.closing) return;
    try {
      await channel.prefetch(this.prefetch, false);
    } catch (error) {
      logger.warn({ err: error, generation: generation.id }, 'basic.qos failed on a new channel');
      return;
    }
    await this.subscribe(generation);
  }

  private onChannelClosed(channel: Channel, error: Error | undefined, recovering: boolean): void {
    const { lifecycle, reporter, logger } = this.parts;
    const generation = this.current?.channel === channel ? this.current : undefined;
    const id = generation?.id ?? -1;
    reporter.counters.channelsClosed++;
    if (generation && !lifecycle.closing) lifecycle.recovering();
    if (!lifecycle.closing) {
      logger.warn({ err: error, queue: this.options.queue, generation: id, inFlight: generation?.inFlight, recovering }, 'consuming channel closed: its unsettled deliveries are stale and will be redelivered');
    }
    reporter.emit('channel_closed', { generation: id, error, recovering });
  }

  /**
   * Subscribes `generation`'s channel to the queue; re-declares or checks the topology first,
   * except right after `start()` did. On failure, tries again after `resubscribeIntervalMs`
   * while `generation` is current and open.
   */
  private async subscribe(generation: ChannelGeneration): Promise<void> {
    if (!this.mayConsumeOn(generation)) return;
    const { lifecycle, reporter, logger } = this.parts;
    try {
      if (this.topologyFresh) this.topologyFresh = false;
      // The first start() declared it (and would have cleaned up); a re-declare needs no look-ups.
      else await applyTopology(() => this.parts.topologyChannel(), this.parts.plan, { removeCreatedOnFailure: false });
      if (!this.mayConsumeOn(generation)) return;
      const { consumerTag } = await generation.channel.consume(this.options.queue, (message) => this.onMessage(generation, message), { noAck: false });
      if (!this.mayConsumeOn(generation)) {
        if (generation.open) await generation.channel.cancel(consumerTag).catch(() => undefined);
        return;
      }
      generation.consumerTag = consumerTag;
      reporter.counters.subscriptions++;
      if (lifecycle.state !== 'starting') lifecycle.state = 'consuming';
      reporter.emit('subscribed', { generation: generation.id, consumerTag, queue: this.options.queue });
      this.firstSubscription?.resolve();
      this.firstSubscription = undefined;
    } catch (error) {
      if (!this.mayConsumeOn(generation)) return;
      if (this.firstSubscription && error instanceof ConfigurationError) {
        this.firstSubscription.reject(error);
        this.firstSubscription = undefined;
        return;
      }
      logger.warn({ err: error, queue: this.options.queue, generation: generation.id, retryInMs: this.options.resubscribeIntervalMs }, 'subscribing failed; trying again');
      reporter.emit('subscribe_failed', { generation: generation.id, error: error as Error });
      clearTimeout(this.resubscribeTimer);
      this.resubscribeTimer = setTimeout(() => void this.subscribe(generation), this.options.resubscribeIntervalMs);
    }
  }

  private mayConsumeOn(generation: ChannelGeneration): boolean {
    const lifecycle = this.parts.lifecycle;
    return generation === this.current && generation.open && !lifecycle.intakeStopped && !lifecycle.closing && lifecycle.state !== 'failed';
  }

  private onMessage(generation: ChannelGeneration, message: ConsumeMessage | null): void {
    if (message === null) {
      this.onCancelled(generation);
      return;
    }
    this.parts.reporter.counters.deliveries++;
    generation.begin();
    const settler = new DeliverySettler(this.parts.settlement, generation, message);
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
        priorAttempts: priorAttempts(headers, this.parts.settlement, message.fields),
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
    const alone = this.claimRedeliveriesAlone && (fields.redelivered || (delivery.metadata.priorAttempts ?? 0) > 0);
    if (this.window && !alone) {
      this.window.add({ delivery, settler, generation }, generation.inFlight >= this.prefetch);
      return;
    }
    this.dispatch(delivery, settler, undefined);
  }

  private dispatch(delivery: Delivery, settler: DeliverySettler, preclaimed: PreparedClaim | undefined): void {
    this.sink!.dispatch(delivery, preclaimed).then(
      () => settler.finish(),
      (error: unknown) => {
        settler.finish();
        this.parts.logger.error({ err: error, queue: this.options.queue }, 'dispatch rejected (a pipeline bug); the message is redelivered when its channel closes');
      },
    );
  }

  /** The broker cancelled the consumer (the callback got `null`). */
  private onCancelled(generation: ChannelGeneration): void {
    const { lifecycle, reporter, logger } = this.parts;
    generation.consumerTag = undefined;
    if (generation !== this.current || lifecycle.closing) return;
    reporter.counters.cancels++;
    const queue = this.options.queue;
    logger.warn({ queue, generation: generation.id, inFlight: generation.inFlight, onCancel: this.options.onCancel }, 'the broker cancelled the consumer (queue deleted or unavailable)');
    if (lifecycle.intakeStopped) {
      reporter.emit('cancelled', { generation: generation.id, queue, inFlight: generation.inFlight });
      return;
    }
    lifecycle.state = 'cancelled';
    reporter.emit('cancelled', { generation: generation.id, queue, inFlight: generation.inFlight });
    if (this.options.onCancel === 'stop') {
      const error = new ConsumerCancelledError(queue);
      lifecycle.fail(error);
      logger.error({ err: error, queue }, 'source stopped: the broker cancelled the consumer and onCancel is "stop"');
      reporter.emit('failed', { error });
      // In-flight deliveries still settle on this channel; the consumer stops being live.
      this.sink?.fail?.(error);
      return;
    }
    // Let in-flight deliveries finish on this channel, then re-declare (or wait for) the queue.
    void generation.whenIdle().then(() => this.subscribe(generation));
  }
}

/** The headers without `twophase-publish-id`, which earlier versions sent (the input is not changed). */
function withoutPublishId(headers: Record<string, unknown>): Record<string, unknown> {
  if (!(HEADERS.publishId in headers)) return headers;
  const copy = { ...headers };
  delete copy[HEADERS.publishId];
  return copy;
}
