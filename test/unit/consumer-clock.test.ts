/**
 * The `clock` option: the consumer's handler timeout, shutdown deadline and lease keep-alive run
 * on it, so tests advance time instead of sleeping.
 */
import { ack, ConfigurationError, InMemoryClaimer, systemClock } from '../../src';
import { LeaseKeeper } from '../../src/adapter-kit';
import { ManualClock } from '../support/manual-clock';
import { fastOptions, FnConsumer, recordingDelivery } from './helpers';
import { waitFor } from '../support/wait';

test('a clock without timers is refused at construction with ConfigurationError', () => {
  const claimer = new InMemoryClaimer();
  expect(() => new FnConsumer({ ...fastOptions(claimer), clock: { now: () => 0 } as never }, async () => ack())).toThrow(ConfigurationError);
  expect(() => new FnConsumer({ ...fastOptions(claimer), clock: systemClock }, async () => ack())).not.toThrow();
});

test('LeaseKeeper on a manual clock: one extend per interval of that clock, none while time stands still', async () => {
  const clock = new ManualClock();
  const claimer = new InMemoryClaimer({ clock });
  const claim = await claimer.claim('kept', { leaseTtlMs: 300, doneTtlMs: 60_000 });
  if (claim.state !== 'acquired') throw new Error('expected acquired');
  const keeper = new LeaseKeeper(300, 100, clock);
  let extended = 0;
  const kept = keeper.keep(claim.receipt, { onLost: () => undefined, onExtended: () => void extended++ });
  await clock.advance(99);
  expect(extended).toBe(0);
  await clock.advance(1001);
  expect(extended).toBeGreaterThanOrEqual(9); // 1100 ms of clock at one extend per 100 ms (ticks every 25 ms)
  expect((await claimer.claim('kept', { leaseTtlMs: 300, doneTtlMs: 60_000 })).state).toBe('busy'); // alive well past its 300 ms
  await kept.stop();
  keeper.close();
  expect(clock.pending).toBe(0);
});

test('no handler timeout or keep-alive timer is left on the clock once a delivery ended', async () => {
  const clock = new ManualClock();
  let started = false;
  const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer({ clock })), clock, handlerTimeoutMs: 60_000 }, async () => {
    started = true;
    await clock.sleep(500);
    return ack();
  });
  const running = consumer.dispatch(recordingDelivery({ key: 'timers' }));
  await waitFor(() => started);
  expect(clock.pending).toBe(3); // the handler's own sleep, its timeout, the keeper's interval
  await clock.advance(500);
  expect(await running).toMatchObject({ outcome: 'committed' });
  await clock.advance(1000); // the keeper's interval ends on its first tick with nothing to keep
  expect(clock.pending).toBe(0);
});
