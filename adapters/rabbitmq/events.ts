/**
 * Events and counters of a {@link RabbitMqSource}. Consumer outcomes (acquired, committed, …) go
 * through the core observer; these are the broker-side facts underneath.
 */
import type { RequeueCause } from '../../src';
import type { SettleAction } from './settler';

/** Payload of each source event, by name. */
export interface RabbitMqSourceEvents {
  /** A connection opened (the first one, or a reconnect). */
  connected: { readonly url: string; readonly reconnect: boolean };
  /** The connection was lost; amqp-connection-manager reconnects after `reconnectDelayMs`. */
  disconnected: { readonly error?: Error };
  /** The broker blocked the connection (resource alarm; "Blocked Connection Notifications" docs). */
  blocked: { readonly reason: string };
  unblocked: Record<never, never>;
  /** A new consuming channel (generation) opened. */
  channel_opened: { readonly generation: number };
  /**
   * A consuming channel closed. Its unsettled deliveries are now stale; the broker redelivers
   * them. `recovering` is true when the connection is up and a new channel follows.
   */
  channel_closed: { readonly generation: number; readonly error?: Error; readonly recovering: boolean };
  /** The consumer is subscribed (first time, after a reconnect, or after a broker cancel). */
  subscribed: { readonly generation: number; readonly consumerTag: string; readonly queue: string };
  /** Subscribing failed (topology check or declare, consume); retried every `resubscribeIntervalMs`. */
  subscribe_failed: { readonly generation: number; readonly error: Error };
  /**
   * The broker cancelled the consumer (`basic.cancel`, the consume callback got `null`): the queue
   * was deleted or became unavailable ("Consumer Cancel Notification" docs). Health reports not
   * consuming until resubscribed.
   */
  cancelled: { readonly generation: number; readonly queue: string; readonly inFlight: number };
  /** A settle of a delivery whose channel is gone was skipped (never sent on another channel). */
  stale_settle: { readonly generation: number; readonly action: SettleAction; readonly deliveryTag: number; readonly messageId?: string };
  /** A second settle of one delivery was ignored (only the first reaches the wire). */
  repeated_settle: { readonly generation: number; readonly action: SettleAction; readonly first: SettleAction; readonly deliveryTag: number };
  /** The delay or dead-letter publish failed; the original is returned with `nack(requeue=true)` after a pause. */
  publish_failed: { readonly generation: number; readonly action: 'requeue' | 'reject'; readonly error: unknown; readonly deliveryTag: number };
  /**
   * A dead-letter copy could not be encoded (headers over amqplib's 65 536-byte limit, or a value
   * it cannot encode); a copy with the dead-letter headers only was sent instead.
   */
  dead_letter_stripped: { readonly generation: number; readonly error: Error; readonly deliveryTag: number };
  /** The source stopped for good (broker cancel with `onCancel: 'stop'`). */
  failed: { readonly error: Error };
}

/** Names of {@link RabbitMqSourceEvents}. */
export type RabbitMqSourceEventName = keyof RabbitMqSourceEvents;

/**
 * One source event as a listener of `source.on(listener)` gets it: the payload of
 * {@link RabbitMqSourceEvents} with the event's name in `type` (the shape every adapter uses).
 */
export type RabbitMqSourceEvent = { [E in RabbitMqSourceEventName]: { readonly type: E } & RabbitMqSourceEvents[E] }[RabbitMqSourceEventName];

/** Counters since construction; read through `source.stats`. */
export interface RabbitMqSourceStats {
  /** Current channel generation (0 before the first channel). */
  readonly generation: number;
  /** Messages delivered to the pipeline. */
  readonly deliveries: number;
  /** `basic.ack`s sent for acks (processed or duplicate). */
  readonly acks: number;
  /** Requeues completed (copy confirmed, original acked), by cause. */
  readonly requeues: Readonly<Record<RequeueCause, number>>;
  /** Dead-letters completed (copy confirmed, original acked). */
  readonly rejects: number;
  /** Settles skipped because the delivery's channel had closed. */
  readonly staleSettlesSkipped: number;
  /** With `batchClaims`: batch claims made (claim windows that closed with deliveries to claim); `deliveries / claimBatches` is the mean batch size. */
  readonly claimBatches: number;
  /**
   * Deliveries dropped from the claim window (`batchClaims`) because their channel closed before
   * they were dispatched, or because the source closed; never handled here, the broker redelivers them.
   */
  readonly waitingDeliveriesDropped: number;
  /** Second settles of one delivery that were ignored. */
  readonly repeatedSettlesIgnored: number;
  /** Delay or dead-letter publishes that failed. */
  readonly publishFailures: number;
  /** Fallback `nack(requeue=true)`s sent after a failed publish. */
  readonly fallbackNacks: number;
  /** Dead-letter copies sent with the dead-letter headers only, because the full copy could not be encoded; also counted in `rejects`. */
  readonly strippedDeadLetters: number;
  /** Consuming channels that closed. */
  readonly channelsClosed: number;
  /** Connections opened after the first. */
  readonly reconnects: number;
  /** Broker-initiated consumer cancels. */
  readonly cancels: number;
  /** Subscriptions made (the first included). */
  readonly subscriptions: number;
}

/** Listener of one named event (the older `on(name, listener)` form). */
export type RabbitMqSourceListener<E extends RabbitMqSourceEventName> = (payload: RabbitMqSourceEvents[E]) => void;
