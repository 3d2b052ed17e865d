/**
 * A MessageSource over the in-process {@link MemoryBroker}, for the demo and unit tests.
 */
import { ConfigurationError, type Delivery, type MessageSource, type Settler } from '../../src';
import { checkKnownOptions, type DeliverySink } from '../../src/adapter-kit';
import type { MemoryBroker, MemoryDelivery } from './memory-broker';

/** Options of {@link MemorySource}. */
export interface MemorySourceOptions {
  readonly broker: MemoryBroker;
  readonly queue: string;
}

/** Consumes one queue of a {@link MemoryBroker}. */
export class MemorySource implements MessageSource {
  readonly system = 'memory';
  private consumerTag: string | undefined;
  private crashed = false;

  /** @throws ConfigurationError for a missing broker or queue, or an unknown option name */
  constructor(private readonly options: MemorySourceOptions) {
    checkKnownOptions('MemorySource options', options, ['broker', 'queue']);
    if (!options?.broker || typeof options.broker.consume !== 'function') throw new ConfigurationError('MemorySource options.broker must be a MemoryBroker');
    if (typeof options.queue !== 'string' || options.queue.length === 0) throw new ConfigurationError(`MemorySource options.queue must be a non-empty string, got ${JSON.stringify(options.queue)}`);
  }

  async start(sink: DeliverySink, { concurrency }: { readonly concurrency: number }): Promise<void> {
    this.consumerTag = this.options.broker.consume(this.options.queue, concurrency, (d) => {
      void sink.dispatch(this.toDelivery(d));
    });
  }

  async stopIntake(): Promise<void> {
    if (this.consumerTag) this.options.broker.cancel(this.consumerTag);
  }

  async close(): Promise<void> {
    // Nothing to release: the broker lives in the process.
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
    return this.consumerTag ? this.options.broker.crash(this.consumerTag) : 0;
  }

  private toDelivery(d: MemoryDelivery): Delivery {
    const broker = this.options.broker;
    const tag = d.consumerTag;
    // Each delivery settles at most once: only the first call reaches the broker, a repeat is
    // ignored (as the RabbitMQ and Kafka sources do), never an unknown-tag error.
    let settled = false;
    const once = (action: () => void): Promise<void> => {
      if (settled) return Promise.resolve();
      settled = true;
      try {
        action();
        return Promise.resolve();
      } catch (error) {
        return Promise.reject(error);
      }
    };
    const settler: Settler = {
      ack: () => once(() => broker.ack(tag, d.deliveryTag)),
      requeue: (delayMs) => once(() => broker.requeue(tag, d.deliveryTag, delayMs)),
      reject: (info) => once(() => broker.reject(tag, d.deliveryTag, { ...info })),
    };
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
