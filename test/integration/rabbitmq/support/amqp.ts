/**
 * Direct amqplib access for the RabbitMQ suites: unique names, publishing, reading queues and
 * deleting everything a test declared.
 */
import { randomBytes } from 'node:crypto';
import amqp, { type Channel, type ChannelModel, type GetMessage, type Options } from 'amqplib';

export const AMQP_URL = process.env.TWOPHASE_AMQP_URL ?? `amqp://guest:guest@127.0.0.1:${process.env.RABBITMQ_PORT ?? 5672}`;

/** A queue name no other test uses. */
export function uniqueName(prefix: string): string {
  return `tp-test.${prefix}.${Date.now().toString(36)}.${randomBytes(3).toString('hex')}`;
}

/** One admin connection per suite: publish, inspect and clean up. */
export class AmqpAdmin {
  private model: ChannelModel | undefined;
  private channel: Channel | undefined;
  private readonly declared = new Set<string>();
  private readonly exchanges = new Set<string>();

  async open(): Promise<void> {
    this.model = await amqp.connect(AMQP_URL, { clientProperties: { connection_name: 'twophase-test-admin' } });
    this.model.on('error', () => undefined);
  }

  /** A confirm channel; re-opened when a previous operation closed it. */
  async ch(): Promise<amqp.ConfirmChannel> {
    if (!this.model) await this.open();
    if (!this.channel) {
      const channel = await this.model!.createConfirmChannel();
      channel.on('error', () => undefined);
      channel.on('close', () => {
        if (this.channel === channel) this.channel = undefined;
      });
      this.channel = channel;
    }
    return this.channel as amqp.ConfirmChannel;
  }

  /** Remembers queues (and their twophase companions) and exchanges to delete in `cleanup`. */
  track(queue: string, options: { delayTiersMs?: readonly number[]; exchanges?: string[] } = {}): void {
    this.declared.add(queue);
    this.declared.add(`${queue}.dlq`);
    this.exchanges.add(`${queue}.dlx`);
    for (const t of options.delayTiersMs ?? [1000, 5000, 15000, 60000, 300000]) this.declared.add(`${queue}.delay.${t}ms`);
    for (const e of options.exchanges ?? []) this.exchanges.add(e);
  }

  async publish(exchange: string, routingKey: string, body: unknown, options: Options.Publish = {}): Promise<void> {
    const ch = await this.ch();
    const content = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
    await new Promise<void>((resolve, reject) => {
      ch.publish(exchange, routingKey, content, { persistent: true, contentType: 'application/json', ...options }, (err) => (err ? reject(err) : resolve()));
    });
  }

  async messageCount(queue: string): Promise<number> {
    const ch = await this.ch();
    return (await ch.checkQueue(queue)).messageCount;
  }

  /** True when the queue exists. */
  async exists(queue: string): Promise<boolean> {
    const model = this.model!;
    const probe = await model.createChannel();
    probe.on('error', () => undefined);
    try {
      await probe.checkQueue(queue);
      await probe.close();
      return true;
    } catch {
      return false;
    }
  }

  /** Takes every message currently in `queue` (acked: removed). */
  async drain(queue: string): Promise<GetMessage[]> {
    const ch = await this.ch();
    const out: GetMessage[] = [];
    for (;;) {
      const m = await ch.get(queue, { noAck: true });
      if (!m) return out;
      out.push(m);
    }
  }

  async deleteQueue(queue: string): Promise<void> {
    const ch = await this.ch();
    await ch.deleteQueue(queue);
  }

  /** Deletes everything tracked, then closes. */
  async cleanup(): Promise<void> {
    if (!this.model) {
      if (this.declared.size === 0 && this.exchanges.size === 0) return;
      await this.open();
    }
    for (const q of this.declared) {
      const ch = await this.ch();
      await ch.deleteQueue(q).catch(() => undefined);
    }
    for (const e of this.exchanges) {
      const ch = await this.ch();
      await ch.deleteExchange(e).catch(() => undefined);
    }
    this.declared.clear();
    this.exchanges.clear();
    const model = this.model!;
    this.model = undefined;
    this.channel = undefined;
    await model.close().catch(() => undefined);
  }
}
