/**
 * The RabbitMQ source on the real broker: topology, settlement per the core table, duplicates,
 * retries through the delay queues, dead-lettering with reason headers, busy requeues.
 */
import { ack, ConfigurationError, PermanentError, reject } from '../../../src';
import { HEADERS } from '../../../adapters/rabbitmq';
import { describeWithServices } from '../../support/services';
import { applying, EffectLog, Harness } from './support/harness';
import { gate, waitFor } from '../../support/wait';

describeWithServices(['rabbitmq'], 'RabbitMQ source (real broker)', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  test('declares the topology and consumes: each key applied once although published three times', async () => {
    const queue = h.queue('dups');
    const effects = new EffectLog();
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, applying(effects));
    await consumer.start();
    expect(source.isConsuming()).toBe(true);
    expect(consumer.health().ready).toBe(true);
    for (let i = 0; i < 20; i++) {
      for (let copy = 0; copy < 3; copy++) await h.admin.publish('', queue, { i }, { messageId: `m-${i}`, headers: { 'idempotency-key': `k-${i}` } });
    }
    await waitFor(() => source.stats.acks === 60, { what: 'all 60 deliveries acked' });
    expect(effects.keys).toBe(20);
    expect(effects.duplicated()).toEqual([]);
    expect(await h.admin.messageCount(queue)).toBe(0);
    expect(await h.admin.messageCount(`${queue}.dlq`)).toBe(0);
    expect(source.stats.generation).toBe(1);
  });

  test('batchClaims: deliveries of one turn are claimed with one claimBatch call; duplicates still give one effect', async () => {
    const queue = h.queue('batch');
    const effects = new EffectLog();
    const claimer = h.claimer('memory');
    let batches = 0;
    const claimMany = claimer.claimMany!.bind(claimer);
    (claimer as { claimMany: typeof claimMany }).claimMany = (requests) => {
      batches++;
      return claimMany(requests);
    };
    const source = h.source({ queue, batchClaims: true });
    // Fill the queue before consuming, so deliveries arrive in bursts.
    const ch = await h.admin.ch();
    await ch.assertExchange(`${queue}.dlx`, 'direct', { durable: true });
    await ch.assertQueue(queue, { durable: true, arguments: source.topology.workQueue.arguments });
    for (let i = 0; i < 100; i++) await h.admin.publish('', queue, { i }, { messageId: `b-${i % 40}` });
    const consumer = h.consumer({ source, claimer, concurrency: 50 }, applying(effects));
    await consumer.start();
    await waitFor(() => effects.keys === 40 && source.stats.acks === 100, { what: 'all processed' });
    await waitFor(async () => (await h.admin.messageCount(queue)) === 0, { what: 'queue drained' });
    expect(effects.duplicated()).toEqual([]);
    expect(batches).toBeGreaterThan(0);
    expect(batches).toBeLessThan(100);
  });

  test('missing key: dead-lettered with reason missing_key, handler never runs', async () => {
    const queue = h.queue('nokey');
    let runs = 0;
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, async () => {
      runs++;
      return ack();
    });
    await consumer.start();
    await h.admin.publish('', queue, { x: 1 });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'message in DLQ' });
    const [dead] = await h.admin.drain(`${queue}.dlq`);
    expect(dead!.properties.headers?.[HEADERS.reason]).toBe('missing_key');
    expect(runs).toBe(0);
  });

  test('S04 (classic): poison message → handler called exactly maxAttempts times with backoff, then DLQ with reason headers', async () => {
    const exchange = `${h.queue('poison-x')}.ex`;
    const queue = h.queue('poison', [exchange]);
    const calls: number[] = [];
    const source = h.source({ queue, bindings: [{ exchange, routingKey: 'orders.created' }] });
    const consumer = h.consumer({ source, claimer: h.claimer('memory'), maxAttempts: 3, retryBackoff: { initialDelayMs: 100, maxDelayMs: 100, jitter: 0 } }, async (_m, ctx) => {
      calls.push(Date.now());
      expect(ctx.attempt).toBe(calls.length);
      throw new Error(`boom ${'x'.repeat(3000)}`);
    });
    await consumer.start();
    await h.admin.publish(exchange, 'orders.created', { order: 1 }, { messageId: 'poison-1' });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'poison message in the DLQ' });
    expect(calls).toHaveLength(3);
    // Backoff, not a tight loop: each retry waited for the 100 ms delay tier.
    for (let i = 1; i < calls.length; i++) expect(calls[i]! - calls[i - 1]!).toBeGreaterThanOrEqual(90);
    const [dead] = await h.admin.drain(`${queue}.dlq`);
    const headers = dead!.properties.headers!;
    expect(headers[HEADERS.reason]).toBe('retry_exhausted');
    expect(headers[HEADERS.attempts]).toBe(3);
    expect(headers[HEADERS.originalExchange]).toBe(exchange);
    expect(headers[HEADERS.originalRoutingKey]).toBe('orders.created');
    expect(headers[HEADERS.originalQueue]).toBe(queue);
    expect(headers[HEADERS.errorType]).toBe('Error');
    expect(String(headers[HEADERS.errorMessage]).length).toBeLessThanOrEqual(1024);
    expect(String(headers[HEADERS.errorMessage])).toMatch(/^boom x+/);
    expect(dead!.properties.messageId).toBe('poison-1');
    expect(JSON.parse(dead!.content.toString())).toEqual({ order: 1 });
    // The source counts the reject when the dead-letter publish is confirmed, after the broker routed it.
    await waitFor(() => source.stats.rejects === 1, { what: 'the reject counted' });
    expect(source.stats.requeues.retry).toBe(2);
    expect(await h.admin.messageCount(queue)).toBe(0);
  });

  test('a permanent error is dead-lettered at once with its reason and type', async () => {
    const queue = h.queue('permanent');
    const source = h.source({ queue });
    let runs = 0;
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, async () => {
      runs++;
      throw new PermanentError('amount must be positive');
    });
    await consumer.start();
    await h.admin.publish('', queue, { amount: -1 }, { messageId: 'neg-1' });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'message in DLQ' });
    const [dead] = await h.admin.drain(`${queue}.dlq`);
    expect(dead!.properties.headers?.[HEADERS.reason]).toBe('permanent_error');
    expect(dead!.properties.headers?.[HEADERS.errorType]).toBe('PermanentError');
    expect(dead!.properties.headers?.[HEADERS.errorMessage]).toBe('amount must be positive');
    expect(dead!.properties.headers?.[HEADERS.originalExchange]).toBe('');
    expect(dead!.properties.headers?.[HEADERS.originalRoutingKey]).toBe(queue);
    expect(runs).toBe(1);
  });

  test('handler reject(reason) dead-letters with that reason', async () => {
    const queue = h.queue('reject');
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, async () => reject('fraud_suspected'));
    await consumer.start();
    await h.admin.publish('', queue, { a: 1 }, { messageId: 'r-1' });
    await waitFor(async () => (await h.admin.messageCount(`${queue}.dlq`)) === 1, { what: 'message in DLQ' });
    const [dead] = await h.admin.drain(`${queue}.dlq`);
    expect(dead!.properties.headers?.[HEADERS.reason]).toBe('fraud_suspected');
    expect(dead!.properties.headers?.[HEADERS.attempts]).toBe(1);
  });

  test('busy requeue: a second copy waits through the delay queue while the first holds the lease, then is acked as a duplicate; busy never counts as an attempt', async () => {
    const queue = h.queue('busy');
    const effects = new EffectLog();
    const release = gate();
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory'), concurrency: 5, maxAttempts: 1 }, async (m) => {
      await release.promise;
      effects.apply(m.key);
      return ack();
    });
    await consumer.start();
    await h.admin.publish('', queue, { n: 1 }, { messageId: 'same' });
    await waitFor(() => source.stats.deliveries === 1, { what: 'first delivery' });
    await h.admin.publish('', queue, { n: 1 }, { messageId: 'same' });
    // maxAttempts 1: if busy counted as an attempt, the copy would be dead-lettered.
    await waitFor(() => source.stats.requeues.busy >= 3, { what: 'several busy requeues' });
    const copies = await h.admin.messageCount(queue);
    expect(copies).toBeLessThanOrEqual(1);
    release.open();
    await waitFor(() => source.stats.acks === 2, { what: 'original committed and copy acked as duplicate' });
    expect(effects.count('test:same')).toBe(1);
    expect(await h.admin.messageCount(`${queue}.dlq`)).toBe(0);
    expect(source.stats.requeues.retry).toBe(0);
  });

  test('requeue(delay) picks the nearest delay tier and the attempt count travels in the header', async () => {
    const queue = h.queue('delay');
    const seen: { attempt: number; at: number; prior?: number }[] = [];
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory'), maxAttempts: 5 }, async (m, ctx) => {
      seen.push({ attempt: ctx.attempt, at: Date.now(), prior: m.metadata.priorAttempts });
      if (seen.length < 3) return { type: 'requeue', delayMs: 500 };
      return ack();
    });
    await consumer.start();
    await h.admin.publish('', queue, { a: 1 }, { messageId: 'd-1' });
    await waitFor(() => seen.length === 3 && source.stats.acks === 1, { what: 'three runs' });
    expect(seen.map((s) => s.attempt)).toEqual([1, 2, 3]);
    expect(seen.map((s) => s.prior)).toEqual([undefined, 1, 2]);
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(450);
  });

  test('refuses to consume a queue whose rejects have no dead-letter route (ConfigurationError)', async () => {
    const queue = h.queue('nodlx');
    const ch = await h.admin.ch();
    await ch.assertQueue(queue, { durable: true });
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, async () => ack());
    const started = consumer.start();
    await expect(started).rejects.toBeInstanceOf(ConfigurationError);
    await expect(started).rejects.toThrow(/no dead-letter exchange: a reject would drop the message/);
    expect(source.isConsuming()).toBe(false);
    expect(consumer.health().live).toBe(false);
  });

  test('stop() while the source connects to an unreachable broker: start() ends with ShutdownError at once, not at connectTimeoutMs', async () => {
    const source = h.source({ queue: h.queue('unreachable'), url: 'amqp://guest:guest@127.0.0.1:1', connectTimeoutMs: 60_000 });
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, async () => ack());
    const starting = consumer.start();
    const outcome = starting.then(
      () => 'resolved',
      (error: Error) => error.name,
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    await consumer.stop();
    expect(await outcome).toBe('ShutdownError'); // a BrokerUnavailableError would only come after 60 s (beyond the test timeout)
    expect(source.state).toBe('closed');
    expect(consumer.health().state).toBe('stopped');
  });

  test('stop() while the source subscribes on a live broker: nothing stays subscribed to the queue', async () => {
    const queue = h.queue('stop-during-start');
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory') }, async () => ack());
    const opened = new Promise<void>((resolve) => source.on('channel_opened', () => resolve()));
    const starting = consumer.start().then(
      () => 'resolved',
      (error: Error) => error.name,
    );
    await opened;
    await consumer.stop();
    expect(['resolved', 'ShutdownError']).toContain(await starting);
    expect(consumer.health().state).toBe('stopped');
    const ch = await h.admin.ch();
    await waitFor(async () => (await ch.checkQueue(queue)).consumerCount === 0, { what: 'no consumer left on the queue' });
  });

  test("topology 'check' refuses a missing queue and accepts a declared one", async () => {
    const queue = h.queue('check');
    const missing = h.source({ queue, topology: 'check' });
    const c1 = h.consumer({ source: missing, claimer: h.claimer('memory') }, async () => ack());
    await expect(c1.start()).rejects.toThrow(/does not exist \(topology: 'check'\)/);
    const declaring = h.source({ queue });
    const c2 = h.consumer({ source: declaring, claimer: h.claimer('memory') }, async () => ack());
    await c2.start();
    await c2.stop();
    const checking = h.source({ queue, topology: 'check' });
    const c3 = h.consumer({ source: checking, claimer: h.claimer('memory') }, async () => ack());
    await c3.start();
    expect(checking.isConsuming()).toBe(true);
  });

  test('prefetch equals concurrency', async () => {
    const queue = h.queue('prefetch');
    const started = gate();
    let running = 0;
    let maxRunning = 0;
    const source = h.source({ queue });
    const consumer = h.consumer({ source, claimer: h.claimer('memory'), concurrency: 3 }, async () => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      await started.promise;
      running--;
      return ack();
    });
    await consumer.start();
    for (let i = 0; i < 10; i++) await h.admin.publish('', queue, { i }, { messageId: `p-${i}` });
    await waitFor(() => source.stats.deliveries === 3, { what: 'three deliveries' });
    await waitFor(async () => (await h.admin.messageCount(queue)) === 7, { what: 'seven left in the queue (not prefetched)' });
    expect(source.stats.deliveries).toBe(3);
    started.open();
    await waitFor(() => source.stats.acks === 10, { what: 'all acked' });
    expect(maxRunning).toBe(3);
  });
});
