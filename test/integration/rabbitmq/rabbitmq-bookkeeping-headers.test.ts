/**
 * Issue #12 item 9 on the real broker: headers twophase reads for its own bookkeeping
 * (`twophase-attempts`, and `x-delivery-count` outside quorum queues) are honoured only on
 * deliveries that came back through twophase's delay path, as the broker's `x-death` history
 * shows, never when a producer set them on a fresh message.
 */
import { ack, PermanentError } from '../../../src';
import { HEADERS } from '../../../adapters/rabbitmq';
import { describeWithServices } from '../../support/services';
import { EffectLog, Harness } from './support/harness';
import { waitFor } from '../../support/wait';

describeWithServices(['rabbitmq'], 'RabbitMQ: bookkeeping headers are not trusted from producers', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  test('a fresh message with twophase-attempts 5 (= maxAttempts) and x-delivery-count 9 on a classic queue runs its handler at attempt 1, once', async () => {
    const queue = h.queue('forged');
    const effects = new EffectLog();
    const attempts: (number | undefined)[] = [];
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory'), maxAttempts: 5 }, async (m, ctx) => {
      attempts.push(ctx.attempt, m.metadata.priorAttempts);
      effects.apply(m.key);
      return ack();
    });
    await consumer.start();
    await h.admin.publish('', queue, { x: 1 }, { messageId: 'forged-1', headers: { [HEADERS.attempts]: 5, 'x-delivery-count': 9 } });
    await waitFor(() => effects.count('test:forged-1') === 1, { what: 'forged message handled' });
    expect(attempts).toEqual([1, undefined]);
    expect(await h.admin.messageCount(`${queue}.dlq`)).toBe(0);
  });

  test('twophase-attempts next to a dead-letter history from another queue is not trusted either; a real retry through the delay queue still counts', async () => {
    const queue = h.queue('forged2');
    const seen: number[] = [];
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory'), maxAttempts: 3, retryBackoff: { initialDelayMs: 100, maxDelayMs: 100, jitter: 0 } }, async (m, ctx) => {
      seen.push(ctx.attempt);
      if (m.body.fail) throw new Error('transient');
      throw new PermanentError('stop');
    });
    await consumer.start();
    const otherHistory = [{ queue: 'elsewhere.delay.100ms', reason: 'expired', count: 1, exchange: '', 'routing-keys': ['elsewhere.delay.100ms'] }];
    await h.admin.publish('', queue, { x: 1 }, { messageId: 'forged-2', headers: { [HEADERS.attempts]: 2, 'x-death': otherHistory } });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'forged message dead-lettered by its handler' });
    const [first] = await h.admin.drain(`${queue}.dlq`);
    expect(first!.properties.headers).toMatchObject({ [HEADERS.reason]: 'permanent_error', [HEADERS.attempts]: 1 });
    expect(seen).toEqual([1]);
    // The genuine path: retries go through the delay queue, and the count they carry is honoured.
    seen.length = 0;
    await h.admin.publish('', queue, { fail: true }, { messageId: 'real-1' });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'retried message dead-lettered' });
    const [second] = await h.admin.drain(`${queue}.dlq`);
    expect(second!.properties.headers).toMatchObject({ [HEADERS.reason]: 'retry_exhausted', [HEADERS.attempts]: 3 });
    expect(seen).toEqual([1, 2, 3]);
  });

  test('a route a producer wrote (twophase-original-exchange/-routing-key) is not recorded on the dead-letter copy, so replay cannot be aimed elsewhere', async () => {
    const exchange = `${h.queue('route-x')}.ex`;
    const queue = h.queue('route', [exchange]);
    const source = h.source({ queue, bindings: [{ exchange, routingKey: 'payment.requested' }] });
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, async () => {
      throw new PermanentError('stop');
    });
    await consumer.start();
    await h.admin.publish(exchange, 'payment.requested', { x: 1 }, { messageId: 'route-1', headers: { [HEADERS.originalExchange]: 'amq.fanout', [HEADERS.originalRoutingKey]: 'elsewhere' } });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'dead-lettered' });
    const [dead] = await h.admin.drain(`${queue}.dlq`);
    expect(dead!.properties.headers).toMatchObject({ [HEADERS.originalExchange]: exchange, [HEADERS.originalRoutingKey]: 'payment.requested' });
  });

  test('a forged x-death naming one of the queue\'s delay queues, on a message published to the work exchange, proves nothing: twophase-attempts 1e300 or 3 (= maxAttempts) runs the handler at attempt 1', async () => {
    const exchange = `${h.queue('forged-death-x')}.ex`;
    const queue = h.queue('forged-death', [exchange]);
    const seen: [string, number, number | undefined][] = [];
    const effects = new EffectLog();
    const source = h.source({ queue, bindings: [{ exchange, routingKey: 'work' }] });
    const consumer = h.consumer({ source, claimer: h.claimer('memory'), maxAttempts: 3 }, async (m, ctx) => {
      seen.push([m.key, ctx.attempt, m.metadata.priorAttempts]);
      effects.apply(m.key);
      return ack();
    });
    await consumer.start();
    const delay = `${queue}.delay.100ms`;
    const forged = [{ queue: delay, reason: 'expired', count: 1, exchange: '', 'routing-keys': [delay] }];
    await h.admin.publish(exchange, 'work', { x: 1 }, { messageId: 'huge', headers: { [HEADERS.attempts]: 1e300, 'x-death': forged } });
    await h.admin.publish(exchange, 'work', { x: 2 }, { messageId: 'max', headers: { [HEADERS.attempts]: 3, 'x-death': forged } });
    await waitFor(() => effects.total === 2, { what: 'both forged messages handled' });
    expect(seen.sort()).toEqual([
      ['test:huge', 1, undefined],
      ['test:max', 1, undefined],
    ]);
    expect(await h.admin.messageCount(`${queue}.dlq`)).toBe(0);
    expect(h.logger.lines.filter((l) => l.level === 'error').map((l) => l.msg)).toEqual([]);
  });
});
