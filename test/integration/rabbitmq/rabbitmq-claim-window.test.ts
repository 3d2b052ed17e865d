/**
 * The claim window of `batchClaims` (`batchWindowMs`) on the real RabbitMQ with the Redis claimer:
 * one `claimMany` round trip for the deliveries of a window, and nothing held past a stop or a
 * channel close (nothing lost, nothing handled twice, acks only on the channel that delivered).
 */
import { ack, type Claimer } from '../../../src';
import { type ClaimManyEntry, type ClaimRequest } from '../../../src/adapter-kit';
import { AMQP_URL } from './support/amqp';
import { describeWithServices } from '../../support/services';
import { LoopbackProxy, type ProxiedPair } from '../../support/loopback-proxy';
import { EffectLog, Harness } from './support/harness';
import { gate, waitFor } from '../../support/wait';

/** Counts the claimer's `claimMany` calls and their sizes; `hold` keeps a call's answer back (its leases are taken). */
function countingClaimMany(claimer: Claimer): { calls: number[]; hold: () => { open: () => void } } {
  const calls: number[] = [];
  const inner = claimer.claimMany!.bind(claimer);
  let held: Promise<void> | undefined;
  (claimer as { claimMany: (requests: readonly ClaimRequest[]) => Promise<ClaimManyEntry[]> }).claimMany = async (requests) => {
    calls.push(requests.length);
    const entries = await inner(requests);
    const wait = held;
    held = undefined; // only the next call is held
    if (wait) await wait;
    return entries;
  };
  return {
    calls,
    hold: () => {
      const g = gate();
      held = g.promise;
      return g;
    },
  };
}

/** A proxy in front of the broker whose connections a test can cut at once (the broker sees the TCP close). */
class CuttableProxy extends LoopbackProxy {
  private readonly pairs = new Set<ProxiedPair>();

  protected override fromClient(chunk: Buffer, pair: ProxiedPair): void {
    this.pairs.add(pair);
    super.fromClient(chunk, pair);
  }

  cut(): void {
    for (const pair of this.pairs) {
      pair.client.destroy();
      pair.upstream.destroy();
    }
    this.pairs.clear();
  }
}

describeWithServices(['rabbitmq', 'redis'], 'RabbitMQ claim window (batchWindowMs, real broker + Redis)', () => {
  let h: Harness;
  /** The channel-close tests' proxy: closed after the harness, so the sources close while it still forwards. */
  let proxy: CuttableProxy | undefined;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
    await proxy?.close();
    proxy = undefined;
  });

  /** Publishes `n` messages one after the other, each confirmed before the next (so they arrive in separate turns). */
  async function publishOneByOne(queue: string, n: number, prefix: string): Promise<void> {
    for (let i = 0; i < n; i++) await h.admin.publish('', queue, { i }, { messageId: `${prefix}-${i}` });
  }

  test.each([
    [0, 'more than one call'],
    [1000, 'one call for all 8'],
  ] as const)('batchWindowMs %i: 8 deliveries published one by one are claimed with %s', async (batchWindowMs, _expected) => {
    const queue = h.queue(`gather-${batchWindowMs}`);
    const effects = new EffectLog();
    const claimer = h.claimer('redis');
    const counting = countingClaimMany(claimer);
    const source = h.source({ queue, batchClaims: true, batchWindowMs });
    const consumer = h.consumer({ source, claimer, concurrency: 50 }, async (m) => {
      effects.apply(m.key);
      return ack();
    });
    await consumer.start();
    await publishOneByOne(queue, 8, 'g');
    await waitFor(() => source.stats.acks === 8, { what: 'all 8 acked' });
    expect(effects.keys).toBe(8);
    expect(effects.duplicated()).toEqual([]);
    expect(counting.calls.reduce((a, b) => a + b, 0)).toBe(8);
    if (batchWindowMs === 0) expect(counting.calls.length).toBeGreaterThan(1);
    else expect(counting.calls).toEqual([8]);
    expect(source.stats.claimBatches).toBe(counting.calls.length);
  });

  test('a window closes as soon as the channel is full (unsettled deliveries = prefetch), not when its timer ends', async () => {
    const queue = h.queue('full');
    const claimer = h.claimer('redis');
    const counting = countingClaimMany(claimer);
    const source = h.source({ queue, batchClaims: true, batchWindowMs: 1000 });
    const ch = await h.admin.ch();
    await ch.assertExchange(`${queue}.dlx`, 'direct', { durable: true });
    await ch.assertQueue(queue, { durable: true, arguments: source.topology.workQueue.arguments });
    await publishOneByOne(queue, 4, 'f');
    let firstHandled = 0;
    const consumer = h.consumer({ source, claimer, concurrency: 4 }, async () => {
      firstHandled ||= Date.now();
      return ack();
    });
    const started = Date.now();
    await consumer.start();
    await waitFor(() => source.stats.acks === 4, { what: 'all 4 acked' });
    expect(counting.calls).toEqual([4]);
    // With the 1000 ms timer alone the first handler would start a second after subscribing.
    expect(firstHandled - started).toBeLessThan(800);
  });

  test('stop during an open window: the waiting deliveries are requeued unclaimed and unhandled; a later consumer handles each once', async () => {
    const queue = h.queue('stop-open');
    const effects = new EffectLog();
    const claimer = h.claimer('redis');
    const counting = countingClaimMany(claimer);
    const source = h.source({ queue, batchClaims: true, batchWindowMs: 1000 });
    let runs = 0;
    const consumer = h.consumer({ source, claimer, concurrency: 50 }, async (m) => {
      runs++;
      effects.apply(m.key);
      return ack();
    });
    await consumer.start();
    await publishOneByOne(queue, 5, 's');
    await waitFor(() => source.stats.deliveries === 5, { what: '5 deliveries waiting in the window' });
    await consumer.stop();
    expect(runs).toBe(0);
    expect(counting.calls).toEqual([]);
    expect(source.stats).toMatchObject({ staleSettlesSkipped: 0, waitingDeliveriesDropped: 0 });
    expect(source.stats.requeues.shutdown).toBe(5);
    expect(await h.admin.messageCount(queue)).toBe(5);

    const again = h.source({ queue, batchClaims: true, batchWindowMs: 1000 });
    const next = h.consumer({ source: again, claimer, concurrency: 50 }, async (m) => {
      runs++;
      effects.apply(m.key);
      return ack();
    });
    await next.start();
    await waitFor(() => again.stats.acks === 5, { what: 'the 5 requeued messages acked by the next consumer' });
    expect(effects.keys).toBe(5);
    expect(effects.duplicated()).toEqual([]);
    expect(runs).toBe(5);
    expect(again.stats.requeues.busy).toBe(0);
  });

  test('stop while a batch claim is in flight: stop waits for it, the deliveries are requeued on their open channel (no stale settle), the leases released', async () => {
    const queue = h.queue('stop-claiming');
    const effects = new EffectLog();
    const claimer = h.claimer('redis');
    const counting = countingClaimMany(claimer);
    const held = counting.hold();
    const source = h.source({ queue, batchClaims: true });
    let runs = 0;
    const consumer = h.consumer({ source, claimer, concurrency: 50 }, async (m) => {
      runs++;
      effects.apply(m.key);
      return ack();
    });
    await consumer.start();
    await h.admin.publish('', queue, { i: 0 }, { messageId: 'c-0' });
    await waitFor(() => counting.calls.length === 1, { what: 'the batch claim in flight' });
    let stopped = false;
    const stopping = consumer.stop().then(() => {
      stopped = true;
    });
    await waitFor(() => source.state === 'stopping', { what: 'stopping' });
    // Bounded negative check: without the wait, stop() closes the channel within a few ms.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(stopped).toBe(false);
    held.open();
    await stopping;
    expect(runs).toBe(0);
    expect(source.stats).toMatchObject({ staleSettlesSkipped: 0, waitingDeliveriesDropped: 0 });
    expect(source.stats.requeues.shutdown).toBe(1);
    expect(await h.admin.messageCount(queue)).toBe(1);

    const again = h.source({ queue, batchClaims: true });
    const next = h.consumer({ source: again, claimer, concurrency: 50 }, async (m) => {
      runs++;
      effects.apply(m.key);
      return ack();
    });
    await next.start();
    await waitFor(() => again.stats.acks === 1, { what: 'the requeued message acked by the next consumer' });
    expect(runs).toBe(1);
    expect(effects.duplicated()).toEqual([]);
    expect(again.stats.requeues.busy).toBe(0); // the first claim's lease was released
  });

  describe('channel closed', () => {
    let url: string;
    beforeEach(async () => {
      const target = new URL(AMQP_URL);
      proxy = new CuttableProxy(target.hostname, Number(target.port || 5672));
      const port = await proxy.listen();
      target.port = String(port);
      url = target.toString();
    });

    test('during an open window: its deliveries are never claimed nor dispatched; redelivered on the next channel, each handled once', async () => {
      const queue = h.queue('closed-open');
      const effects = new EffectLog();
      const claimer = h.claimer('redis');
      const counting = countingClaimMany(claimer);
      const source = h.source({ queue, url, batchClaims: true, batchWindowMs: 1000 });
      const closed: number[] = [];
      source.on((e) => {
        if (e.type === 'channel_closed') closed.push(e.generation);
      });
      const consumer = h.consumer({ source, claimer, concurrency: 50 }, async (m) => {
        effects.apply(m.key);
        return ack();
      });
      await consumer.start();
      await publishOneByOne(queue, 3, 'w');
      await waitFor(() => source.stats.deliveries === 3, { what: '3 deliveries waiting in the window' });
      proxy!.cut();
      await waitFor(() => closed.includes(1), { what: 'generation 1 closed' });
      await waitFor(() => source.stats.waitingDeliveriesDropped === 3, { what: 'the 3 waiting deliveries dropped when the window closed' });
      await waitFor(() => source.stats.acks === 3, { what: 'the 3 redeliveries acked on generation 2' });
      expect(source.stats.generation).toBe(2);
      expect(counting.calls).toEqual([3]); // the redeliveries only
      expect(effects.keys).toBe(3);
      expect(effects.duplicated()).toEqual([]);
      expect(source.stats).toMatchObject({ staleSettlesSkipped: 0, deliveries: 6 });
      expect(await h.admin.messageCount(queue)).toBe(0);
    });

    test('while the batch claim is in flight: not dispatched, its leases released, so the redeliveries are claimed at once (never busy)', async () => {
      const queue = h.queue('closed-claiming');
      const effects = new EffectLog();
      const claimer = h.claimer('redis');
      const counting = countingClaimMany(claimer);
      const held = counting.hold();
      // A slow reconnect: the release lands before the broker redelivers on generation 2.
      const source = h.source({ queue, url, batchClaims: true, reconnectDelayMs: 1500 });
      const closed: number[] = [];
      source.on((e) => {
        if (e.type === 'channel_closed') closed.push(e.generation);
      });
      let runs = 0;
      const consumer = h.consumer({ source, claimer, concurrency: 50 }, async (m) => {
        runs++;
        effects.apply(m.key);
        return ack();
      });
      await consumer.start();
      await h.admin.publish('', queue, { i: 0 }, { messageId: 'k-0' });
      await waitFor(() => counting.calls.length === 1, { what: 'the batch claim in flight' });
      proxy!.cut();
      await waitFor(() => closed.includes(1), { what: 'generation 1 closed' });
      held.open();
      await waitFor(() => source.stats.waitingDeliveriesDropped === 1, { what: 'the claimed delivery of the closed channel dropped' });
      expect(runs).toBe(0);
      await waitFor(() => source.stats.acks === 1, { what: 'the redelivery acked on generation 2' });
      expect(source.stats.generation).toBe(2);
      expect(runs).toBe(1);
      expect(effects.duplicated()).toEqual([]);
      expect(source.stats.requeues.busy).toBe(0);
      expect(source.stats.staleSettlesSkipped).toBe(0);
      expect(counting.calls).toEqual([1, 1]);
    });
  });
});
