/**
 * One underlying consuming channel and the deliveries it carries.
 *
 * Delivery tags are scoped to the channel that delivered them ("Consumer Acknowledgements and
 * Publisher Confirms" docs: "Delivery tags are scoped per channel"). Each new channel (after a
 * reconnect or a replacement) is a new generation; a delivery settles only on its own generation
 * and only while that channel is open.
 */
import type { Channel } from 'amqplib';

/** A consuming channel, numbered from 1 in the order the source opened them. */
export class ChannelGeneration {
  /** False from the moment the channel emits `close`; never true again. */
  open = true;
  /** The broker's consumer tag while subscribed; undefined before and after. */
  consumerTag: string | undefined;
  private inFlightCount = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(
    /** Generation number, ≥ 1. */
    readonly id: number,
    readonly channel: Channel,
  ) {}

  /** Deliveries of this channel whose settle has not finished. */
  get inFlight(): number {
    return this.inFlightCount;
  }

  /** A delivery arrived. */
  begin(): void {
    this.inFlightCount++;
  }

  /** A delivery's settle finished (sent, skipped or failed). */
  end(): void {
    this.inFlightCount--;
    if (this.inFlightCount === 0 && this.idleWaiters.length > 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const resolve of waiters) resolve();
    }
  }

  /** Resolves once no delivery of this channel is in flight. */
  whenIdle(): Promise<void> {
    if (this.inFlightCount === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}
