/**
 * Broker-side faults on the real RabbitMQ: connections closed by the broker mid-handler (S01),
 * double settles (S02), quorum queues and delivery limits (S04), broker-cancelled consumers
 * (S07). Claims use the in-memory claimer here; rabbitmq-redis.test.ts repeats the key ones with
 * the Redis claimer.
 */
import { ack, type Delivery, type DeliveryResult, RetryableError } from '../../../src';
import { type DeliverySink, type PreparedClaim, settledSubmission } from '../../../src/adapter-kit';
import { ConsumerCancelledError, HEADERS, type RabbitMqSourceEvents } from '../../../adapters/rabbitmq';
import { describeWithServices } from '../../support/services';
import { closeConnectionsNamed, requireRabbitmqctl } from './support/broker-control';
import { applying, EffectLog, Harness } from './support/harness';
import { gate, waitFor, work } from '../../support/wait';

describeWithServices(['rabbitmq'], 'RabbitMQ faults (real broker)', () => {
  let h: Harness;
  let ctl = false;
  beforeAll(async () => {
    ctl = await requireRabbitmqctl();
  });
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  test('S01: connection killed mid-handler → reconnect on generation 2, the late ack is skipped (never sent on the new channel), the redelivery is acked as a duplicate; effect once', async () => {
    if (!ctl) return;
    const queue = h.queue('s01');
    const connectionName = `${queue}.conn`;
    const effects = new EffectLog();
    const finish = gate();
    let handlerRuns = 0;
    const source = h.source({ queue, connectionName });
    const events: string[] = [];
    source.on('channel_closed', (e) => events.push(`closed:${e.generation}`));
    source.on('subscribed', (e) => events.push(`subscribed:${e.generation}`));
    const stale: RabbitMqSourceEvents['stale_settle'][] = [];
    source.on('stale_settle', (e) => stale.push(e));
    const consumer = h.consumer({ source, claimer: h.claimer('memory'), concurrency: 1 }, async (m) => {
      handlerRuns++;
      await finish.promise;
      effects.apply(m.key);
      return ack();
    });
    await consumer.start();
    await h.admin.publish('', queue, { pay: 1 }, { messageId: 's01-1' });
    await waitFor(() => handlerRuns === 1, { what: 'handler started' });
    expect(await closeConnectionsNamed(connectionName)).toBe(2); // consuming and publishing connections
    await waitFor(() => events.includes('subscribed:2'), { what: 'resubscribed on generation 2' });
    expect(consumer.health().ready).toBe(true);
    finish.open();
    await waitFor(() => source.stats.acks === 1, { what: 'redelivery acked as duplicate' });
    expect(effects.count('test:s01-1')).toBe(1);
    expect(handlerRuns).toBe(1);
    expect(stale).toEqual([expect.objectContaining({ generation: 1, action: 'ack', messageId: 's01-1' })]);
    expect(source.stats.staleSettlesSkipped).toBe(1);
    // The new channel was never closed (a stale tag sent on it would close it with 406).
    expect(events.filter((e) => e.startsWith('closed:'))).toEqual(['closed:1']);
    expect(source.stats.generation).toBe(2);
    expect(await h.admin.messageCount(queue)).toBe(0);
  });

  test('connections closed twice during 100 in-flight handlers → reconnect, nothing lost, no duplicated effect', async () => {
    if (!ctl) return;
    const queue = h.queue('closeall');
    const connectionName = `${queue}.conn`;
    const effects = new EffectLog();
    const source = h.source({ queue, connectionName });
    // Handlers that start after 10 (then 40) effects hold until the close went through, so each
    // close finds handlers in flight however long rabbitmqctl takes on a busy machine.
    const firstClose = gate();
    const secondClose = gate();
    const consumer = h.consumer({ source, claimer: h.claimer('memory'), concurrency: 10 }, async (m) => {
      await work(200 + Math.floor(Math.random() * 200));
      if (effects.keys >= 40) await secondClose.promise;
      else if (effects.keys >= 10) await firstClose.promise;
      effects.apply(m.key);
      return ack();
    });
    await consumer.start();
    for (let i = 0; i < 100; i++) await h.admin.publish('', queue, { i }, { messageId: `c-${i}` });
    await waitFor(() => effects.keys >= 10, { what: 'some effects applied' });
    expect(await closeConnectionsNamed(connectionName)).toBe(2); // consuming and publishing connections
    firstClose.open();
    await waitFor(() => source.stats.reconnects === 1 && source.isConsuming(), { what: 'reconnected' });
    await waitFor(() => effects.keys >= 40, { what: 'progressing after the reconnect' });
    expect(await closeConnectionsNamed(connectionName)).toBe(2); // consuming and publishing connections
    secondClose.open();
    await waitFor(() => source.stats.reconnects === 2 && source.isConsuming(), { what: 'reconnected again' });
    await waitFor(() => effects.keys === 100, { what: 'every key applied', timeoutMs: 40_000 });
    await waitFor(async () => (await h.admin.messageCount(queue)) === 0 && consumer.health().inFlight === 0, { what: 'queue drained' });
    expect(effects.duplicated()).toEqual([]);
    expect(effects.total).toBe(100);
    expect(await h.admin.messageCount(`${queue}.dlq`)).toBe(0);
    expect(source.stats.staleSettlesSkipped).toBeGreaterThan(0);
    expect(consumer.health().ready).toBe(true);
  });

  test('S02: prefetch 2, A slow and B failing → B is requeued alone (no allUpTo), A is not redelivered and acked once; the channel stays open', async () => {
    const queue = h.queue('s02');
    const effects = new EffectLog();
    const deliveries = new Map<string, number>();
    const releaseA = gate();
    let bFailures = 0;
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory'), concurrency: 2, maxAttempts: 5 }, async (m) => {
      deliveries.set(m.key, (deliveries.get(m.key) ?? 0) + 1);
      if (m.key === 'test:A') {
        await releaseA.promise;
      } else if (bFailures++ === 0) {
        throw new RetryableError('B fails at once');
      }
      effects.apply(m.key);
      return ack();
    });
    await consumer.start();
    await h.admin.publish('', queue, { m: 'A' }, { messageId: 'A' });
    await h.admin.publish('', queue, { m: 'B' }, { messageId: 'B' });
    await waitFor(() => effects.count('test:B') === 1, { what: 'B retried and applied' });
    releaseA.open();
    await waitFor(() => effects.count('test:A') === 1, { what: 'A applied' });
    await waitFor(() => source.stats.acks === 2, { what: 'A and B acked' });
    expect(deliveries.get('test:A')).toBe(1);
    expect(deliveries.get('test:B')).toBe(2);
    expect(source.stats.requeues.retry).toBe(1);
    expect(source.stats).toMatchObject({ generation: 1, channelsClosed: 0, staleSettlesSkipped: 0 });
  });

  test('S02: double-settle guard — ack, ack and reject on one delivery put one basic.ack on the wire; the channel stays open', async () => {
    const queue = h.queue('s02-guard');
    const settled: string[] = [];
    const sink: DeliverySink = {
      submit: (delivery) => settledSubmission(sink.dispatch(delivery)),
      async dispatch(delivery: Delivery): Promise<DeliveryResult> {
        await delivery.settler.ack({ duplicate: false });
        await delivery.settler.ack({ duplicate: false }); // the timeout/cancel path racing the success path
        await delivery.settler.reject({ reason: 'late', attempts: 1 });
        settled.push(String(delivery.messageId));
        return { action: 'ack', outcome: 'committed', handled: true, durationMs: 0 };
      },
      async claimBatch(deliveries: readonly Delivery[]): Promise<PreparedClaim[]> {
        return deliveries.map(() => ({ kind: 'skipped' }));
      },
    };
    const source = h.source({ queue });
    await source.start(sink, { concurrency: 2 });
    for (const id of ['g1', 'g2', 'g3']) await h.admin.publish('', queue, {}, { messageId: id });
    await waitFor(() => settled.length === 3, { what: 'three deliveries settled' });
    // A second basic.ack of a tag would close the channel with 406 PRECONDITION_FAILED.
    await h.admin.publish('', queue, {}, { messageId: 'g4' });
    await waitFor(() => settled.length === 4, { what: 'channel still delivering' });
    expect(source.stats).toMatchObject({ acks: 4, rejects: 0, repeatedSettlesIgnored: 8, channelsClosed: 0, generation: 1 });
    expect(await h.admin.messageCount(queue)).toBe(0);
    expect(await h.admin.messageCount(`${queue}.dlq`)).toBe(0);
    await source.stopIntake();
  });

  test('S04 (quorum): poison message → exactly maxAttempts handler calls, then the SDK dead-letters it; retries never burn x-delivery-limit', async () => {
    const queue = h.queue('s04q');
    const calls: number[] = [];
    const source = h.source({ queue, queueType: 'quorum', deliveryLimit: 2 });
    const consumer = h.consumer({ source, claimer: h.claimer('memory'), maxAttempts: 4, retryBackoff: { initialDelayMs: 100, maxDelayMs: 100, jitter: 0 } }, async (_m, ctx) => {
      calls.push(ctx.attempt);
      throw new Error('always fails');
    });
    await consumer.start();
    await h.admin.publish('', queue, { q: 1 }, { messageId: 'q-poison' });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'poison message in the DLQ' });
    // 4 attempts > the delivery limit of 2: the retries went through the delay queue, not nack.
    expect(calls).toEqual([1, 2, 3, 4]);
    const [dead] = await h.admin.drain(`${queue}.dlq`);
    expect(dead!.properties.headers?.[HEADERS.reason]).toBe('retry_exhausted');
    expect(dead!.properties.headers?.[HEADERS.attempts]).toBe(4);
  });

  test('S04 (quorum): a crash loop is stopped by the broker at x-delivery-limit; x-delivery-count feeds the attempt number only', async () => {
    const queue = h.queue('s04q-limit');
    const attempts: number[] = [];
    const prior: (number | undefined)[] = [];
    for (let round = 0; round < 3; round++) {
      const source = h.source({ queue, queueType: 'quorum', deliveryLimit: 2 });
      const started = gate();
      const consumer = h.consumer({ source, claimer: h.claimer('memory'), maxAttempts: 10, shutdownTimeoutMs: 100 }, async (m, ctx) => {
        attempts.push(ctx.attempt);
        prior.push(m.metadata.priorAttempts);
        started.open();
        await work(30_000, ctx.signal);
        return ack();
      });
      await consumer.start();
      if (round === 0) await h.admin.publish('', queue, { q: 1 }, { messageId: 'q-crash' });
      await started.promise;
      await source.destroy(); // a crash: the broker returns the unacked message
    }
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'broker dead-lettered at the delivery limit' });
    expect(attempts).toEqual([1, 2, 3]);
    expect(prior).toEqual([undefined, 1, 2]);
    const [dead] = await h.admin.drain(`${queue}.dlq`);
    const deaths = dead!.properties.headers?.['x-death'] as { reason: string; queue: string }[];
    expect(deaths[0]).toMatchObject({ queue, reason: 'delivery_limit' });
    expect(await h.admin.messageCount(queue)).toBe(0);
  });

  test.each(['resubscribe', 'stop'] as const)('S07: queue deleted while a handler runs → no TypeError, "cancelled" event, not ready; the in-flight handler commits; then onCancel=%s', async (onCancel) => {
    const queue = h.queue(`s07-${onCancel}`);
    const effects = new EffectLog();
    const finish = gate();
    let started = 0;
    const source = h.source({ queue, onCancel });
    const cancelled: RabbitMqSourceEvents['cancelled'][] = [];
    const failed: Error[] = [];
    source.on('cancelled', (e) => cancelled.push(e));
    source.on('failed', (e) => failed.push(e.error));
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, async (m) => {
      started++;
      if (m.key === 'test:s07-1') await finish.promise;
      effects.apply(m.key);
      return ack();
    });
    await consumer.start();
    await h.admin.publish('', queue, {}, { messageId: 's07-1' });
    await waitFor(() => started === 1, { what: 'handler running' });
    await h.admin.deleteQueue(queue);
    await waitFor(() => cancelled.length === 1, { what: 'cancelled event' });
    expect(cancelled[0]).toMatchObject({ generation: 1, queue, inFlight: 1 });
    expect(source.isConsuming()).toBe(false);
    expect(consumer.health().ready).toBe(false);
    expect(source.state).toBe(onCancel === 'stop' ? 'failed' : 'cancelled');
    finish.open();
    await waitFor(() => effects.count('test:s07-1') === 1, { what: 'in-flight handler finished and committed' });
    if (onCancel === 'resubscribe') {
      await waitFor(() => source.isConsuming(), { what: 'resubscribed' });
      expect(await h.admin.exists(queue)).toBe(true); // re-declared
      expect(consumer.health().ready).toBe(true);
      expect(source.stats.generation).toBe(1); // same channel: the in-flight ack stayed valid
      await h.admin.publish('', queue, {}, { messageId: 's07-2' });
      await waitFor(() => effects.count('test:s07-2') === 1, { what: 'consuming again' });
    } else {
      expect(failed).toHaveLength(1);
      expect(failed[0]).toBeInstanceOf(ConsumerCancelledError);
      expect(source.error).toBe(failed[0]);
      await waitFor(() => source.stats.acks === 1, { what: 'in-flight delivery settled' });
      expect(source.isConsuming()).toBe(false);
      expect(consumer.health()).toMatchObject({ live: false, state: 'failed' }); // a probe restarts it
      expect(await h.admin.exists(queue)).toBe(false);
    }
    expect(source.stats.cancels).toBe(1);
  });

  test("S07 (check mode): after the queue is deleted the source waits, and resubscribes once an operator re-creates it", async () => {
    const queue = h.queue('s07-check');
    const declarer = h.source({ queue });
    const declaring = h.consumer({ source: declarer, claimer: h.claimer('memory') }, async () => ack());
    await declaring.start();
    await declaring.stop();
    const source = h.source({ queue, topology: 'check' });
    const effects = new EffectLog();
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, applying(effects));
    await consumer.start();
    await h.admin.deleteQueue(queue);
    await waitFor(() => source.stats.cancels === 1, { what: 'cancelled' });
    await waitFor(() => h.logger.has('subscribing failed; trying again'), { what: 'waiting for the queue' });
    expect(await h.admin.exists(queue)).toBe(false);
    expect(source.isConsuming()).toBe(false);
    // The operator re-creates the queue with the same arguments.
    const again = h.source({ queue });
    const redeclare = h.consumer({ source: again, claimer: h.claimer('memory') }, async () => ack());
    await redeclare.start();
    await redeclare.stop();
    await waitFor(() => source.isConsuming(), { what: 'resubscribed in check mode' });
    await h.admin.publish('', queue, {}, { messageId: 'back' });
    await waitFor(() => effects.count('test:back') === 1, { what: 'consuming again' });
  });
});
