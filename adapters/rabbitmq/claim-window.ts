/**
 * The claim window of a {@link RabbitMqSource} with `batchClaims`: deliveries that arrive close
 * together wait here briefly and are claimed with one `DeliverySink.claimBatch` call (one
 * `claimMany` round trip when the claimer has it), then each is dispatched with its prepared claim.
 *
 * - `batchWindowMs` 0: the window closes at the end of the event-loop turn that opened it
 *   (`setImmediate`), so only the deliveries amqplib parsed from the same socket reads share it.
 * - `batchWindowMs` > 0: the window stays open that many ms after its first delivery.
 * - Either way it closes at once when the channel can deliver nothing more: the deliveries of the
 *   channel not yet settled reach the prefetch (`basic.qos`), so waiting longer gains nothing.
 *
 * Nothing is held past a channel close or a stop:
 * - a delivery whose channel closed while it waited is never dispatched (its settler is finished,
 *   the broker redelivers it); one whose channel closed while its claim was in flight is not
 *   dispatched either, and a lease its claim took is released so the redelivery need not wait;
 * - {@link ClaimWindow.drain} (the source's `stopIntake`, once the consumer is cancelled)
 *   dispatches what waits without a claim (a stopping consumer requeues it, unhandled) and waits
 *   for the claims in flight to be handed to the sink, so the consumer's drain counts every
 *   delivery before the channel closes.
 *
 * Each delivery is still settled alone, on the channel that delivered it (never `allUpTo`).
 */
import type { Delivery, Logger } from '../../src';
import type { DeliverySink, PreparedClaim } from '../../src/adapter-kit';
import type { ChannelGeneration } from './channel-generation';
import type { DeliverySettler } from './settler';

/** A delivery waiting for its batch claim. */
export interface WaitingDelivery {
  readonly delivery: Delivery;
  readonly settler: DeliverySettler;
  readonly generation: ChannelGeneration;
}

/** What the window needs from the subscription. */
export interface ClaimWindowParts {
  readonly sink: DeliverySink;
  readonly logger: Logger;
  readonly queue: string;
  /** Hands one delivery (with its prepared claim, if any) to the sink and finishes its settler after. */
  dispatch(delivery: Delivery, settler: DeliverySettler, preclaimed: PreparedClaim | undefined): void;
  /** A delivery of a closed channel was dropped before dispatch (the broker redelivers it). */
  onDropped(entry: WaitingDelivery): void;
  /** A batch claim of `size` deliveries was started. */
  onBatch(size: number): void;
}

export class ClaimWindow {
  private waiting: WaitingDelivery[] = [];
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  /** Batch claims in flight, until their deliveries are handed to the sink. */
  private readonly claiming = new Set<Promise<void>>();
  /** True once drained: later deliveries are dispatched at once, unclaimed. */
  private drained = false;
  /** True after a simulated crash: leases of dropped deliveries are left to expire, as a dead process would. */
  private crashed = false;

  /** @param windowMs how long the window stays open after its first delivery, ms (0 = the event-loop turn) */
  constructor(
    private readonly windowMs: number,
    private readonly parts: ClaimWindowParts,
  ) {}

  /** Deliveries waiting in the open window. */
  get size(): number {
    return this.waiting.length;
  }

  /**
   * Adds a delivery to the window, opening it if none was open. `full` (the channel's unsettled
   * deliveries reached the prefetch) closes the window at once.
   */
  add(entry: WaitingDelivery, full: boolean): void {
    if (this.drained) {
      if (entry.generation.open) this.parts.dispatch(entry.delivery, entry.settler, undefined);
      else this.drop(entry);
      return;
    }
    this.waiting.push(entry);
    if (full) {
      this.flush();
      return;
    }
    if (this.waiting.length > 1) return;
    if (this.windowMs === 0) this.immediate = setImmediate(() => this.flush());
    else this.timer = setTimeout(() => this.flush(), this.windowMs);
  }

  /** Closes the window now: one batch claim for its deliveries of open channels, then their dispatch. */
  flush(): void {
    const batch = this.take();
    if (batch.length === 0) return;
    this.parts.onBatch(batch.length);
    const claimed = this.parts.sink.claimBatch(batch.map((b) => b.delivery)).then(
      (prepared) => batch.forEach((b, i) => this.handOver(b, prepared[i])),
      (error: unknown) => {
        this.parts.logger.warn({ err: error, queue: this.parts.queue }, 'claimBatch failed; claiming one by one');
        batch.forEach((b) => this.handOver(b, undefined));
      },
    );
    const tracked = claimed
      .catch((error: unknown) => {
        this.parts.logger.error({ err: error, queue: this.parts.queue }, 'handing a claimed batch to the sink failed (a pipeline bug); its deliveries are redelivered when their channel closes');
      })
      .finally(() => this.claiming.delete(tracked));
    this.claiming.add(tracked);
  }

  /**
   * For `stopIntake`, after the consumer was cancelled: dispatches the waiting deliveries of open
   * channels without a claim (a stopping consumer requeues them unhandled), then resolves once
   * every batch claim in flight has handed its deliveries to the sink. From then on a delivery
   * is dispatched as it arrives, unclaimed. Safe to repeat.
   */
  async drain(): Promise<void> {
    this.drained = true;
    for (const entry of this.take()) this.parts.dispatch(entry.delivery, entry.settler, undefined);
    while (this.claiming.size > 0) await Promise.all([...this.claiming]);
  }

  /**
   * Drops the waiting deliveries without dispatching them (the source closes, or `crashed`: a
   * simulated crash, after which the leases of claims still in flight are not released either).
   */
  discard(options: { readonly crashed?: boolean } = {}): void {
    if (options.crashed) this.crashed = true;
    this.cancelTimers();
    const dropped = this.waiting;
    this.waiting = [];
    for (const entry of dropped) this.drop(entry);
  }

  /** Empties the window; deliveries of closed channels are dropped, the others returned. */
  private take(): WaitingDelivery[] {
    this.cancelTimers();
    const taken = this.waiting;
    this.waiting = [];
    const alive: WaitingDelivery[] = [];
    for (const entry of taken) {
      if (entry.generation.open) alive.push(entry);
      else this.drop(entry);
    }
    return alive;
  }

  /** Dispatches a claimed delivery, unless its channel closed meanwhile (then its lease is given back). */
  private handOver(entry: WaitingDelivery, preclaimed: PreparedClaim | undefined): void {
    if (entry.generation.open) {
      this.parts.dispatch(entry.delivery, entry.settler, preclaimed);
      return;
    }
    if (!this.crashed && preclaimed?.kind === 'claimed' && preclaimed.result.state === 'acquired') {
      const key = preclaimed.key;
      // Its handler never ran: the attempt the claim counted is taken off again.
      preclaimed.result.receipt.release({ uncountAttempt: true }).catch((error: unknown) => {
        this.parts.logger.warn({ err: error, queue: this.parts.queue, key }, 'releasing the claim of a delivery whose channel closed failed; its lease expires on its own');
      });
    }
    this.drop(entry);
  }

  private drop(entry: WaitingDelivery): void {
    entry.settler.finish();
    this.parts.onDropped(entry);
  }

  private cancelTimers(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.immediate !== undefined) clearImmediate(this.immediate);
    this.timer = undefined;
    this.immediate = undefined;
  }
}
