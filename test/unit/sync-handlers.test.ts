/**
 * Issue 12 item 2: a synchronous `handle()` is judged like an `async` one. A disposition returned
 * directly is honoured; anything else is dead-lettered once as `invalid_disposition` and never
 * retried, with or without an observer that wraps pipeline steps. A JavaScript subclass without
 * `handle()` fails at construction.
 */
import {
  ack,
  ClaimerUnavailableError,
  ConfigurationError,
  ConsumerBase,
  InvalidDispositionError,
  type ConsumerObserver,
  type Disposition,
  InMemoryClaimer,
  PermanentError,
  reject,
  silentLogger,
} from '../../src';
import { MemoryBroker, MemorySource } from '../../adapters/memory';
import { fastOptions, ManualSource, recordingDelivery } from './helpers';
import { waitFor } from '../support/wait';

/** A consumer whose `handle()` is NOT async: it returns whatever `result()` gives, synchronously. */
class SyncConsumer extends ConsumerBase<unknown> {
  runs = 0;
  constructor(
    options: ConstructorParameters<typeof ConsumerBase>[0],
    private readonly result: () => unknown,
  ) {
    super(options);
  }
  handle(): Disposition {
    this.runs++;
    return this.result() as Disposition;
  }
}

/** An observer that wraps every pipeline step (as the OpenTelemetry observer does). */
const wrappingObserver: ConsumerObserver = {
  onDelivery: () => ({ step: (_step, fn) => fn() }),
};

const variants: [string, ConsumerObserver[]][] = [
  ['without observers', []],
  ['with an observer that wraps steps', [wrappingObserver]],
];

describe.each(variants)('synchronous handlers (%s)', (_label, observers) => {
  const options = () => ({ ...fastOptions(new InMemoryClaimer()), source: new ManualSource(), logger: silentLogger, observers });

  test('a synchronous handler returning ack() commits and acks, running once', async () => {
    const consumer = new SyncConsumer(options(), () => ack({ ok: 1 }));
    const d = recordingDelivery({ key: 'sync-ack' });
    expect(await consumer.dispatch(d)).toMatchObject({ action: 'ack', outcome: 'committed', handled: true });
    expect(d.calls).toEqual([{ op: 'ack', duplicate: false }]);
    expect(consumer.runs).toBe(1);
  });

  test('a synchronous handler returning reject(reason) dead-letters with that reason', async () => {
    const consumer = new SyncConsumer(options(), () => reject('bad_account'));
    const d = recordingDelivery({ key: 'sync-reject' });
    expect(await consumer.dispatch(d)).toMatchObject({ action: 'reject', reason: 'bad_account' });
    expect(consumer.runs).toBe(1);
  });

  test.each([
    ['undefined', undefined],
    ['a plain object', { type: 'acknowledge' }],
    ['a number', 42],
  ])('a synchronous handler returning %s is dead-lettered once as invalid_disposition, never retried', async (_what, value) => {
    const consumer = new SyncConsumer({ ...options(), maxAttempts: 5 }, () => value);
    const d = recordingDelivery({ key: 'sync-bad' });
    const r = await consumer.dispatch(d);
    expect(r).toMatchObject({ action: 'reject', reason: 'invalid_disposition', attempt: 1 });
    expect(d.calls).toEqual([{ op: 'reject', info: expect.objectContaining({ reason: 'invalid_disposition', attempts: 1, errorType: 'InvalidDispositionError' }) }]);
    expect(consumer.runs).toBe(1);
  });

  test('a synchronous throw is judged like a rejection: PermanentError dead-letters once', async () => {
    const consumer = new SyncConsumer(options(), () => {
      throw new PermanentError('no such account');
    });
    const d = recordingDelivery({ key: 'sync-throw' });
    expect(await consumer.dispatch(d)).toMatchObject({ action: 'reject', reason: 'permanent_error' });
    expect(consumer.runs).toBe(1);
  });

  test('fail-open path: a synchronous handler returning undefined is dead-lettered as invalid_disposition', async () => {
    const claimer = new InMemoryClaimer();
    const down = { kind: claimer.kind, claim: () => Promise.reject(new ClaimerUnavailableError('down')) };
    const consumer = new SyncConsumer({ ...options(), claimer: down, failOpen: true, claimRetries: 0 }, () => undefined);
    const d = recordingDelivery({ key: 'sync-open' });
    expect(await consumer.dispatch(d)).toMatchObject({ action: 'reject', reason: 'invalid_disposition' });
    expect(consumer.runs).toBe(1);
  });
});

test('in-process broker: a synchronous handler returning undefined reaches the dead-letter queue once, with reason invalid_disposition', async () => {
  const broker = new MemoryBroker();
  const source = new MemorySource({ broker, queue: 'sync-q' });
  const consumer = new SyncConsumer({ ...fastOptions(new InMemoryClaimer()), source, logger: silentLogger, maxAttempts: 5 }, () => undefined);
  await consumer.start();
  broker.publish('sync-q', { body: '{}', headers: { 'idempotency-key': 'k-1' } });
  await waitFor(() => broker.deadLetters('sync-q').length === 1 && broker.isDrained('sync-q'));
  expect(broker.deadLetters('sync-q')[0]).toMatchObject({ reason: expect.objectContaining({ reason: 'invalid_disposition' }) });
  expect(consumer.runs).toBe(1);
  await consumer.stop();
  broker.close();
});

test('a JavaScript subclass without handle() fails at construction with ConfigurationError', () => {
  // What plain JavaScript allows: the abstract method is simply missing.
  const NoHandle = class extends (ConsumerBase as unknown as new (options: unknown) => object) {};
  const build = () => new NoHandle({ ...fastOptions(new InMemoryClaimer()), source: new ManualSource(), logger: silentLogger });
  expect(build).toThrow(ConfigurationError);
  expect(build).toThrow(/must implement handle\(message, context\)/);
});

describe('InvalidDispositionError text', () => {
  test('a handler that returns the ack function itself is told to call it, without the function source in the reason', () => {
    const message = new InvalidDispositionError(ack).message;
    expect(message).toMatch(/the function ack itself \(call it: return ack\(…\)\)/);
    expect(message).not.toMatch(/return result/);
  });
});
