/**
 * An in-process message broker: queues with ack, delayed requeue, reject to a dead-letter
 * queue, redelivery of unsettled messages when a consumer is dropped (a simulated crash), a
 * redelivered flag and a delivery count.
 *
 * It is the embedded default for the demo and unit tests. It proves nothing about a real broker.
 */
import { randomUUID } from 'node:crypto';

/** A message as published. */
export interface MemoryMessageInput {
  readonly body: Buffer | string;
  readonly headers?: Record<string, unknown>;
  readonly messageId?: string;
}

/** A message as the broker keeps it. */
export interface StoredMessage {
  readonly id: string;
  readonly body: Buffer;
  readonly headers: Record<string, unknown>;
  readonly messageId?: string;
  /** Deliveries made so far. */
  deliveryCount: number;
  /** True once the message was delivered and came back without an ack. */
  redelivered: boolean;
}

/** One delivery to one consumer. */
export interface MemoryDelivery {
  readonly message: StoredMessage;
  readonly deliveryTag: number;
  readonly consumerTag: string;
  readonly redelivered: boolean;
  readonly deliveryCount: number;
}

/** A dead-lettered message with the reason given at reject. */
export interface DeadLetter {
  readonly message: StoredMessage;
  readonly reason: Record<string, unknown>;
}

interface Subscription {
  readonly tag: string;
  readonly queue: string;
  readonly prefetch: number;
  readonly onMessage: (delivery: MemoryDelivery) => void;
  readonly unacked: Map<number, StoredMessage>;
  active: boolean;
}

/** A FIFO with O(1) push, shift and unshift (head index into an array, compacted lazily). */
class Fifo<T> {
  private items: T[] = [];
  private head = 0;
  get length(): number {
    return this.items.length - this.head;
  }
  push(item: T): void {
    this.items.push(item);
  }
  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head]!;
    this.items[this.head++] = undefined as T;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }
  unshift(...items: T[]): void {
    this.items = [...items, ...this.items.slice(this.head)];
    this.head = 0;
  }
}

interface QueueState {
  readonly ready: Fifo<StoredMessage>;
  readonly deadLetters: DeadLetter[];
}

/** Counters kept by the broker. */
export interface MemoryBrokerStats {
  published: number;
  delivered: number;
  acked: number;
  requeued: number;
  rejected: number;
  /** Settles of a delivery whose consumer was already dropped: ignored, as a real broker would refuse them. */
  staleSettles: number;
}

/** Thrown for settling an unknown delivery (the in-process analogue of AMQP's 406). */
export class UnknownDeliveryError extends Error {
  constructor(tag: number) {
    super(`unknown delivery tag ${tag}`);
    this.name = 'UnknownDeliveryError';
  }
}

export class MemoryBroker {
  private readonly queues = new Map<string, QueueState>();
  private readonly subscriptions = new Map<string, Subscription>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private nextTag = 1;
  private scheduled = false;
  readonly stats: MemoryBrokerStats = { published: 0, delivered: 0, acked: 0, requeued: 0, rejected: 0, staleSettles: 0 };

  /** Adds a message at the tail of `queue`. */
  publish(queue: string, input: MemoryMessageInput): StoredMessage {
    const message: StoredMessage = {
      id: randomUUID(),
      body: typeof input.body === 'string' ? Buffer.from(input.body) : input.body,
      headers: { ...(input.headers ?? {}) },
      messageId: input.messageId,
      deliveryCount: 0,
      redelivered: false,
    };
    this.queue(queue).ready.push(message);
    this.stats.published++;
    this.schedule();
    return message;
  }

  /**
   * Subscribes to `queue` with at most `prefetch` unsettled deliveries. Returns the consumer tag.
   * `onMessage` is called asynchronously, never inside `publish`.
   */
  consume(queue: string, prefetch: number, onMessage: (delivery: MemoryDelivery) => void): string {
    const tag = `ctag-${randomUUID()}`;
    this.queue(queue);
    this.subscriptions.set(tag, { tag, queue, prefetch, onMessage, unacked: new Map(), active: true });
    this.schedule();
    return tag;
  }

  /** Stops new deliveries to a consumer; its unsettled deliveries stay settleable. */
  cancel(consumerTag: string): void {
    const sub = this.subscriptions.get(consumerTag);
    if (sub) sub.active = false;
  }

  /**
   * Drops a consumer as if its process died: every unsettled delivery goes back to the head of
   * its queue, flagged redelivered, and later settles of those deliveries are ignored.
   */
  crash(consumerTag: string): number {
    const sub = this.subscriptions.get(consumerTag);
    if (!sub) return 0;
    this.subscriptions.delete(consumerTag);
    const back = [...sub.unacked.values()];
    for (const m of back) m.redelivered = true;
    this.queue(sub.queue).ready.unshift(...back);
    sub.unacked.clear();
    this.schedule();
    return back.length;
  }

  /** Acknowledges a delivery. A delivery of a dropped consumer is ignored and counted. */
  ack(consumerTag: string, deliveryTag: number): void {
    const taken = this.take(consumerTag, deliveryTag);
    if (taken) this.stats.acked++;
  }

  /** Puts a delivery back after `delayMs` ms at the tail of its queue (0: at once). */
  requeue(consumerTag: string, deliveryTag: number, delayMs: number): void {
    const sub = this.subscriptions.get(consumerTag);
    const message = this.take(consumerTag, deliveryTag);
    if (!message || !sub) return;
    this.stats.requeued++;
    message.redelivered = true;
    const back = () => {
      this.queue(sub.queue).ready.push(message);
      this.schedule();
    };
    if (delayMs <= 0) back();
    else {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        back();
      }, delayMs);
      this.timers.add(timer);
    }
  }

  /** Moves a delivery to its queue's dead-letter list with `reason`. */
  reject(consumerTag: string, deliveryTag: number, reason: Record<string, unknown>): void {
    const sub = this.subscriptions.get(consumerTag);
    const message = this.take(consumerTag, deliveryTag);
    if (!message || !sub) return;
    this.stats.rejected++;
    this.queue(sub.queue).deadLetters.push({ message, reason });
  }

  /** Messages waiting in `queue` (not counting unsettled or delayed ones). */
  depth(queue: string): number {
    return this.queue(queue).ready.length;
  }

  /** Unsettled deliveries of `queue` across consumers, plus delayed requeues of the whole broker. */
  pending(queue: string): number {
    let n = 0;
    for (const sub of this.subscriptions.values()) if (sub.queue === queue) n += sub.unacked.size;
    return n + this.timers.size;
  }

  /** True when `queue` has nothing ready, unsettled or delayed. */
  isDrained(queue: string): boolean {
    return this.depth(queue) === 0 && this.pending(queue) === 0;
  }

  /** Dead letters of `queue`. */
  deadLetters(queue: string): readonly DeadLetter[] {
    return this.queue(queue).deadLetters;
  }

  /** Cancels delayed requeues and forgets every consumer. */
  close(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.subscriptions.clear();
  }

  private take(consumerTag: string, deliveryTag: number): StoredMessage | undefined {
    const sub = this.subscriptions.get(consumerTag);
    const message = sub?.unacked.get(deliveryTag);
    if (!sub || !message) {
      if (!sub) {
        this.stats.staleSettles++;
        return undefined;
      }
      throw new UnknownDeliveryError(deliveryTag);
    }
    sub.unacked.delete(deliveryTag);
    this.schedule();
    return message;
  }

  private queue(name: string): QueueState {
    let q = this.queues.get(name);
    if (!q) {
      q = { ready: new Fifo<StoredMessage>(), deadLetters: [] };
      this.queues.set(name, q);
    }
    return q;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  /** Hands ready messages to active consumers round-robin, within each one's prefetch. */
  private pump(): void {
    const subs = [...this.subscriptions.values()].filter((s) => s.active);
    let progressed = true;
    while (progressed) {
      progressed = false;
      for (const sub of subs) {
        if (!sub.active || sub.unacked.size >= sub.prefetch) continue;
        const message = this.queue(sub.queue).ready.shift();
        if (!message) continue;
        message.deliveryCount++;
        const deliveryTag = this.nextTag++;
        sub.unacked.set(deliveryTag, message);
        this.stats.delivered++;
        progressed = true;
        const delivery: MemoryDelivery = {
          message,
          deliveryTag,
          consumerTag: sub.tag,
          redelivered: message.redelivered,
          deliveryCount: message.deliveryCount,
        };
        sub.onMessage(delivery);
      }
    }
  }
}
