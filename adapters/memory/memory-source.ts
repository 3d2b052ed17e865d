/**
 * A MessageSource over the in-process {@link MemoryBroker}, for the demo and unit tests.
 */
import { ConfigurationError, consoleWarnLogger, type Delivery, type MessageSource } from '../../src';
import { AdapterEvents, type AdapterSurface, checkKnownOptions, type DeliverySink } from '../../src/adapter-kit';
import type { MemoryBroker, MemoryDelivery } from './memory-broker';
import { type MemorySettleAction, type MemorySettleReport, MemorySettler } from './memory-settler';

export type { MemorySettleAction } from './memory-settler';

/** Counters of one {@link MemorySource} since construction; read through `source.stats`. */
export interface MemorySourceStats {
  /** Deliveries handed to the pipeline. */
  readonly deliveries: number;
  /** Settles passed to the broker, by action (after `crash()` the broker ignores them and counts them in its `staleSettles`). */
  readonly acks: number;
  readonly requeues: number;
  readonly rejects: number;
  /** Second settles of one delivery that were ignored (only the first reaches the broker). */
  readonly repeatedSettlesIgnored: number;
}

/** Events of a {@link MemorySource}, each `{ type, … }` as every adapter's. */
export type MemorySourceEvent =
  | { readonly type: 'subscribed'; readonly queue: string; readonly consumerTag: string }
  | { readonly type: 'crashed'; readonly queue: string; readonly returned: number }
  | { readonly type: 'repeated_settle'; readonly action: MemorySettleAction; readonly first: MemorySettleAction };

/** Options of {@link MemorySource}. */
export interface MemorySourceOptions {
  readonly broker: MemoryBroker;
  readonly queue: string;
}

/** Consumes one queue of a {@link MemoryBroker}. Operations surface as every adapter: `settings`, `stats`, `on(listener)`. */
export class MemorySource implements MessageSource, AdapterSurface<Readonly<MemorySourceOptions>, MemorySourceStats, MemorySourceEvent> {
  readonly system = 'memory';

  /** The queue consumed. */
  get destinationName(): string {
    return this.options.queue;
  }
  private consumerTag: string | undefined;
  private crashed = false;
  private readonly counters = { deliveries: 0, acks: 0, requeues: 0, rejects: 0, repeatedSettlesIgnored: 0 };
  private readonly events = new AdapterEvents<MemorySourceEvent>('twophase/memory', consoleWarnLogger);
  /** What every delivery's settler reports back (counters and the repeated-settle event). */
  private readonly report: MemorySettleReport;

  /** @throws ConfigurationError for a missing broker or queue, or an unknown option name */
  constructor(private readonly options: MemorySourceOptions) {
    checkKnownOptions('MemorySource options', options, ['broker', 'queue']);
    if (!options?.broker || typeof options.broker.consume !== 'function') throw new ConfigurationError('MemorySource options.broker must be a MemoryBroker');
    if (typeof options.queue !== 'string' || options.queue.length === 0) throw new ConfigurationError(`MemorySource options.queue must be a non-empty string, got ${JSON.stringify(options.queue)}`);
    const counters = this.counters;
    const events = this.events;
    this.report = {
      broker: options.broker,
      settled: (action) => {
        counters[action === 'ack' ? 'acks' : action === 'requeue' ? 'requeues' : 'rejects']++;
      },
      repeated: (action, first) => {
        counters.repeatedSettlesIgnored++;
        events.emit({ type: 'repeated_settle', action, first });
      },
    };
  }

  /** The options in force (a copy). */
  get settings(): Readonly<MemorySourceOptions> {
    return { broker: this.options.broker, queue: this.options.queue };
  }

  /** A snapshot of the counters since construction. */
  get stats(): MemorySourceStats {
    return { ...this.counters };
  }

  /** Adds a listener of every source event; returns a function removing it. A throwing listener is logged and ignored. */
  on(listener: (event: MemorySourceEvent) => void): () => void {
    return this.events.on(listener);
  }

  async start(sink: DeliverySink, { concurrency }: { readonly concurrency: number }): Promise<void> {
    const consumerTag = this.options.broker.consume(this.options.queue, concurrency, (d) => {
      this.counters.deliveries++;
      void sink.dispatch(this.toDelivery(d));
    });
    this.consumerTag = consumerTag;
    this.events.emit({ type: 'subscribed', queue: this.options.queue, consumerTag });
  }

  async stopIntake(): Promise<void> {
    if (this.consumerTag) this.options.broker.cancel(this.consumerTag);
  }

  /**
   * Ends the subscription. Deliveries still unsettled go back to the queue, flagged redelivered,
   * as a broker does when a consumer's channel closes (AMQP 0-9-1: unacknowledged messages are
   * requeued); a settle of them after close is ignored. Safe to repeat.
   */
  async close(): Promise<void> {
    if (this.consumerTag !== undefined && !this.crashed) this.options.broker.crash(this.consumerTag);
  }

  isConsuming(): boolean {
    return this.consumerTag !== undefined && !this.crashed;
  }

  /**
   * Simulates the death of this consumer's process: the broker redelivers its unsettled messages
   * and ignores its later settles. Returns how many deliveries went back.
   */
  crash(): number {
    this.crashed = true;
    const returned = this.consumerTag ? this.options.broker.crash(this.consumerTag) : 0;
    this.events.emit({ type: 'crashed', queue: this.options.queue, returned });
    return returned;
  }

  private toDelivery(d: MemoryDelivery): Delivery {
    // Each delivery settles at most once (see MemorySettler).
    const settler = new MemorySettler(this.report, d.consumerTag, d.deliveryTag);
    return {
      body: d.message.body,
      headers: d.message.headers,
      messageId: d.message.messageId,
      metadata: {
        system: 'memory',
        destination: this.options.queue,
        redelivered: d.redelivered,
        attributes: { deliveryTag: d.deliveryTag, deliveryCount: d.deliveryCount },
      },
      settler,
    };
  }
}
