/**
 * Errors of the RabbitMQ adapter. All extend the core {@link TwophaseError}, so `isRetriable`
 * and `code` work as for core errors. Topology and option problems are the core's
 * {@link ConfigurationError}.
 */
import { TwophaseError, type TwophaseErrorCode } from '../../src';

/** Codes of the adapter's errors. */
export type RabbitMqErrorCode = 'BROKER_UNAVAILABLE' | 'PUBLISH_FAILED' | 'MESSAGE_TOO_LARGE' | 'UNROUTABLE' | 'STALE_DELIVERY' | 'CONSUMER_CANCELLED';

/**
 * Base of the adapter's errors.
 *
 * The core's `TwophaseErrorCode` union does not list adapter codes yet; the cast below keeps the
 * adapter's codes stable strings until the core opens the union (see docs/rabbitmq.md).
 */
export class RabbitMqError extends TwophaseError {
  constructor(code: RabbitMqErrorCode, message: string, options?: { cause?: unknown; retriable?: boolean }) {
    super(code as unknown as TwophaseErrorCode, message, options);
  }
}

/** The broker could not be reached (initial connect timed out, or the connection is down). Retriable. */
export class BrokerUnavailableError extends RabbitMqError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('BROKER_UNAVAILABLE', message, { cause: options?.cause, retriable: true });
  }
}

/**
 * A publish was not confirmed: the broker nacked it, the channel closed before the confirm, or
 * the confirm did not arrive within the deadline. The message may or may not have been routed.
 * Retriable.
 */
export class PublishError extends RabbitMqError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('PUBLISH_FAILED', message, { cause: options?.cause, retriable: true });
  }
}

/**
 * A publish was refused before anything was sent: its headers encode to more than amqplib can
 * send in one header table (65 536 bytes). Publishing it again cannot succeed, so not retriable.
 * The channel is left intact.
 */
export class MessageTooLargeError extends RabbitMqError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('MESSAGE_TOO_LARGE', message, { cause: options?.cause, retriable: false });
  }
}

/**
 * A mandatory publish was returned by the broker (`basic.return`): no queue is bound for its
 * exchange and routing key, so it would have been dropped. Not retriable until topology changes.
 */
export class UnroutableError extends RabbitMqError {
  constructor(
    readonly exchange: string,
    readonly routingKey: string,
    readonly replyText: string,
    message = `message to exchange "${exchange}" with routing key "${routingKey}" was returned as unroutable (${replyText}): ` +
      (exchange === ''
        ? `no queue named "${routingKey}" exists (the default exchange routes by queue name): declare the queue (a RabbitMqSource declares its queue when it starts), or correct the name`
        : `no queue is bound to exchange "${exchange}" with a binding that matches routing key "${routingKey}": bind a queue ` +
          '(a RabbitMqSource declares its bindings when it starts), or correct the exchange or the routing key'),
  ) {
    super('UNROUTABLE', message);
  }
}

/**
 * A settle of a delivery whose channel is gone was skipped: delivery tags are scoped to their
 * channel, so sending it on a newer channel would close that channel with
 * `PRECONDITION_FAILED - unknown delivery tag` (RabbitMQ docs, "Consumer Acknowledgements and
 * Publisher Confirms": "Delivery tags are scoped per channel"). The broker redelivers the message
 * and the claim decides (a committed key is acked as a duplicate).
 */
export class StaleDeliveryError extends RabbitMqError {
  constructor(
    readonly action: 'ack' | 'requeue' | 'reject',
    readonly generation: number,
    readonly deliveryTag: number,
  ) {
    super(
      'STALE_DELIVERY',
      `${action} of delivery tag ${deliveryTag} skipped: its channel (generation ${generation}) is closed; the broker redelivers it`,
    );
  }
}

/**
 * The broker cancelled the consumer (the queue was deleted, or its node failed) and the source is
 * configured with `onCancel: 'stop'`.
 */
export class ConsumerCancelledError extends RabbitMqError {
  constructor(readonly queue: string) {
    super('CONSUMER_CANCELLED', `the broker cancelled the consumer of queue "${queue}" (queue deleted or unavailable); onCancel is 'stop'`);
  }
}
