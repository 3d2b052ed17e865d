/**
 * A failed RabbitMqSource start() leaves no topology behind that it created (real broker): a work
 * queue without a dead-letter exchange is refused before anything is declared; a step that fails
 * later (a binding's exchange exists with another type) removes the queues and exchanges that
 * start() had created, and keeps those that existed before.
 */
import amqp from 'amqplib';
import { ConfigurationError, ack } from '../../../src';
import { delayQueueName } from '../../../adapters/rabbitmq';
import { describeWithServices } from '../../support/services';
import { AMQP_URL } from './support/amqp';
import { Harness, TEST_DELAY_TIERS_MS } from './support/harness';

describeWithServices(['rabbitmq'], 'RabbitMqSource: a failed start() leaves no topology it created (real broker)', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  async function existing(queue: string): Promise<string[]> {
    const names = [queue, `${queue}.dlq`, ...TEST_DELAY_TIERS_MS.map((t) => delayQueueName(queue, t))];
    const found: string[] = [];
    for (const name of names) if (await h.admin.exists(name)) found.push(name);
    return found;
  }

  async function exchangeExists(name: string): Promise<boolean> {
    const probe = await amqp.connect(AMQP_URL);
    probe.on('error', () => undefined);
    try {
      const channel = await probe.createChannel();
      channel.on('error', () => undefined);
      await channel.checkExchange(name);
      return true;
    } catch {
      return false;
    } finally {
      await probe.close().catch(() => undefined);
    }
  }

  test('a work queue without a dead-letter exchange is refused, and no .dlq, .dlx or delay queue is left behind', async () => {
    const queue = h.queue('no-dlx');
    const ch = await h.admin.ch();
    await ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'classic' } });
    const consumer = h.consumer({ source: h.source({ queue }), claimer: h.claimer('memory') }, async () => ack());
    const error = await consumer.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toMatch(/has no dead-letter exchange/);
    expect(await existing(queue)).toEqual([queue]);
    expect(await exchangeExists(`${queue}.dlx`)).toBe(false);
  });

  test('a later step that fails (binding exchange of another type) removes what start() created and keeps what existed', async () => {
    const queue = h.queue('late-fail');
    const exchange = `${queue}.topic`;
    h.admin.track(queue, { exchanges: [exchange] });
    const ch = await h.admin.ch();
    await ch.assertExchange(exchange, 'topic', { durable: true });
    // Existed before: the DLQ (with the arguments twophase declares), so it must stay.
    await ch.assertQueue(`${queue}.dlq`, { durable: true, arguments: { 'x-queue-type': 'classic' } });
    const source = h.source({ queue, bindings: [{ exchange, routingKey: 'k', exchangeType: 'direct' }] });
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, async () => ack());
    const error = await consumer.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toMatch(new RegExp(`exchange "${exchange.replace(/\./g, '\\.')}" exists with other arguments`));
    expect(await existing(queue)).toEqual([`${queue}.dlq`]);
    expect(await exchangeExists(`${queue}.dlx`)).toBe(false);
    expect(await exchangeExists(exchange)).toBe(true);
  });
});
