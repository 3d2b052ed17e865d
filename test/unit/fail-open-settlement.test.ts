/**
 * The fail-open path (`failOpen: true`, claim store down) settles by the same table as the
 * guarded path: same reject reasons, same attempt limit, a handler timeout, shutdown.
 */
import { ClaimerUnavailableError, InMemoryClaimer, InvalidMessageError, reject, requeue } from '../../src';
import { fastOptions, FnConsumer, type Handler, recordingDelivery } from './helpers';

function failOpenConsumer(handler: Handler, extra: { maxAttempts?: number; handlerTimeoutMs?: number; shutdownTimeoutMs?: number } = {}) {
  const inner = new InMemoryClaimer();
  const down = { kind: inner.kind, claim: () => Promise.reject(new ClaimerUnavailableError('down')) };
  return new FnConsumer({ ...fastOptions(inner), claimer: down, claimRetries: 0, failOpen: true, ...extra }, handler);
}

describe('fail-open settles like the guarded path', () => {
  test('reject("") is dead-lettered as handler_rejected, like the guarded path', async () => {
    const consumer = failOpenConsumer(async () => reject(''));
    const d = recordingDelivery({ key: 'fo-reject' });
    expect(await consumer.dispatch(d)).toMatchObject({ action: 'reject', reason: 'handler_rejected' });
    expect(d.calls).toEqual([{ op: 'reject', info: expect.objectContaining({ reason: 'handler_rejected', attempts: 1 }) }]);
  });

  test('an InvalidMessageError from the handler dead-letters with its own reason', async () => {
    const consumer = failOpenConsumer(async () => {
      throw new InvalidMessageError('invalid_body', 'amount missing');
    });
    expect(await consumer.dispatch(recordingDelivery({ key: 'fo-invalid' }))).toMatchObject({ action: 'reject', reason: 'invalid_body' });
  });

  test('requeue() on the last allowed attempt is dead-lettered as retry_exhausted (outcome retry_exhausted)', async () => {
    const consumer = failOpenConsumer(async () => requeue(), { maxAttempts: 2 });
    const d = recordingDelivery({ key: 'fo-requeue', priorAttempts: 1 });
    expect(await consumer.dispatch(d)).toMatchObject({ action: 'reject', reason: 'retry_exhausted', outcome: 'retry_exhausted', attempt: 2 });
  });

  test('handlerTimeoutMs frees a fail-open handler that ignores its signal: requeued as a retry', async () => {
    const consumer = failOpenConsumer(() => new Promise(() => undefined), { handlerTimeoutMs: 20 });
    const d = recordingDelivery({ key: 'fo-timeout' });
    const result = await Promise.race([consumer.dispatch(d), new Promise((resolve) => setTimeout(() => resolve('still waiting'), 2000).unref())]);
    expect(result).toMatchObject({ action: 'requeue', reason: 'retry', attempt: 1 });
    expect(d.calls).toEqual([{ op: 'requeue', delayMs: 100, info: { cause: 'retry', attempt: 1 } }]);
  });
});
