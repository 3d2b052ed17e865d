/**
 * S18 (../shared/cases/failure-scenarios.md): lease TTL shorter than the handler. On the
 * in-process broker with InMemoryClaimer and jest fake timers: lease 1 s, handler 3 s, the same
 * message id published again at t = 1.5 s, two consumers.
 *
 * - keep-alive on (default): the second delivery finds the claim held, is requeued (busy), and
 *   once the first run commits it is acked as a done duplicate: one effect.
 * - keep-alive off (the test hook): the second delivery takes the expired lease and runs
 *   concurrently; the first run's commit is fenced (`lease_lost`): two effects, the guard visible.
 *
 * The keep-alive and InMemoryClaimer read `performance.now()` from node:perf_hooks, which jest's
 * fake timers do not replace; it is pointed at the fake `Date.now()` for the test.
 */
import { performance } from 'node:perf_hooks';
import { MemoryBroker, MemorySource } from '../../adapters/memory';
import { type ConsumerEvent, InMemoryClaimer, silentLogger } from '../../src';
import { type Run, SlowConsumer } from './support/slow-consumer';

async function scenario(keepAlive: boolean) {
  const broker = new MemoryBroker();
  const claimer = new InMemoryClaimer();
  const runs: Run[] = [];
  const events: { consumer: number; type: ConsumerEvent['type']; fencingToken?: number; at: number }[] = [];
  const consumers = [1, 2].map(
    (n) =>
      new SlowConsumer(
        {
          name: 'S18',
          claimer,
          source: new MemorySource({ broker, queue: 's18' }),
          concurrency: 1,
          leaseTtlMs: 1000,
          busyRequeueDelayMs: 500,
          keepAlive,
          deployment: { replicas: 1 },
          logger: silentLogger,
          observers: [{ onEvent: (e) => events.push({ consumer: n, type: e.type, fencingToken: e.fencingToken, at: Date.now() }) }],
        },
        n,
        runs,
      ),
  );
  for (const c of consumers) await c.start();
  const t0 = Date.now();
  broker.publish('s18', { body: '{}', messageId: 'M' });
  await jest.advanceTimersByTimeAsync(1500);
  broker.publish('s18', { body: '{}', messageId: 'M' });
  for (let i = 0; i < 200 && !broker.isDrained('s18'); i++) await jest.advanceTimersByTimeAsync(50);
  expect(broker.isDrained('s18')).toBe(true);
  await Promise.all(consumers.map((c) => c.stop()));
  broker.close();
  return { runs, events, t0, stats: broker.stats };
}

describe('S18: lease TTL 1 s shorter than a 3 s handler, duplicate at 1.5 s (in-process broker, InMemoryClaimer, fake timers)', () => {
  beforeEach(() => {
    jest.useFakeTimers();
    jest.spyOn(performance, 'now').mockImplementation(() => Date.now());
  });
  afterEach(() => {
    jest.restoreAllMocks();
    jest.useRealTimers();
  });

  test('S18 keep-alive on: the duplicate is busy and requeued, then acked as a done duplicate; one effect', async () => {
    const { runs, events, t0, stats } = await scenario(true);
    expect(runs).toHaveLength(1);
    const types = (t: ConsumerEvent['type']) => events.filter((e) => e.type === t);
    expect(types('lease_extended').length).toBeGreaterThanOrEqual(6); // every leaseTtl/3 for 3 s
    expect(types('busy').length).toBeGreaterThanOrEqual(1);
    expect(types('busy').every((e) => e.at - t0 >= 1500 && e.at - t0 < 3000)).toBe(true);
    expect(types('committed')).toHaveLength(1);
    expect(types('done_duplicate')).toHaveLength(1);
    expect(types('done_duplicate')[0]!.at).toBeGreaterThanOrEqual(types('committed')[0]!.at);
    expect(types('lease_lost')).toHaveLength(0);
    expect(stats.acked).toBe(2);
  });

  test('S18 keep-alive off (test hook): the duplicate runs concurrently and the first commit is fenced (lease_lost); two effects', async () => {
    const { runs, events, t0 } = await scenario(false);
    expect(runs).toHaveLength(2);
    const [first, second] = runs as [Run, Run];
    expect(second.startedAt - t0).toBeGreaterThanOrEqual(1500);
    expect(second.startedAt).toBeLessThan(first.endedAt!); // concurrent
    expect(second.fencingToken).toBeGreaterThan(first.fencingToken);
    const lost = events.filter((e) => e.type === 'lease_lost');
    const committed = events.filter((e) => e.type === 'committed');
    expect(lost).toEqual([expect.objectContaining({ fencingToken: first.fencingToken })]);
    expect(committed).toEqual([expect.objectContaining({ fencingToken: second.fencingToken })]);
  });
});
