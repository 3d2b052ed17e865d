/**
 * The settler's `handled` hook: called once a handler acked and its commit was issued, before
 * the commit is confirmed; the ack still waits for the commit. The handler's concurrency slot is
 * freed at that point.
 */
import { ack, type ConsumerEvent, InMemoryClaimer, PermanentError, type Receipt, reject, requeue, silentLogger } from '../../src';
import { FnConsumer, fastOptions, GatedCommitClaimer, recordingDelivery, until, WrappingClaimer } from './helpers';

describe('Settler.handled', () => {
  test('is called after the handler acked and while the commit is held; the ack comes only after the commit', async () => {
    const claimer = new GatedCommitClaimer(new InMemoryClaimer());
    const consumer = new FnConsumer(fastOptions(claimer), async () => ack());
    const order: string[] = [];
    const delivery = recordingDelivery({ key: 'pay-1' }, { handled: () => order.push('handled'), onSettle: (call) => order.push(call.op) });
    const result = consumer.dispatch(delivery);
    await until(() => claimer.waiting.includes('test:pay-1'), 'the commit issued');
    expect(order).toEqual(['handled']);
    claimer.open('test:pay-1');
    expect(await result).toMatchObject({ action: 'ack', outcome: 'committed', handled: true });
    expect(order).toEqual(['handled', 'ack']);
    expect((await claimer.inner.claim('test:pay-1', { leaseTtlMs: 1000, doneTtlMs: 60_000 })).state).toBe('done');
  });

  test('is not called for a requeue, a dead-letter, a thrown error, a duplicate or a busy key', async () => {
    const claimer = new InMemoryClaimer();
    const consumer = new FnConsumer(fastOptions(claimer), async () => ack());
    let calls = 0;
    const handled = () => void calls++;
    consumer.handler = async () => requeue({ delayMs: 10 });
    await consumer.dispatch(recordingDelivery({ key: 'a' }, { handled }));
    consumer.handler = async () => reject('bad');
    await consumer.dispatch(recordingDelivery({ key: 'b' }, { handled }));
    consumer.handler = async () => {
      throw new PermanentError('poison');
    };
    await consumer.dispatch(recordingDelivery({ key: 'c' }, { handled }));
    consumer.handler = async () => ack();
    await consumer.dispatch(recordingDelivery({ key: 'd' }, { handled }));
    expect(calls).toBe(1);
    await consumer.dispatch(recordingDelivery({ key: 'd' }, { handled })); // done duplicate
    await claimer.claim('test:e', { leaseTtlMs: 60_000, doneTtlMs: 60_000 });
    await consumer.dispatch(recordingDelivery({ key: 'e' }, { handled })); // busy
    expect(calls).toBe(1);
  });

  test('frees the handler slot: with concurrency 1 the next handler runs while the first commit is held', async () => {
    const claimer = new GatedCommitClaimer(new InMemoryClaimer());
    const ran: string[] = [];
    const consumer = new FnConsumer({ ...fastOptions(claimer), concurrency: 1 }, async (message) => {
      ran.push(message.key);
      return ack();
    });
    const first = consumer.dispatch(recordingDelivery({ key: 'one' }));
    const second = consumer.dispatch(recordingDelivery({ key: 'two' }));
    await until(() => claimer.waiting.length === 2, 'both commits issued');
    expect(ran).toEqual(['test:one', 'test:two']);
    expect(consumer.health().inFlight).toBe(2);
    claimer.open('test:two');
    claimer.open('test:one');
    expect((await first).outcome).toBe('committed');
    expect((await second).outcome).toBe('committed');
    expect(consumer.health().inFlight).toBe(0);
  });

  test('once handled was signalled the delivery always ends in an ack, even when the pipeline throws afterwards', async () => {
    class FailingCommitClaimer extends WrappingClaimer {
      protected wrap(receipt: Receipt): Receipt {
        return { ...receipt, commit: () => Promise.reject(new Error('store rejected the commit')) };
      }
    }
    const logger = {
      ...silentLogger,
      error: () => {
        throw new Error('logger bug');
      },
    };
    const consumer = new FnConsumer({ ...fastOptions(new FailingCommitClaimer(new InMemoryClaimer())), logger }, async () => ack());
    let handledCalls = 0;
    const delivery = recordingDelivery({ key: 'k' }, { handled: () => void handledCalls++ });
    const result = await consumer.dispatch(delivery);
    expect(handledCalls).toBe(1);
    expect(result).toMatchObject({ action: 'ack', outcome: 'commit_failed', handled: true });
    expect(delivery.calls).toEqual([{ op: 'ack', duplicate: false }]);
  });

  test('a hook that throws is logged and ignored: the key is still committed and the delivery acked', async () => {
    const warnings: string[] = [];
    const logger = { ...silentLogger, warn: (_: object, message?: string) => void warnings.push(message ?? '') };
    const events: ConsumerEvent[] = [];
    const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), logger, observers: [{ onEvent: (e) => events.push(e) }] }, async () => ack());
    const delivery = recordingDelivery(
      { key: 'k' },
      {
        handled: () => {
          throw new Error('hook bug');
        },
      },
    );
    expect(await consumer.dispatch(delivery)).toMatchObject({ action: 'ack', outcome: 'committed' });
    expect(delivery.calls).toEqual([{ op: 'ack', duplicate: false }]);
    expect(warnings.join()).toMatch(/handled hook threw/);
    expect(events.map((e) => e.type)).toEqual(['acquired', 'committed']);
  });
});
