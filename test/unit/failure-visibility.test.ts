/**
 * Issue #12 item 6: every failure is visible with the default logger (one warn or error line with
 * the key, the reason and where the message went), floods become periodic summaries, health()
 * counts dead-letters by reason, and a doneTtlMs shorter than the retry horizon is warned about.
 */
import {
  ack,
  ClaimerUnavailableError,
  type Disposition,
  InMemoryClaimer,
  type Logger,
  reject,
  type Receipt,
  UnstorableResultError,
} from '../../src';
import { LogLimiter } from '../../src/util/log-limiter';
import { retryHorizonMs } from '../../src/config/retry-horizon';
import { FlakyClaimer, FnConsumer, fastOptions, recordingDelivery, WrappingClaimer } from './helpers';
import { ManualClock } from '../support/manual-clock';
import { waitFor } from '../support/wait';

interface Line {
  level: string;
  msg?: string;
  obj: Record<string, unknown>;
}

function recordingLogger(): { lines: Line[]; logger: Logger } {
  const lines: Line[] = [];
  const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, msg, obj: obj as Record<string, unknown> });
  return { lines, logger: { debug: () => undefined, info: () => undefined, warn: at('warn'), error: at('error') } };
}

const failures = (lines: Line[]) => lines.filter((l) => l.level === 'warn' || l.level === 'error');

describe('each failure logs one line with key, reason and destination', () => {
  async function run(
    handler: () => Promise<Disposition> | unknown,
    input: Parameters<typeof recordingDelivery>[0] = { key: 'k' },
    claimer: InMemoryClaimer | FlakyClaimer = new InMemoryClaimer(),
    extra: object = {},
  ) {
    const { lines, logger } = recordingLogger();
    const consumer = new FnConsumer({ ...fastOptions(claimer), logger, ...extra }, handler as never);
    await consumer.start();
    const result = await consumer.dispatch(recordingDelivery(input));
    await consumer.stop();
    return { lines: failures(lines), result, health: consumer.health() };
  }

  test('handler threw: retry, requeued', async () => {
    const { lines } = await run(async () => {
      throw new Error('db down');
    });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 'warn', obj: { key: 'test:k', reason: 'handler_error', destination: 'requeue', attempt: 1, maxAttempts: 5 } });
    expect((lines[0]!.obj.err as Error).message).toBe('db down');
  });

  test('a result JSON cannot store (ack({ n: 10n })): one error line naming the place (UnstorableResultError), the key committed without the result, a redelivery a duplicate', async () => {
    const { lines, logger } = recordingLogger();
    const claimer = new InMemoryClaimer();
    let runs = 0;
    const consumer = new FnConsumer({ ...fastOptions(claimer), logger }, async () => {
      runs += 1;
      return ack({ n: 10n } as never);
    });
    await consumer.start();
    const first = await consumer.dispatch(recordingDelivery({ key: 'big' }));
    const again = await consumer.dispatch(recordingDelivery({ key: 'big' }));
    await consumer.stop();
    expect(first).toMatchObject({ action: 'ack', outcome: 'committed' });
    expect(again).toMatchObject({ action: 'ack', claimState: 'done' });
    expect(runs).toBe(1);
    const logged = failures(lines);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ level: 'error', msg: 'twophase: handler result cannot be stored (too large, or not JSON); committing the key without it', obj: { key: 'test:big' } });
    expect(logged[0]!.obj.err).toBeInstanceOf(UnstorableResultError);
    expect((logged[0]!.obj.err as Error).message).toMatch(/result\.n is a bigint/);
  });

  test('retry_exhausted: dead-letter at error level', async () => {
    const { lines, health } = await run(
      async () => {
        throw new Error('still down');
      },
      { key: 'k', priorAttempts: 4 },
    );
    expect(lines).toEqual([expect.objectContaining({ level: 'error', obj: expect.objectContaining({ key: 'test:k', reason: 'retry_exhausted', destination: 'dead-letter' }) })]);
    expect(health.deadLetters).toEqual({ retry_exhausted: 1 });
  });

  test('invalid_disposition: dead-letter at error level', async () => {
    const { lines } = await run(async () => 42);
    expect(lines).toEqual([expect.objectContaining({ level: 'error', obj: expect.objectContaining({ key: 'test:k', reason: 'invalid_disposition', destination: 'dead-letter' }) })]);
  });

  test('a dead-letter line names the delivery: a keyless message is found by its queue and the broker attributes (partition, offset)', async () => {
    const { lines, logger } = recordingLogger();
    const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), logger }, async () => ack());
    await consumer.start();
    const delivery = recordingDelivery({ key: null });
    const keyless = { ...delivery, metadata: { ...delivery.metadata, destination: 'payments', attributes: { partition: 3, offset: '1042' } } };
    await consumer.dispatch(keyless);
    const invalid = recordingDelivery({ key: 'k', messageId: 'm-7', raw: Buffer.from('{not json') });
    await consumer.dispatch(invalid);
    await consumer.stop();
    const dead = failures(lines).filter((l) => l.obj.destination === 'dead-letter');
    expect(dead.map((l) => l.obj)).toEqual([
      expect.objectContaining({ reason: 'missing_key', source: 'payments', attributes: { partition: 3, offset: '1042' } }),
      expect.objectContaining({ reason: 'invalid_body', key: 'test:k', messageId: 'm-7', source: 'q' }),
    ]);
  });

  test.each([
    ['missing_key', { key: null }],
    ['invalid_body', { key: 'k', raw: Buffer.from('{not json') }],
    ['invalid_key', { key: 'x'.repeat(600) }],
  ])('%s: dead-letter at warn level, counted in health()', async (reason, input) => {
    const { lines, health } = await run(async () => ack(), input as never);
    expect(lines).toEqual([expect.objectContaining({ level: 'warn', obj: expect.objectContaining({ reason, destination: 'dead-letter' }) })]);
    expect(health.deadLetters).toEqual({ [reason]: 1 });
  });

  test("the handler's reject(reason): dead-letter at warn level with that reason", async () => {
    const { lines, health } = await run(async () => reject('invalid_amount'));
    expect(lines).toEqual([expect.objectContaining({ level: 'warn', obj: expect.objectContaining({ key: 'test:k', reason: 'invalid_amount', destination: 'dead-letter' }) })]);
    expect(health.deadLetters).toEqual({ invalid_amount: 1 });
  });

  test('commit_failed: error, acked', async () => {
    const claimer = new FlakyClaimer(new InMemoryClaimer());
    claimer.failCommits = 1000;
    const { lines, result } = await run(async () => ack(), { key: 'k' }, claimer as never, { commitDeadlineMs: 50 });
    expect(result.outcome).toBe('commit_failed');
    expect(lines).toEqual([expect.objectContaining({ level: 'error', obj: expect.objectContaining({ key: 'test:k', reason: 'commit_failed', destination: 'ack' }) })]);
  });

  test('claim store unavailable: warn, requeued without running the handler', async () => {
    const claimer = new FlakyClaimer(new InMemoryClaimer());
    claimer.failClaims = 1000;
    const { lines } = await run(async () => ack(), { key: 'k' }, claimer as never);
    expect(lines).toEqual([expect.objectContaining({ level: 'warn', obj: expect.objectContaining({ key: 'test:k', reason: 'claimer_unavailable', destination: 'requeue' }) })]);
  });

  test('with the default logger: JSON lines on stderr', async () => {
    const written: string[] = [];
    const spy = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    try {
      const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), logger: undefined }, async () => ack());
      await consumer.start();
      await consumer.dispatch(recordingDelivery({ key: null }));
      await consumer.stop();
    } finally {
      spy.mockRestore();
    }
    const line = written.map((w) => JSON.parse(w) as Record<string, unknown>).find((l) => l.reason === 'missing_key');
    expect(line).toMatchObject({ level: 'warn', consumer: 'test', reason: 'missing_key', destination: 'dead-letter' });
  });
});

describe('floods are summarised', () => {
  test('10 000 keyless messages: a few lines and one summary, all counted in health()', async () => {
    const { lines, logger } = recordingLogger();
    const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), logger, concurrency: 100 }, async () => ack());
    await consumer.start();
    await Promise.all(Array.from({ length: 10_000 }, () => consumer.dispatch(recordingDelivery({ key: null }))));
    expect(consumer.health().deadLetters).toEqual({ missing_key: 10_000 });
    await consumer.stop();
    const logged = failures(lines);
    expect(logged.length).toBeLessThanOrEqual(10);
    const summary = logged.find((l) => l.obj.suppressed !== undefined);
    expect(summary).toMatchObject({ level: 'warn', obj: { consumer: 'test', suppressed: { missing_key: 10_000 - logged.filter((l) => l.obj.reason === 'missing_key').length } } });
  });

  test('a flood of handler errors: the summary counts them under the reason each line names (handler_error)', async () => {
    const { lines, logger } = recordingLogger();
    const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), logger, concurrency: 100 }, async () => {
      throw new Error('db down');
    });
    await consumer.start();
    await Promise.all(Array.from({ length: 200 }, (_, i) => consumer.dispatch(recordingDelivery({ key: `k${i}` }))));
    await consumer.stop();
    const logged = failures(lines);
    const single = logged.filter((l) => l.obj.reason === 'handler_error');
    expect(single.length).toBeGreaterThan(0);
    const summary = logged.find((l) => l.obj.suppressed !== undefined);
    expect(summary).toMatchObject({ level: 'warn', obj: { consumer: 'test', suppressed: { handler_error: 200 - single.length } } });
  });

  test('lease-extend failures while the store is down: summarised, not one line per extension', async () => {
    class ExtendFails extends WrappingClaimer {
      extends = 0;
      protected wrap(receipt: Receipt): Receipt {
        return {
          ...receipt,
          extend: async () => {
            this.extends++;
            throw new ClaimerUnavailableError('injected: store down');
          },
        };
      }
    }
    const clock = new ManualClock();
    const claimer = new ExtendFails(new InMemoryClaimer({ clock }));
    const { lines, logger } = recordingLogger();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let started = 0;
    const consumer = new FnConsumer({ ...fastOptions(claimer), clock, leaseTtlMs: 100, logger, concurrency: 50 }, async () => {
      started++;
      await held;
      return ack();
    });
    await consumer.start();
    const running = Promise.all(Array.from({ length: 50 }, (_, i) => consumer.dispatch(recordingDelivery({ key: `k${i}` }))));
    await waitFor(() => started === 50);
    while (claimer.extends < 200) await clock.advance(10);
    release();
    await running;
    await consumer.stop();
    const extendLines = failures(lines).filter((l) => l.msg?.includes('lease extend failed'));
    expect(extendLines.length).toBeLessThanOrEqual(5);
    const summary = failures(lines).find((l) => l.obj.suppressed !== undefined);
    expect((summary!.obj.suppressed as Record<string, number>).lease_extend_failed).toBeGreaterThanOrEqual(195);
  });

  test('LogLimiter: a burst per reason and window, then one summary at the end of the window', () => {
    const { lines, logger } = recordingLogger();
    let now = 0;
    const limiter = new LogLimiter(logger, { consumer: 'c' }, 1000, 2, () => now);
    const admitted = Array.from({ length: 5 }, () => limiter.admit('a'));
    expect(admitted).toEqual([true, true, false, false, false]);
    expect(limiter.admit('b')).toBe(true);
    now = 1000;
    expect(limiter.admit('a')).toBe(true); // new window: the summary of the last one went out first
    expect(lines).toEqual([expect.objectContaining({ level: 'warn', obj: { consumer: 'c', suppressed: { a: 3 }, total: 3, windowMs: 1000 } })]);
  });
});

describe('doneTtlMs and the retry horizon', () => {
  test('the horizon adds the largest backoffs, and per attempt the handler bound, a lease and a busy delay', () => {
    const horizon = retryHorizonMs({
      maxAttempts: 3,
      retryBackoff: { initialDelayMs: 1000, maxDelayMs: 60_000, multiplier: 2, jitter: 0.5 },
      leaseTtlMs: 10_000,
      busyRequeueDelayMs: 1000,
      handlerTimeoutMs: 5000,
    });
    expect(horizon).toBe(1500 + 3000 + 3 * (5000 + 10_000 + 1000));
  });

  test('a consumer warns at construction when doneTtlMs is shorter than its retry horizon', () => {
    const { lines, logger } = recordingLogger();
    new FnConsumer({ ...fastOptions(new InMemoryClaimer()), logger, leaseTtlMs: 1000, doneTtlMs: 2000 }, async () => ack());
    expect(lines).toEqual([expect.objectContaining({ level: 'warn', obj: expect.objectContaining({ doneTtlMs: 2000, retryHorizonMs: expect.any(Number) }) })]);
    expect(lines[0]!.msg).toContain('doneTtlMs is shorter than the retry horizon');
  });

  test('no warning with the defaults', () => {
    const { lines, logger } = recordingLogger();
    const options = fastOptions(new InMemoryClaimer());
    new FnConsumer({ name: options.name, claimer: options.claimer, logger }, async () => ack());
    expect(lines).toEqual([]);
  });
});

describe('a settle the broker refused, and one the source left undone on purpose', () => {
  function debugAndWarn(): { lines: Line[]; logger: Logger } {
    const lines: Line[] = [];
    const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, msg, obj: obj as Record<string, unknown> });
    return { lines, logger: { debug: at('debug'), info: () => undefined, warn: at('warn'), error: at('error') } };
  }

  test('a broker failure: one warn line; an intended redelivery (intendedRedelivery: true, as a rolled-back Kafka chunk): a debug line with its message, no warn; both reported as ack_failed', async () => {
    const intended = Object.assign(new Error('ack of t[0]@5 not made: the transaction its chunk shared rolled back; the record runs again'), { intendedRedelivery: true as const });
    for (const [failWith, expected] of [
      [new Error('channel closed'), { level: 'warn', msg: 'twophase: broker settle failed; the broker will redeliver and the claim decides' }],
      [intended, { level: 'debug', msg: `twophase: ${intended.message}` }],
    ] as const) {
      const { lines, logger } = debugAndWarn();
      const events: string[] = [];
      const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), logger, observers: [{ onEvent: (event) => void events.push(event.type) }] }, async () => ack());
      await consumer.start();
      await consumer.dispatch(recordingDelivery({ key: 'k' }, { failWith }));
      await consumer.stop();
      const settleLines = lines.filter((l) => l.obj.err === failWith);
      expect(settleLines).toEqual([expect.objectContaining(expected)]);
      expect(events).toContain('ack_failed');
    }
  });
});
