/**
 * ConsumerBase lifecycle: keep-alive and abort, shutdown, concurrency, configuration checks,
 * crash points, and the runner.
 */
import {
  ack,
  ConfigurationError,
  type ConsumerEvent,
  InMemoryClaimer,
  LeaseLostError,
  runConsumers,
  ShutdownError,
  silentLogger,
} from '../../src';
import { type DeliverySink, sleep } from '../../src/adapter-kit';
import { MemoryBroker, MemorySource } from '../../adapters/memory';
import { FnConsumer, fastOptions, ManualSource, recordingDelivery } from './helpers';
import { ManualClock } from '../support/manual-clock';
import { waitFor } from '../support/wait';


describe('lease keep-alive', () => {
  test('extends the lease every leaseTtl/3 while the handler runs, so a concurrent claim stays busy', async () => {
    const clock = new ManualClock();
    const claimer = new InMemoryClaimer({ clock });
    const events: ConsumerEvent[] = [];
    let release!: () => void;
    const consumer = new FnConsumer({ ...fastOptions(claimer), clock, leaseTtlMs: 150, observers: [{ onEvent: (e) => events.push(e) }] }, async () => {
      await new Promise<void>((r) => (release = r));
      return ack();
    });
    const run = consumer.dispatch(recordingDelivery({ key: 'long' }));
    await waitFor(() => release !== undefined);
    await clock.advance(450); // three lease lengths
    expect((await claimer.claim('test:long', { leaseTtlMs: 150, doneTtlMs: 60_000 })).state).toBe('busy');
    expect(events.filter((e) => e.type === 'lease_extended').length).toBeGreaterThanOrEqual(5);
    release();
    expect((await run).outcome).toBe('committed');
  });

  test('when extend reports the lease lost, the handler signal aborts with LeaseLostError and the delivery is requeued', async () => {
    let t = 0;
    const claimer = new InMemoryClaimer({ clock: { now: () => t } });
    const events: string[] = [];
    let abortReason: unknown;
    const consumer = new FnConsumer({ ...fastOptions(claimer), leaseTtlMs: 150, observers: [{ onEvent: (e) => events.push(e.type) }] }, async (_m, ctx) => {
      // Time jumps past the lease and another owner takes the key.
      t += 1000;
      const other = await claimer.claim('test:stolen', { leaseTtlMs: 150, doneTtlMs: 60_000 });
      expect(other.state).toBe('acquired');
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
      abortReason = ctx.signal.reason;
      throw ctx.signal.reason;
    });
    const d = recordingDelivery({ key: 'stolen' });
    const r = await consumer.dispatch(d);
    expect(abortReason).toBeInstanceOf(LeaseLostError);
    expect(r).toMatchObject({ action: 'requeue', outcome: 'lease_lost', reason: 'lease_lost' });
    expect(events).toContain('lease_lost');
    expect(d.calls[0]).toMatchObject({ op: 'requeue', info: { cause: 'lease_lost' } });
  });

  test('S18: with keep-alive disabled a handler that overruns its lease lets a duplicate run; the first commit is fenced (lease_lost)', async () => {
    const clock = new ManualClock();
    const claimer = new InMemoryClaimer({ clock });
    const effects: number[] = [];
    let started = 0;
    const consumer = new FnConsumer({ ...fastOptions(claimer), clock, leaseTtlMs: 100, keepAlive: false, handlerTimeoutMs: 10_000 }, async (_m, ctx) => {
      started++;
      if (ctx.attempt === 1) await clock.sleep(300);
      effects[ctx.attempt - 1] = ctx.fencingToken;
      return ack();
    });
    const first = consumer.dispatch(recordingDelivery({ key: 'overrun' }));
    await waitFor(() => started === 1);
    await clock.advance(150);
    const second = await consumer.dispatch(recordingDelivery({ key: 'overrun' }));
    expect(second.outcome).toBe('committed');
    await clock.advance(150);
    const r1 = await first;
    expect(r1.outcome).toBe('lease_lost');
    expect(effects).toHaveLength(2); // the documented window: a lease that expired under a live owner
    expect(effects[1]).toBeGreaterThan(effects[0]!); // the second owner's token is higher: fencing tokens let the downstream store refuse the older owner
  });

  test('S18: with keep-alive (default) the duplicate delivery stays busy and the effect happens once', async () => {
    const clock = new ManualClock();
    const claimer = new InMemoryClaimer({ clock });
    let effects = 0;
    let started = 0;
    const consumer = new FnConsumer({ ...fastOptions(claimer), clock, leaseTtlMs: 100 }, async () => {
      started++;
      await clock.sleep(300);
      effects++;
      return ack();
    });
    const first = consumer.dispatch(recordingDelivery({ key: 'kept' }));
    await waitFor(() => started === 1);
    await clock.advance(150);
    expect((await consumer.dispatch(recordingDelivery({ key: 'kept' }))).outcome).toBe('busy');
    await clock.advance(150);
    expect((await first).outcome).toBe('committed');
    expect((await consumer.dispatch(recordingDelivery({ key: 'kept' }))).outcome).toBe('done_duplicate');
    expect(effects).toBe(1);
  });

  test('handlerTimeoutMs aborts the signal; the failure is retried', async () => {
    const clock = new ManualClock();
    let started = false;
    const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer({ clock })), clock, handlerTimeoutMs: 30 }, async (_m, ctx) => {
      started = true;
      await sleep(5_000, ctx.signal);
      return ack();
    });
    const running = consumer.dispatch(recordingDelivery({ key: 'slow' }));
    await waitFor(() => started);
    await clock.advance(30);
    const r = await running;
    expect(r).toMatchObject({ action: 'requeue', reason: 'retry' });
    expect((r.error as Error).name).toBe('TimeoutError');
  });

  test('no timer outlives a handler (keep-alive and timeout timers end with it)', async () => {
    const created: NodeJS.Timeout[] = [];
    const realSetTimeout = global.setTimeout;
    const spy = jest.spyOn(global, 'setTimeout').mockImplementation(((fn: () => void, ms?: number) => {
      const handle = realSetTimeout(fn, ms);
      created.push(handle);
      return handle;
    }) as typeof setTimeout);
    const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), leaseTtlMs: 150, handlerTimeoutMs: 60_000 }, async () => {
      await sleep(120);
      return ack();
    });
    await Promise.all([1, 2, 3].map((i) => consumer.dispatch(recordingDelivery({ key: `t${i}` }))));
    await new Promise((r) => setImmediate(r));
    spy.mockRestore();
    expect(created.length).toBeGreaterThan(3); // keep-alive and timeout timers were made
    // Node marks a timer destroyed once it fired or was cleared.
    expect(created.filter((t) => !(t as unknown as { _destroyed: boolean })._destroyed)).toHaveLength(0);
  });
});

describe('graceful shutdown', () => {
  test('stop() stops intake, waits for in-flight handlers, settles them, then closes the source', async () => {
    const source = new ManualSource();
    let finish!: () => void;
    const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), source }, async () => {
      await new Promise<void>((r) => (finish = r));
      return ack();
    });
    await consumer.start();
    const d = recordingDelivery({ key: 'inflight' });
    const run = consumer.dispatch(d);
    await waitFor(() => finish !== undefined);
    const stopped = consumer.stop();
    await waitFor(() => source.intakeStopped);
    expect(source.closed).toBe(false);
    finish();
    await stopped;
    expect((await run).outcome).toBe('committed');
    expect(d.calls).toEqual([{ op: 'ack', duplicate: false }]);
    expect(source.closed).toBe(true);
    expect(consumer.health()).toMatchObject({ state: 'stopped', ready: false });
  });

  test('shutdown past its deadline aborts the handler: release and requeue, never dead-letter', async () => {
    const claimer = new InMemoryClaimer();
    const source = new ManualSource();
    let aborted: unknown;
    const consumer = new FnConsumer({ ...fastOptions(claimer), source, shutdownTimeoutMs: 50 }, async (_m, ctx) => {
      try {
        await sleep(10_000, ctx.signal);
      } catch (error) {
        aborted = error;
        throw error;
      }
      return ack();
    });
    await consumer.start();
    const d = recordingDelivery({ key: 'cut' });
    const run = consumer.dispatch(d);
    await sleep(10);
    await consumer.stop();
    expect(aborted).toBeInstanceOf(ShutdownError);
    expect(await run).toMatchObject({ action: 'requeue', reason: 'shutdown' });
    expect(d.calls).toEqual([{ op: 'requeue', delayMs: 0, info: { cause: 'shutdown' } }]);
    expect((await claimer.claim('test:cut', { leaseTtlMs: 1000, doneTtlMs: 60_000 })).state).toBe('acquired');
  });

  test('shutdown during a claim backoff requeues without running the handler', async () => {
    const { FlakyClaimer } = await import('./helpers');
    const claimer = new FlakyClaimer(new InMemoryClaimer());
    claimer.failClaims = 100;
    const source = new ManualSource();
    let runs = 0;
    const consumer = new FnConsumer({ ...fastOptions(claimer), source, claimRetries: 50, claimBackoff: { initialDelayMs: 200, maxDelayMs: 200, jitter: 0 } }, async () => {
      runs++;
      return ack();
    });
    await consumer.start();
    const d = recordingDelivery({ key: 'backoff' });
    const run = consumer.dispatch(d);
    await sleep(20);
    await consumer.stop();
    expect(await run).toMatchObject({ action: 'requeue', reason: 'shutdown' });
    expect(runs).toBe(0);
  });

  test('stop() during start(), before the claimer is ready: stop does not wait for ready(); the source is never started, start() rejects with ShutdownError, the state ends stopped', async () => {
    const source = new ManualSource();
    let ready!: () => void;
    const inner = new InMemoryClaimer();
    const claimer = Object.assign(Object.create(inner) as InMemoryClaimer, { ready: () => new Promise<void>((resolve) => (ready = resolve)) });
    const consumer = new FnConsumer({ ...fastOptions(claimer), source }, async () => ack());
    const starting = consumer.start();
    await waitFor(() => ready !== undefined);
    await consumer.stop(); // ready() has not settled: stop must not hang on it
    expect(consumer.health().state).toBe('stopped');
    ready();
    await expect(starting).rejects.toBeInstanceOf(ShutdownError);
    expect(source.started).toBe(false);
    expect(source.closed).toBe(true);
    expect(consumer.health()).toMatchObject({ state: 'stopped', live: true, ready: false });
  });

  test('stop() while the source is starting: stop does not wait for it and closes the source; the state never goes back to running', async () => {
    let started!: () => void;
    const source = new (class extends ManualSource {
      override async start(sink: DeliverySink): Promise<void> {
        await new Promise<void>((resolve) => (started = resolve));
        await super.start(sink);
      }
    })();
    const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), source }, async () => ack());
    const starting = consumer.start();
    await waitFor(() => started !== undefined);
    await consumer.stop(); // a broker connect can take long: stop must not wait for it
    expect(source.intakeStopped).toBe(true);
    expect(source.closed).toBe(true);
    started();
    await starting;
    expect(consumer.health().state).toBe('stopped');
  });

  test('deliveries arriving while stopping are requeued at once', async () => {
    const source = new ManualSource();
    const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), source }, async () => ack());
    await consumer.start();
    await consumer.stop();
    const d = recordingDelivery({ key: 'late' });
    expect(await consumer.dispatch(d)).toMatchObject({ action: 'requeue', reason: 'shutdown' });
  });
});

describe('concurrency', () => {
  test('at most `concurrency` handlers run at once', async () => {
    let running = 0;
    let peak = 0;
    const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), concurrency: 3 }, async () => {
      running++;
      peak = Math.max(peak, running);
      await sleep(5);
      running--;
      return ack();
    });
    await Promise.all(Array.from({ length: 20 }, (_, i) => consumer.dispatch(recordingDelivery({ key: `c${i}` }))));
    expect(peak).toBe(3);
  });
});

describe('configuration is checked at construction, never after a handler ran', () => {
  const claimer = new InMemoryClaimer();
  const make = (extra: object) => () => new FnConsumer({ ...fastOptions(claimer), ...extra }, async () => ack());
  test.each([
    ['leaseTtlMs 0', { leaseTtlMs: 0 }],
    ['leaseTtlMs not an integer', { leaseTtlMs: 10.5 }],
    ['doneTtlMs shorter than the lease', { leaseTtlMs: 5000, doneTtlMs: 1000 }],
    ['doneTtlMs beyond a year', { doneTtlMs: 400 * 24 * 3600 * 1000 }],
    ['concurrency 0', { concurrency: 0 }],
    ['maxAttempts 0', { maxAttempts: 0 }],
    ['empty name', { name: '' }],
    ['negative backoff jitter', { retryBackoff: { jitter: -1 } }],
  ])('%s → ConfigurationError', (_label, extra) => {
    expect(make(extra)).toThrow(ConfigurationError);
  });
  test('the error names the field and the value', () => {
    expect(make({ doneTtlMs: 100, leaseTtlMs: 200 })).toThrow(/doneTtlMs \(100\) must be ≥ leaseTtlMs \(200\)/);
  });
});

describe('S20: crash points (in-process broker)', () => {
  test('(b) a crash after the claim and before the commit frees the key after the lease TTL, not the done TTL', async () => {
    let t = 0;
    const claimer = new InMemoryClaimer({ clock: { now: () => t } });
    const broker = new MemoryBroker();
    const effects: string[] = [];
    const sourceA = new MemorySource({ broker, queue: 'payments' });
    let crashedA = false;
    const a = new FnConsumer({ ...fastOptions(claimer), source: sourceA, leaseTtlMs: 1000, doneTtlMs: 24 * 3600 * 1000, keepAlive: false }, async () => {
      sourceA.crash(); // the process dies here: no commit, no release, no settle reaches anyone
      crashedA = true;
      return new Promise(() => undefined);
    });
    await a.start();
    broker.publish('payments', { body: '{}', headers: { 'idempotency-key': 'p-1' } });
    await waitFor(() => crashedA);

    const sourceB = new MemorySource({ broker, queue: 'payments' });
    const outcomes: string[] = [];
    const b = new FnConsumer(
      { ...fastOptions(claimer), source: sourceB, leaseTtlMs: 1000, doneTtlMs: 24 * 3600 * 1000, busyRequeueDelayMs: 10, observers: [{ onEvent: (e) => outcomes.push(e.type) }] },
      async (m) => {
        effects.push(m.key);
        return ack();
      },
    );
    await b.start();
    await waitFor(() => outcomes.includes('busy')); // the dead owner's lease still holds
    t += 1001; // one lease TTL later, not a day later
    await waitFor(() => outcomes.includes('committed'));
    expect(effects).toEqual(['test:p-1']);
    await b.stop();
    broker.close();
  });

  test('(a) the handler appends to the sink and then throws: with release (default) the retry re-runs it and receives attempt and fencing token', async () => {
    const claimer = new InMemoryClaimer();
    const sink: { attempt: number; fencingToken: number }[] = [];
    const consumer = new FnConsumer(fastOptions(claimer), async (_m, ctx) => {
      sink.push({ attempt: ctx.attempt, fencingToken: ctx.fencingToken });
      if (ctx.attempt === 1) throw new Error('after the partial effect');
      return ack();
    });
    await consumer.dispatch(recordingDelivery({ key: 'partial' }));
    await consumer.dispatch(recordingDelivery({ key: 'partial' }));
    expect(sink.map((s) => s.attempt)).toEqual([1, 2]);
    expect(sink[1]!.fencingToken).toBeGreaterThan(sink[0]!.fencingToken);
  });

  test('(a) with a permanent failure the message is dead-lettered after one partial effect and not run again', async () => {
    const { PermanentError } = await import('../../src');
    const sink: number[] = [];
    const consumer = new FnConsumer(fastOptions(new InMemoryClaimer()), async (_m, ctx) => {
      sink.push(ctx.attempt);
      throw new PermanentError('fail policy');
    });
    const d = recordingDelivery({ key: 'failpolicy' });
    expect(await consumer.dispatch(d)).toMatchObject({ action: 'reject', reason: 'permanent_error' });
    expect(sink).toEqual([1]);
  });

  test('a crash after the commit and before the ack: the redelivery is a done duplicate', async () => {
    const claimer = new InMemoryClaimer();
    const broker = new MemoryBroker();
    const source = new MemorySource({ broker, queue: 'q' });
    let effects = 0;
    const consumer = new FnConsumer({ ...fastOptions(claimer), source }, async () => {
      effects++;
      return ack();
    });
    // The ack never reaches the broker: the consumer "dies" right after the commit.
    const original = source['toDelivery'].bind(source);
    let crashed = false;
    (source as unknown as { toDelivery: typeof original }).toDelivery = (d) => {
      const delivery = original(d);
      return { ...delivery, settler: { ...delivery.settler, ack: async () => void (crashed = source.crash() >= 0) } };
    };
    await consumer.start();
    broker.publish('q', { body: '{}', messageId: 'm-1' });
    await waitFor(() => crashed);
    const outcomes: string[] = [];
    const second = new FnConsumer({ ...fastOptions(claimer), source: new MemorySource({ broker, queue: 'q' }), observers: [{ onEvent: (e) => outcomes.push(e.type) }] }, async () => {
      effects++;
      return ack();
    });
    await second.start();
    await waitFor(() => outcomes.includes('done_duplicate'));
    expect(effects).toBe(1);
    await waitFor(() => broker.isDrained('q'));
    await second.stop();
    broker.close();
  });
});

describe('S24: the in-memory claimer judges leases on a monotonic clock', () => {
  afterEach(() => jest.useRealTimers());
  test('jumping the wall clock forward 60 s does not expire a 20 s lease', async () => {
    jest.useFakeTimers({ doNotFake: ['performance', 'nextTick', 'setImmediate', 'queueMicrotask'] });
    const claimer = new InMemoryClaimer();
    const a = await claimer.claim('skew', { leaseTtlMs: 20_000, doneTtlMs: 60_000 });
    expect(a.state).toBe('acquired');
    jest.setSystemTime(Date.now() + 60_000);
    expect((await claimer.claim('skew', { leaseTtlMs: 20_000, doneTtlMs: 60_000 })).state).toBe('busy');
  });
});

describe('S23: an in-memory claimer per instance does not deduplicate across instances', () => {
  test('two instances on one queue, each with its own in-memory claimer, apply a duplicated message twice (documented)', async () => {
    const broker = new MemoryBroker();
    let effects = 0;
    const handler = async () => {
      await sleep(20);
      effects++;
      return ack();
    };
    const one = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), source: new MemorySource({ broker, queue: 'shared' }), concurrency: 1 }, handler);
    const two = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), source: new MemorySource({ broker, queue: 'shared' }), concurrency: 1 }, handler);
    await one.start();
    await two.start();
    broker.publish('shared', { body: '{}', headers: { 'idempotency-key': 'M' } });
    broker.publish('shared', { body: '{}', headers: { 'idempotency-key': 'M' } });
    await waitFor(() => broker.stats.acked === 2);
    expect(effects).toBe(2);
    await Promise.all([one.stop(), two.stop()]);
    broker.close();
  });

  test('which is why start() refuses an in-memory claimer declared with several replicas', async () => {
    const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), deployment: { replicas: 2 } }, async () => ack());
    await expect(consumer.start()).rejects.toThrow(/in_memory claimer cannot deduplicate across 2 replicas/);
    expect(consumer.health()).toMatchObject({ live: false, ready: false, state: 'failed' });
  });
});

describe('runner', () => {
  test('starts consumers, reports readiness, and turns SIGTERM into a graceful stop', async () => {
    const broker = new MemoryBroker();
    const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), source: new MemorySource({ broker, queue: 'r' }) }, async () => ack());
    let shutdownSignal: string | undefined;
    const runner = await runConsumers([consumer], { logger: silentLogger, exitProcess: false, onShutdown: (s) => (shutdownSignal = s) });
    expect(runner.health()).toMatchObject({ live: true, ready: true });
    process.emit('SIGTERM', 'SIGTERM');
    await waitFor(() => shutdownSignal === 'SIGTERM');
    expect(runner.health()).toMatchObject({ live: true, ready: false });
    expect(process.listenerCount('SIGTERM')).toBe(0);
    broker.close();
  });

  test('a consumer that fails validation stops the ones already started and rethrows', async () => {
    const source = new ManualSource();
    const ok = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), source }, async () => ack());
    const bad = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), deployment: { replicas: 3 } }, async () => ack());
    await expect(runConsumers([ok, bad], { logger: silentLogger })).rejects.toThrow('deployment validation failed');
    expect(source.closed).toBe(true);
    expect(process.listenerCount('SIGTERM')).toBe(0);
  });

  test('SIGTERM during startup stops the consumer being started and starts no more; runConsumers resolves at once with a stopping runner, even while a start hangs', async () => {
    const first = new ManualSource();
    const second = new ManualSource();
    const third = new ManualSource();
    let ready!: () => void;
    const slow = Object.assign(Object.create(new InMemoryClaimer()) as InMemoryClaimer, { ready: () => new Promise<void>((resolve) => (ready = resolve)) });
    const a = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), source: first }, async () => ack());
    const b = new FnConsumer({ ...fastOptions(slow), source: second }, async () => ack());
    const c = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), source: third }, async () => ack());
    let shutdownSignal: string | undefined;
    const running = runConsumers([a, b, c], { logger: silentLogger, exitProcess: false, onShutdown: (sig) => (shutdownSignal = sig) });
    await waitFor(() => ready !== undefined); // a started, b waits for its claimer
    process.emit('SIGTERM', 'SIGTERM');
    await waitFor(() => shutdownSignal === 'SIGTERM');
    const runner = await running; // without b's ready(): a hanging start does not hold the runner
    expect(runner.health().consumers.map((h) => h.state)).toEqual(['stopped', 'stopped', 'stopped']);
    ready();
    await sleep(10);
    expect([first.started, second.started, third.started]).toEqual([true, false, false]);
    expect(first.closed).toBe(true);
    expect(process.listenerCount('SIGTERM')).toBe(0);
  });
});

test('a delivery dispatched to a consumer stopped before it started is requeued (shutdown), and its handler never runs', async () => {
  let runs = 0;
  const consumer = new FnConsumer(fastOptions(new InMemoryClaimer()), async () => {
    runs++;
    return ack();
  });
  await consumer.stop();
  const d = recordingDelivery({ key: 'after-stop' });
  expect(await consumer.dispatch(d)).toMatchObject({ action: 'requeue', reason: 'shutdown', handled: false });
  expect(d.calls).toEqual([{ op: 'requeue', delayMs: 0, info: { cause: 'shutdown' } }]);
  expect(runs).toBe(0);
});
