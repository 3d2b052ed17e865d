/**
 * DeliverySink.submit: the two moments of one delivery, reported apart. `handled` resolves true
 * once the handler acked and its commit was issued (a transactional one: succeeded); `settled`
 * follows with the result. For any other end, `handled` resolves false with `settled`.
 */
import { ack, InMemoryClaimer, PermanentError, type Receipt, reject, requeue } from '../../src';
import { FnConsumer, fastOptions, GatedCommitClaimer, recordingDelivery, tick, until, WrappingClaimer } from './helpers';

/** Records when a promise settled, to compare moments without racing them. */
function watch<T>(p: Promise<T>): { done: boolean; value: T | undefined } {
  const state: { done: boolean; value: T | undefined } = { done: false, value: undefined };
  void p.then((value) => {
    state.done = true;
    state.value = value;
  });
  return state;
}

describe('DeliverySink.submit', () => {
  test('handled resolves true while the commit is held; settled follows with the ack only after the commit', async () => {
    const claimer = new GatedCommitClaimer(new InMemoryClaimer());
    const consumer = new FnConsumer(fastOptions(claimer), async () => ack());
    const delivery = recordingDelivery({ key: 'pay-1' });
    const submission = consumer.submit(delivery);
    const settled = watch(submission.settled);
    expect(await submission.handled).toBe(true);
    await until(() => claimer.waiting.includes('test:pay-1'), 'the commit issued');
    expect(settled.done).toBe(false);
    expect(delivery.calls).toEqual([]);
    claimer.open('test:pay-1');
    expect(await submission.settled).toMatchObject({ action: 'ack', outcome: 'committed', handled: true });
    expect(delivery.calls).toEqual([{ op: 'ack', duplicate: false }]);
  });

  test('handled resolves false, with settled already resolved, for a requeue, a dead-letter, a throw, a duplicate and a busy key', async () => {
    const claimer = new InMemoryClaimer();
    const consumer = new FnConsumer(fastOptions(claimer), async () => ack());
    const check = async (key: string, action: string) => {
      const submission = consumer.submit(recordingDelivery({ key }));
      const settled = watch(submission.settled);
      expect(await submission.handled).toBe(false);
      await tick();
      expect(settled.done).toBe(true);
      expect(settled.value).toMatchObject({ action });
    };
    consumer.handler = async () => requeue({ delayMs: 10 });
    await check('a', 'requeue');
    consumer.handler = async () => reject('bad');
    await check('b', 'reject');
    consumer.handler = async () => {
      throw new PermanentError('poison');
    };
    await check('c', 'reject');
    consumer.handler = async () => ack();
    expect(await consumer.submit(recordingDelivery({ key: 'd' })).handled).toBe(true);
    await check('d', 'ack'); // done duplicate
    await claimer.claim('test:e', { leaseTtlMs: 60_000, doneTtlMs: 60_000 });
    await check('e', 'requeue'); // busy
  });

  test('a receipt with a transaction: handled resolves true only once its commit succeeded', async () => {
    let commitStarted = false;
    let finishCommit!: () => void;
    class TransactionalGate extends WrappingClaimer {
      protected wrap(receipt: Receipt): Receipt {
        return {
          ...receipt,
          transaction: { tx: true },
          commit: async (value) => {
            commitStarted = true;
            await new Promise<void>((resolve) => {
              finishCommit = resolve;
            });
            return receipt.commit(value);
          },
        };
      }
    }
    const consumer = new FnConsumer(fastOptions(new TransactionalGate(new InMemoryClaimer())), async () => ack());
    const submission = consumer.submit(recordingDelivery({ key: 'tx-1' }));
    const handled = watch(submission.handled);
    await until(() => commitStarted, 'the transactional commit started');
    await tick();
    expect(handled.done).toBe(false);
    finishCommit();
    expect(await submission.handled).toBe(true);
    expect(await submission.settled).toMatchObject({ action: 'ack', outcome: 'committed' });
  });

  test('dispatch still works, and its result equals what submit settles with', async () => {
    const consumer = new FnConsumer(fastOptions(new InMemoryClaimer()), async () => ack({ n: 1 }));
    const viaDispatch = await consumer.dispatch(recordingDelivery({ key: 'x' }));
    const viaSubmit = await consumer.submit(recordingDelivery({ key: 'y' })).settled;
    expect({ ...viaSubmit, key: undefined, durationMs: 0, fencingToken: 0 }).toEqual({ ...viaDispatch, key: undefined, durationMs: 0, fencingToken: 0 });
  });
});
