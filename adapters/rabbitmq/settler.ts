/**
 * Settlement of one RabbitMQ delivery, per the core settlement table:
 *
 * - `ack` → `basic.ack` of this delivery only (never `allUpTo`), on the channel that delivered it.
 * - `requeue(delayMs)` → publish a copy to the delay queue of the nearest tier (or straight to the
 *   work queue for 0 ms when the copy carries no attempts), wait for the publisher confirm, then
 *   ack the original. The broker's
 *   `nack(requeue=true)` is not used: it redelivers at once (a hot loop) and, on a quorum queue,
 *   counts toward `x-delivery-limit` ("Quorum Queues" docs, "Poison Message Handling"), which
 *   would let busy claims push a message into the DLQ. Only cause `retry` raises the attempt count.
 * - `reject` → publish a copy with the reason headers to the dead-letter exchange, wait for the
 *   confirm, then ack the original. Chosen over `nack(requeue=false)` because broker
 *   dead-lettering cannot add headers: the reason would be lost.
 *
 * Each delivery settles at most once; a repeated call is ignored and counted. After the
 * delivery's channel closed, a settle is skipped and counted, never sent on a newer channel
 * (which would close it with `PRECONDITION_FAILED - unknown delivery tag`); the broker redelivers
 * the message and the claim decides. amqplib's `ack` returns nothing and a lost ack only shows
 * as a later channel error: the adapter does not wait for it, because commit-before-ack makes
 * the redelivery of an unacknowledged message a `done` duplicate.
 *
 * When the delay or dead-letter publish fails (unroutable, nacked, no confirm in time), the
 * original is returned with `nack(requeue=true)` after a pause, so nothing is lost and nothing
 * spins; the settle then rejects with the publish error, which the core reports as `ack_failed`.
 * A dead-letter copy that amqplib cannot encode (headers over 65 536 bytes once the reason
 * headers are added, or a header it has no type for) is sent again with the dead-letter headers
 * only, its other headers named in `twophase-headers-dropped`; it never falls back to broker
 * dead-lettering, which routes by the original routing key and can miss the DLQ's binding.
 */
import type { ConsumeMessage, Options } from 'amqplib';
import { type AckInfo, ConfigurationError, type RejectInfo, type RequeueCause, type RequeueInfo, type Settler } from '../../src';
import { attemptsAfterRequeue } from '../../src/adapter-kit';
import type { ChannelGeneration } from './channel-generation';
import { MessageTooLargeError, StaleDeliveryError } from './errors';
import { deadLetterProperties, priorAttempts, requeueProperties, strippedDeadLetterProperties } from './headers';
import { delayQueueName, pickDelayTier } from './topology';

/** Settle actions. */
export type SettleAction = 'ack' | 'requeue' | 'reject';

/** What a settler needs from its source: a narrow interface, so settlers are testable alone. */
export interface SettlementContext {
  readonly queue: string;
  /** The work queue's type (whose `x-delivery-count` is the broker's own on quorum queues only). */
  readonly queueType: 'classic' | 'quorum';
  readonly deadLetterExchange: string;
  readonly deadLetterRoutingKey: string;
  readonly delayTiersMs: readonly number[];
  readonly failedPublishRequeueDelayMs: number;
  /** Confirmed, mandatory publish (see ConfirmPublisher). */
  publish(exchange: string, routingKey: string, content: Buffer, options: Options.Publish): Promise<void>;
  /** Resolves after `ms`, or early when the source closes. */
  pause(ms: number): Promise<void>;
  /** Unix ms, for the `twophase-rejected-at` header. */
  now(): number;
  /** A settle reached the wire (or a fallback nack did). */
  onSettled(action: SettleAction, cause?: RequeueCause): void;
  /** A settle was skipped because the delivery's channel is closed. */
  onStale(error: StaleDeliveryError, message: ConsumeMessage): void;
  /** A second settle of one delivery was ignored. */
  onRepeated(action: SettleAction, first: SettleAction, message: ConsumeMessage, generation: number): void;
  /** The delay or dead-letter publish failed; the fallback nack follows. */
  onPublishFailed(action: 'requeue' | 'reject', error: unknown, message: ConsumeMessage, generation: number): void;
  /** The dead-letter copy could not be encoded; a copy with the dead-letter headers only was sent instead. */
  onStripped(error: Error, message: ConsumeMessage, generation: number): void;
  /** The fallback `nack(requeue=true)` was sent. */
  onFallbackNack(message: ConsumeMessage, generation: number): void;
}

/** The {@link Settler} of one delivery. */
export class DeliverySettler implements Settler {
  private first: SettleAction | undefined;
  private ended = false;

  constructor(
    private readonly context: SettlementContext,
    private readonly generation: ChannelGeneration,
    private readonly message: ConsumeMessage,
  ) {}

  /** The delivery's first settle action, if any. */
  get action(): SettleAction | undefined {
    return this.first;
  }

  ack(_info: AckInfo): Promise<void> {
    if (!this.claim('ack')) return Promise.resolve();
    try {
      this.ackOriginal('ack');
      this.context.onSettled('ack');
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(error);
    } finally {
      this.finish();
    }
  }

  /** The tier a requeue of `delayMs` waits in (0 when it goes straight back to the work queue). */
  requeueDelay(delayMs: number, info: RequeueInfo): number {
    return this.tierOf(delayMs, this.attemptsAfter(info)) ?? 0;
  }

  /** The attempts the requeued copy carries. */
  private attemptsAfter(info: RequeueInfo): number {
    const prior = priorAttempts(this.message.properties.headers, this.context, this.message.fields) ?? 0;
    return attemptsAfterRequeue(info.cause, info.attempt, prior);
  }

  /** The delay tier of a requeue of `delayMs` whose copy carries `attempts`; undefined: straight to the work queue. */
  private tierOf(delayMs: number, attempts: number): number | undefined {
    // A copy that carries attempts goes through a delay queue even for a 0 ms delay (the
    // shortest tier): only the broker's dead-letter history from a delay queue makes the next
    // delivery trust its `twophase-attempts`.
    return pickDelayTier(this.context.delayTiersMs, delayMs) ?? (attempts > 0 ? this.context.delayTiersMs[0] : undefined);
  }

  async requeue(delayMs: number, info: RequeueInfo): Promise<void> {
    if (!this.claim('requeue')) return;
    try {
      this.assertOpen('requeue');
      const attempts = this.attemptsAfter(info);
      const tier = this.tierOf(delayMs, attempts);
      const routingKey = tier === undefined ? this.context.queue : delayQueueName(this.context.queue, tier);
      try {
        // Through the default exchange: only the work queue (or its delay queue) gets the copy,
        // never other queues bound to the original exchange.
        await this.context.publish('', routingKey, this.message.content, requeueProperties(this.message, attempts, info.cause, this.context.queue));
      } catch (error) {
        await this.fallback('requeue', error);
      }
      this.ackOriginal('requeue');
      this.context.onSettled('requeue', info.cause);
    } finally {
      this.finish();
    }
  }

  async reject(info: RejectInfo): Promise<void> {
    if (!this.claim('reject')) return;
    try {
      this.assertOpen('reject');
      const properties = deadLetterProperties(this.message, info, this.context.queue, this.context.now());
      try {
        await this.context.publish(this.context.deadLetterExchange, this.context.deadLetterRoutingKey, this.message.content, properties);
      } catch (error) {
        // Only a copy amqplib cannot encode is sent again, with the dead-letter headers only.
        if (!(error instanceof MessageTooLargeError || error instanceof ConfigurationError)) return await this.fallback('reject', error);
        const stripped = strippedDeadLetterProperties(this.message, info, this.context.queue, this.context.now());
        try {
          await this.context.publish(this.context.deadLetterExchange, this.context.deadLetterRoutingKey, this.message.content, stripped);
        } catch (again) {
          await this.fallback('reject', again);
        }
        this.context.onStripped(error as Error, this.message, this.generation.id);
      }
      this.ackOriginal('reject');
      this.context.onSettled('reject');
    } finally {
      this.finish();
    }
  }

  /**
   * Marks the delivery ended if no settle did (a pipeline that ended without settling). Safe to
   * repeat. Called by the source when `dispatch` resolves.
   */
  finish(): void {
    if (this.ended) return;
    this.ended = true;
    this.generation.end();
  }

  private claim(action: SettleAction): boolean {
    if (this.first !== undefined) {
      this.context.onRepeated(action, this.first, this.message, this.generation.id);
      return false;
    }
    this.first = action;
    return true;
  }

  private assertOpen(action: SettleAction): void {
    if (!this.generation.open) throw this.stale(action);
  }

  private ackOriginal(action: SettleAction): void {
    this.assertOpen(action);
    try {
      this.generation.channel.ack(this.message, false);
    } catch {
      // amqplib throws IllegalOperationError once the channel is closing or closed.
      throw this.stale(action);
    }
  }

  private stale(action: SettleAction): StaleDeliveryError {
    const error = new StaleDeliveryError(action, this.generation.id, this.message.fields.deliveryTag);
    this.context.onStale(error, this.message);
    return error;
  }

  /** Publish failed: return the original after a pause, then fail the settle with the error. */
  private async fallback(action: 'requeue' | 'reject', error: unknown): Promise<never> {
    this.context.onPublishFailed(action, error, this.message, this.generation.id);
    await this.context.pause(this.context.failedPublishRequeueDelayMs);
    if (this.generation.open) {
      try {
        this.generation.channel.nack(this.message, false, true);
        this.context.onFallbackNack(this.message, this.generation.id);
      } catch {
        // channel closed meanwhile: the broker requeues the message itself
      }
    }
    throw error;
  }
}
