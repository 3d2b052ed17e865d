/**
 * A producer with publish rights on the work exchange only tries to steer `twophase dlq replay`
 * into another exchange by writing route headers, both ways it can get a message into the DLQ:
 * a per-message TTL while no consumer runs (the broker dead-letters it with the producer's
 * headers), and a forged `x-death` entry naming a delay queue (RabbitMQ 3.x delivers a
 * client-written `x-death` as it was sent). The operator then runs the real CLI. Nothing may
 * reach the victim exchange's queue, and nothing may be lost: both messages end in the work queue.
 */
import { ack } from '../../../src';
import { HEADERS } from '../../../adapters/rabbitmq';
import { EXIT, runCli } from '../../../adapters/cli';
import { describeWithServices } from '../../support/services';
import { AMQP_URL } from './support/amqp';
import { Harness, TEST_DELAY_TIERS_MS } from './support/harness';
import { waitFor } from '../../support/wait';

function capture(): { io: { stdout: (t: string) => void; stderr: (t: string) => void }; out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { stdout: (t) => out.push(t), stderr: (t) => err.push(t) }, out, err };
}

describeWithServices(['rabbitmq'], 'twophase dlq replay: a producer cannot choose the destination (real broker)', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  test('forged route headers (TTL expiry while no consumer runs, forged x-death): replay sends both to the work queue, none to the victim', async () => {
    const victimExchange = `${h.queue('victim-x')}.ex`;
    const victimQueue = h.queue('victim', [victimExchange]);
    const exchange = `${h.queue('work-x')}.ex`;
    const queue = h.queue('work', [exchange]);
    const ch = await h.admin.ch();
    await ch.assertExchange(victimExchange, 'direct', { durable: false, autoDelete: false });
    await ch.assertQueue(victimQueue, { durable: false });
    await ch.bindQueue(victimQueue, victimExchange, 'steal');
    const forgedRoute = { [HEADERS.originalExchange]: victimExchange, [HEADERS.originalRoutingKey]: 'steal', [HEADERS.originalQueue]: victimQueue };

    const handled: string[] = [];
    const source = h.source({ queue, bindings: [{ exchange, routingKey: 'work' }] });
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, async (m) => {
      handled.push(m.key);
      return ack();
    });
    await consumer.start();
    const brokerMajor = Number(String((await ch.connection as unknown as { serverProperties?: { version?: unknown } }).serverProperties?.version ?? '').split('.')[0]);

    // Way 2, consumer running: a forged x-death naming one of the queue's delay queues, and no
    // idempotency key, so twophase dead-letters it (missing_key).
    const forgedDeath = [{ queue: `${queue}.delay.${TEST_DELAY_TIERS_MS[0]}ms`, reason: 'expired', count: 1, exchange: '', 'routing-keys': [`${queue}.delay.${TEST_DELAY_TIERS_MS[0]}ms`] }];
    await h.admin.publish(exchange, 'work', { n: 2 }, { headers: { ...forgedRoute, 'x-death': forgedDeath } });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'forged x-death message dead-lettered by twophase' });
    const copy = await ch.get(`${queue}.dlq`, { noAck: false });
    if (copy === false) throw new Error('the DLQ copy vanished');
    const copiedDeath = copy.properties.headers?.['x-death'] as { queue?: unknown }[] | undefined;
    if (brokerMajor === 3) {
      // RabbitMQ 3.x hands a client-written x-death to the consumer as it was sent.
      expect(String(copiedDeath?.[0]?.queue)).toBe(forgedDeath[0]!.queue);
    } else {
      expect(brokerMajor).toBeGreaterThanOrEqual(4);
    }
    expect(copy.properties.headers?.[HEADERS.reason]).toBe('missing_key');
    ch.nack(copy, false, true);

    // Way 1, no consumer: a 1 ms per-message TTL; the broker dead-letters it with the headers as sent.
    await consumer.stop();
    await source.close();
    await h.admin.publish(exchange, 'work', { n: 1 }, { messageId: 'ttl-1', expiration: '1', headers: { ...forgedRoute, 'idempotency-key': 'ttl-1', [HEADERS.reason]: 'retry_exhausted' } });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 2, { what: 'expired message dead-lettered by the broker' });

    const dry = capture();
    expect(await runCli(['dlq', 'replay', `${queue}.dlq`, '--url', AMQP_URL, '--dry-run'], { io: dry.io })).toBe(EXIT.ok);
    const dryText = dry.err.join('');
    expect(dryText).not.toContain(`→ exchange "${victimExchange}"`);
    expect(dryText).toMatch(new RegExp(`would replay ttl-1 .*→ queue "${queue.replace(/\./g, '\\.')}" \\(default exchange\\).*recorded route refused`));

    const real = capture();
    expect(await runCli(['dlq', 'replay', `${queue}.dlq`, '--url', AMQP_URL], { io: real.io })).toBe(EXIT.ok);
    expect(real.out.join('')).toMatch(/^2 replayed, 0 skipped, 0 failed/);
    expect(real.err.join('')).toMatch(/replayed ttl-1 .*recorded route refused/);
    await waitFor(async () => (await h.admin.messageCount(queue)) === 2, { what: 'both messages back in the work queue' });
    expect(await h.admin.messageCount(victimQueue)).toBe(0);
    expect(await h.admin.messageCount(`${queue}.dlq`)).toBe(0);
    expect(handled).toEqual([]);
  });
});
