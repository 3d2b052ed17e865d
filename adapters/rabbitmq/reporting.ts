/**
 * The reporting part of a {@link RabbitMqSource}: its counters, its listeners, and the log lines
 * and events of settlement (the hooks a {@link DeliverySettler} calls).
 */
import type { Logger, RequeueCause } from '../../src';
import { AdapterEvents } from '../../src/adapter-kit';
import type { RabbitMqSourceEvent, RabbitMqSourceEventName, RabbitMqSourceEvents, RabbitMqSourceListener, RabbitMqSourceStats } from './events';
import type { SettlementContext } from './settler';

type MutableStats = { -readonly [K in keyof RabbitMqSourceStats]: RabbitMqSourceStats[K] } & { requeues: Record<RequeueCause, number> };

/** The settlement hooks of {@link SettlementContext}. */
export type SettlementReports = Pick<SettlementContext, 'onSettled' | 'onStale' | 'onRepeated' | 'onPublishFailed' | 'onStripped' | 'onFallbackNack'>;

export class SourceReporter {
  /** The counters; parts of the source count into them directly. */
  readonly counters: MutableStats = {
    generation: 0,
    deliveries: 0,
    acks: 0,
    requeues: { busy: 0, retry: 0, claimer_unavailable: 0, shutdown: 0, lease_lost: 0 },
    rejects: 0,
    staleSettlesSkipped: 0,
    claimBatches: 0,
    waitingDeliveriesDropped: 0,
    repeatedSettlesIgnored: 0,
    publishFailures: 0,
    fallbackNacks: 0,
    strippedDeadLetters: 0,
    channelsClosed: 0,
    reconnects: 0,
    cancels: 0,
    subscriptions: 0,
  };
  private readonly events: AdapterEvents<RabbitMqSourceEvent>;
  /** Listeners added with the named form, to remove them with `off`. */
  private readonly named = new Map<RabbitMqSourceEventName, Map<(payload: never) => void, () => void>>();

  constructor(
    private readonly queue: string,
    private readonly logger: Logger,
    private readonly closing: () => boolean,
  ) {
    this.events = new AdapterEvents('twophase/rabbitmq', logger);
  }

  /** A snapshot of the counters (a fresh copy). */
  snapshot(generation: number): RabbitMqSourceStats {
    return { ...this.counters, requeues: { ...this.counters.requeues }, generation };
  }

  /** Adds a listener of every event; returns a function removing it. */
  on(listener: (event: RabbitMqSourceEvent) => void): () => void {
    return this.events.on(listener);
  }

  /** Adds a listener of one named event (it gets the event, a superset of the payload). */
  onNamed<E extends RabbitMqSourceEventName>(event: E, listener: RabbitMqSourceListener<E>): void {
    const remove = this.events.on((e) => {
      if (e.type === event) listener(e as unknown as RabbitMqSourceEvents[E]);
    });
    let byListener = this.named.get(event);
    if (!byListener) this.named.set(event, (byListener = new Map()));
    byListener.get(listener as (payload: never) => void)?.();
    byListener.set(listener as (payload: never) => void, remove);
  }

  /** Removes a listener added with {@link SourceReporter.onNamed}. */
  offNamed<E extends RabbitMqSourceEventName>(event: E, listener: RabbitMqSourceListener<E>): void {
    const byListener = this.named.get(event);
    byListener?.get(listener as (payload: never) => void)?.();
    byListener?.delete(listener as (payload: never) => void);
  }

  emit<E extends RabbitMqSourceEventName>(event: E, payload: RabbitMqSourceEvents[E]): void {
    if (!this.events.active) return;
    this.events.emit({ type: event, ...payload } as RabbitMqSourceEvent);
  }

  /** The hooks settlers call: counters, log lines and events of each settle. */
  settlementReports(failedPublishRequeueDelayMs: number): SettlementReports {
    const queue = this.queue;
    return {
      onSettled: (action, cause) => {
        if (action === 'ack') this.counters.acks++;
        else if (action === 'reject') this.counters.rejects++;
        else if (cause !== undefined) this.counters.requeues[cause] = (this.counters.requeues[cause] ?? 0) + 1;
      },
      onStale: (error, message) => {
        this.counters.staleSettlesSkipped++;
        const messageId = typeof message.properties.messageId === 'string' ? message.properties.messageId : undefined;
        if (!this.closing()) {
          this.logger.warn({ queue, action: error.action, generation: error.generation, deliveryTag: error.deliveryTag, messageId }, error.message);
        }
        this.emit('stale_settle', { generation: error.generation, action: error.action, deliveryTag: error.deliveryTag, messageId });
      },
      onRepeated: (action, first, message, generation) => {
        this.counters.repeatedSettlesIgnored++;
        this.logger.warn({ queue, action, first, deliveryTag: message.fields.deliveryTag, generation }, 'second settle of a delivery ignored: only the first reaches the broker');
        this.emit('repeated_settle', { generation, action, first, deliveryTag: message.fields.deliveryTag });
      },
      onPublishFailed: (action, error, message, generation) => {
        this.counters.publishFailures++;
        this.logger.error(
          { err: error, queue, action, deliveryTag: message.fields.deliveryTag, generation, pauseMs: failedPublishRequeueDelayMs },
          `the ${action === 'requeue' ? 'delay' : 'dead-letter'} publish failed; returning the message to the queue after a pause`,
        );
        this.emit('publish_failed', { generation, action, error, deliveryTag: message.fields.deliveryTag });
      },
      onStripped: (error, message, generation) => {
        this.counters.strippedDeadLetters++;
        this.logger.error(
          { err: error, queue, deliveryTag: message.fields.deliveryTag, generation },
          'the dead-letter copy could not be encoded; dead-lettered with the twophase headers only (the others are named in twophase-headers-dropped)',
        );
        this.emit('dead_letter_stripped', { generation, error, deliveryTag: message.fields.deliveryTag });
      },
      onFallbackNack: () => {
        this.counters.fallbackNacks++;
      },
    };
  }
}
