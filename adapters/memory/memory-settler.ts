/**
 * The settler of one in-process delivery: the first settle call reaches the {@link MemoryBroker},
 * a repeat is ignored and reported (as the RabbitMQ and Kafka sources do), never an unknown-tag
 * error. One object per delivery, its methods on the prototype (no closures per delivery).
 */
import type { AckInfo, RejectInfo, Settler } from '../../src';
import type { MemoryBroker } from './memory-broker';

/** A settle action of the in-process source. */
export type MemorySettleAction = 'ack' | 'requeue' | 'reject';

/** What a {@link MemorySettler} reports to its source (one object per source). */
export interface MemorySettleReport {
  readonly broker: MemoryBroker;
  /** A settle reached the broker. */
  settled(action: MemorySettleAction): void;
  /** A repeated settle was ignored; `first` is the action that reached the broker. */
  repeated(action: MemorySettleAction, first: MemorySettleAction): void;
}

const RESOLVED: Promise<void> = Promise.resolve();

export class MemorySettler implements Settler {
  private first: MemorySettleAction | undefined = undefined;

  constructor(
    private readonly report: MemorySettleReport,
    private readonly consumerTag: string,
    private readonly deliveryTag: number,
  ) {}

  ack(_info?: AckInfo): Promise<void> {
    if (!this.begin('ack')) return RESOLVED;
    try {
      this.report.broker.ack(this.consumerTag, this.deliveryTag);
    } catch (error) {
      return Promise.reject(error);
    }
    this.report.settled('ack');
    return RESOLVED;
  }

  requeue(delayMs: number): Promise<void> {
    if (!this.begin('requeue')) return RESOLVED;
    try {
      this.report.broker.requeue(this.consumerTag, this.deliveryTag, delayMs);
    } catch (error) {
      return Promise.reject(error);
    }
    this.report.settled('requeue');
    return RESOLVED;
  }

  reject(info: RejectInfo): Promise<void> {
    if (!this.begin('reject')) return RESOLVED;
    try {
      this.report.broker.reject(this.consumerTag, this.deliveryTag, { ...info });
    } catch (error) {
      return Promise.reject(error);
    }
    this.report.settled('reject');
    return RESOLVED;
  }

  /** True for the first settle call; a repeat is reported and ignored. */
  private begin(action: MemorySettleAction): boolean {
    if (this.first !== undefined) {
      this.report.repeated(action, this.first);
      return false;
    }
    this.first = action;
    return true;
  }
}
