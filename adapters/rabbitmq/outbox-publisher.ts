/**
 * The outbox relay's RabbitMQ side: publishes outbox records with publisher confirms, `mandatory`
 * (a returned, unroutable message is a failure, never a success), the outbox id as the AMQP
 * `message-id` and the `idempotency-key` header, and the body and headers as staged.
 */
import { ConfigurationError, type RabbitMqOutboxDestination, TwophaseError } from '../../src';
import { type OutboxPublisher, type OutboxRecord, type PublishFailureClass } from '../../src/adapter-kit';
import { BrokerUnavailableError, MessageTooLargeError, PublishError, UnroutableError } from './errors';
import { type PublishMessageOptions, RabbitMqPublisher, type RabbitMqPublisherOptions } from './publisher';

/** How long an exchange seen to exist is trusted before it is checked again, ms. */
const EXCHANGE_RECHECK_MS = 30_000;
/** Exchanges remembered at most (the cache starts over past it). */
const MAX_CHECKED_EXCHANGES = 1000;

/**
 * An {@link OutboxPublisher} for RabbitMQ. Options are those of {@link RabbitMqPublisher}
 * (URL, confirm deadline `publishTimeoutMs`, reconnect delay, `injectContext`, …); the relay
 * connects it on `start()` and closes it on `stop()`.
 *
 * ```ts
 * const relay = new OutboxRelay({ store, publisher: new RabbitMqOutboxPublisher({ url: 'amqp://guest:guest@127.0.0.1:5672' }) });
 * ```
 */
export class RabbitMqOutboxPublisher implements OutboxPublisher {
  readonly system = 'rabbitmq' as const;
  private readonly publisher: RabbitMqPublisher;
  private started = false;
  /** Exchanges checked to exist, with the time of the check (ms): checked again after {@link EXCHANGE_RECHECK_MS}. */
  private readonly exchanges = new Map<string, { readonly at: number; readonly exists: Promise<boolean> }>();

  /** @throws ConfigurationError for an invalid option */
  constructor(options: RabbitMqPublisherOptions) {
    this.publisher = new RabbitMqPublisher({ connectionName: 'twophase:outbox-relay', ...options });
  }

  /** Connects and opens the confirm channel. @throws BrokerUnavailableError when no connection opens within `connectTimeoutMs` */
  async start(): Promise<void> {
    await this.publisher.connect();
    this.started = true;
  }

  async close(): Promise<void> {
    this.started = false;
    await this.publisher.close();
  }

  /**
   * Publishes `record` and resolves once the broker confirmed it and did not return it. Its
   * exchange is first checked to exist (on a channel of its own, once per exchange every 30 s): a
   * publish to a missing exchange would make the broker close the confirm channel and fail every
   * other publish in flight on it.
   * @throws UnroutableError when the exchange does not exist (nothing was sent) or no queue is bound (returned under `mandatory`)
   * @throws PublishError when the broker nacked it or no confirm came within `publishTimeoutMs`
   * @throws MessageTooLargeError when its headers cannot be encoded (nothing was sent)
   * @throws BrokerUnavailableError before `start()` or after `close()`
   */
  async publish(record: OutboxRecord): Promise<void> {
    if (!this.started) throw new BrokerUnavailableError('RabbitMqOutboxPublisher is not started (the relay starts it)');
    const destination = record.destination as RabbitMqOutboxDestination;
    const p = record.properties;
    const options: PublishMessageOptions = {
      idempotencyKey: record.id,
      messageId: record.id,
      headers: record.headers,
      persistent: p.persistent ?? true,
      ...(p.contentType === undefined ? {} : { contentType: p.contentType }),
      ...(p.correlationId === undefined ? {} : { correlationId: p.correlationId }),
      ...(p.replyTo === undefined ? {} : { replyTo: p.replyTo }),
      ...(p.type === undefined ? {} : { type: p.type }),
      ...(p.appId === undefined ? {} : { appId: p.appId }),
      ...(p.priority === undefined ? {} : { priority: p.priority }),
      ...(p.expirationMs === undefined ? {} : { expirationMs: p.expirationMs }),
    };
    await this.checkExchange(destination.exchange, destination.routingKey);
    await this.publisher.publish(destination.exchange, destination.routingKey, record.body, options);
  }

  private async checkExchange(exchange: string, routingKey: string): Promise<void> {
    if (exchange === '') return;
    const now = Date.now();
    let check = this.exchanges.get(exchange);
    if (check === undefined || now - check.at > EXCHANGE_RECHECK_MS) {
      if (this.exchanges.size >= MAX_CHECKED_EXCHANGES) this.exchanges.clear();
      check = { at: now, exists: this.publisher.exchangeExists(exchange) };
      this.exchanges.set(exchange, check);
    }
    let exists: boolean;
    try {
      exists = await check.exists;
    } catch (error) {
      this.exchanges.delete(exchange);
      throw error;
    }
    if (!exists) {
      this.exchanges.delete(exchange);
      throw new UnroutableError(exchange, routingKey, 'NOT_FOUND', `exchange "${exchange}" does not exist (404 NOT_FOUND); the message (routing key "${routingKey}") was not sent: declare the exchange (a RabbitMqSource declares the exchanges of its bindings when it starts), or correct the name`);
    }
  }

  /**
   * `unroutable` (retried: a binding may appear), `too_large` and `invalid_message` (dead at once:
   * publishing again cannot succeed), `broker_unavailable`, `publish_failed` (retried).
   */
  classify(error: unknown): PublishFailureClass {
    if (error instanceof UnroutableError) return { reason: 'unroutable', permanent: false };
    if (error instanceof MessageTooLargeError) return { reason: 'too_large', permanent: true };
    if (error instanceof ConfigurationError) return { reason: 'invalid_message', permanent: true };
    if (error instanceof BrokerUnavailableError) return { reason: 'broker_unavailable', permanent: false };
    if (error instanceof PublishError) return { reason: 'publish_failed', permanent: false };
    if (error instanceof TwophaseError) return { reason: error.code.toLowerCase(), permanent: !error.retriable };
    return { reason: 'publish_failed', permanent: false };
  }
}
