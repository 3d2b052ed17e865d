/**
 * Issue #12 item 4, in process (exitProcess: false): the runner's onShutdown steps, their bounds,
 * its lifecycle lines and the default exit deadline. The child-process tests on RabbitMQ + Redis
 * (test/integration/rabbitmq/runner-exit.test.ts) cover the exit itself.
 */
import { ack, ConfigurationError, EXIT_MARGIN_MS, InMemoryClaimer, type Logger, runConsumers } from '../../src';
import { FnConsumer, fastOptions, ManualSource } from './helpers';
import { waitFor } from '../support/wait';

function recording(): { lines: { level: string; msg?: string; obj: Record<string, unknown> }[]; logger: Logger } {
  const lines: { level: string; msg?: string; obj: Record<string, unknown> }[] = [];
  const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, msg, obj: obj as Record<string, unknown> });
  return { lines, logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } };
}

describe('runConsumers shutdown steps', () => {
  test('a consumer passed without the array, or an array holding something else, is a ConfigurationError naming the mistake', async () => {
    const lone = { start: async () => undefined, stop: async () => undefined, health: () => ({}) as never };
    await expect(runConsumers(lone as never, { signals: [], exitProcess: false })).rejects.toThrow(/consumers must be an array \(runConsumers\(\[consumer\]\)\), got an object/);
    await expect(runConsumers([lone, 'payments'] as never, { signals: [], exitProcess: false })).rejects.toThrow(/consumers\[1\] is not a consumer.*'payments' \(a string\)/);
    await expect(runConsumers(lone as never)).rejects.toBeInstanceOf(ConfigurationError);
  });

  test('SIGTERM: "shutting down", consumers stopped, then the steps in order (a failing or hanging one logged, the next still run), then "stopped"', async () => {
    const source = new ManualSource();
    const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), source, shutdownTimeoutMs: 2000 }, async () => ack());
    const { lines, logger } = recording();
    const order: string[] = [];
    await runConsumers([consumer], {
      logger,
      exitProcess: false,
      closeTimeoutMs: 50,
      onShutdown: [
        (signal) => void order.push(`first ${signal} closed=${source.closed}`),
        async function failing() {
          order.push('failing');
          throw new Error('quit failed');
        },
        function hanging() {
          order.push('hanging');
          return new Promise(() => undefined);
        },
        async () => void order.push('last'),
      ],
    });
    process.emit('SIGTERM', 'SIGTERM');
    await waitFor(() => lines.some((l) => l.msg === 'twophase: stopped'));
    expect(order).toEqual(['first SIGTERM closed=true', 'failing', 'hanging', 'last']);
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      ['info', 'twophase: shutting down'],
      ['warn', 'twophase: an onShutdown step failed; going on'],
      ['warn', 'twophase: an onShutdown step did not finish within closeTimeoutMs; going on'],
      ['info', 'twophase: stopped'],
    ]);
    expect(lines[0]!.obj).toMatchObject({ signal: 'SIGTERM', consumers: 1 });
    expect(lines[1]!.obj).toMatchObject({ step: 'failing' });
    expect(lines[2]!.obj).toMatchObject({ step: 'hanging', closeTimeoutMs: 50 });
    expect(process.listenerCount('SIGTERM')).toBe(0);
  });

  test('a consumer that fails to start: every consumer stopped, the steps run, the error rethrown and logged', async () => {
    const events: string[] = [];
    const started = { start: async () => void events.push('a started'), stop: async () => void events.push('a stopped'), health: () => ({}) as never };
    const failing = {
      start: async () => {
        throw new Error('claim store unreachable');
      },
      stop: async () => void events.push('b stopped'),
      health: () => ({}) as never,
    };
    const { lines, logger } = recording();
    await expect(
      runConsumers([started, failing], { logger, exitProcess: false, onShutdown: [() => void events.push('redis closed'), () => void events.push('pool closed')] }),
    ).rejects.toThrow('claim store unreachable');
    expect(events).toEqual(['a started', 'a stopped', 'b stopped', 'redis closed', 'pool closed']);
    expect(lines.map((l) => [l.level, l.msg])).toEqual([['error', 'twophase: a consumer failed to start; stopping the others and running onShutdown']]);
    expect(process.listenerCount('SIGTERM')).toBe(0);
  });

  test('runner.stop() runs the steps too, once, with no signal', async () => {
    const consumer = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), source: new ManualSource() }, async () => ack());
    const calls: unknown[] = [];
    const runner = await runConsumers([consumer], { logger: recording().logger, exitProcess: false, onShutdown: (signal) => void calls.push(signal) });
    await Promise.all([runner.stop(), runner.stop()]);
    expect(calls).toEqual([undefined]);
    expect(process.listenerCount('SIGTERM')).toBe(0);
  });

  test('the default exit deadline: the largest shutdownTimeoutMs + EXIT_MARGIN_MS + closeTimeoutMs per step', async () => {
    const a = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), source: new ManualSource(), shutdownTimeoutMs: 20_000 }, async () => ack());
    const b = new FnConsumer({ ...fastOptions(new InMemoryClaimer()), source: new ManualSource(), shutdownTimeoutMs: 7000 }, async () => ack());
    const { lines, logger } = recording();
    // exitProcess stays off here (no exit in the test process); the deadline is still computed and logged.
    await runConsumers([a, b], { logger, exitProcess: false, onShutdown: [() => undefined, () => undefined] });
    process.emit('SIGTERM', 'SIGTERM');
    await waitFor(() => lines.some((l) => l.msg === 'twophase: stopped'));
    expect(EXIT_MARGIN_MS).toBe(15_000);
    expect(lines[0]!.obj).toMatchObject({ exitProcess: false, exitDeadlineMs: 20_000 + EXIT_MARGIN_MS + 2 * 5000 });
  });

  test('options are checked: unknown names, steps that are not functions, bad timeouts', async () => {
    await expect(runConsumers([], { onShutdown: ['redis.quit()'] } as never)).rejects.toThrow('onShutdown must be a function or an array of functions');
    await expect(runConsumers([], { closeTimeoutMs: 0 })).rejects.toThrow('closeTimeoutMs must be an integer number of ms');
    await expect(runConsumers([], { exitAfter: 1 } as never)).rejects.toThrow('unknown option "exitAfter"');
    expect(process.listenerCount('SIGTERM')).toBe(0);
  });
});
