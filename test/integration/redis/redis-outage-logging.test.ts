/**
 * Issue #12 item 6 on a real (private) redis-server: while the claim store is down, every running
 * handler's lease extension fails every leaseTtlMs/3, and every commit fails; with the consumer's
 * logger that is a handful of lines and a summary (count by reason), never a line per failure.
 */
import Redis from 'ioredis';
import { ack, ConsumerBase, type Disposition, type Logger } from '../../../src';
import { MemoryBroker, MemorySource } from '../../../adapters/memory';
import { RedisClaimer } from '../../../adapters/redis';
import { describeWithServices } from '../../support/services';
import { silentLogger, uniquePrefix } from './support/redis-helpers';
import { waitFor } from '../../support/wait';
import { RedisServerProcess } from './support/redis-process';

class Held extends ConsumerBase<unknown> {
  started = 0;
  open!: () => void;
  private readonly gate = new Promise<void>((resolve) => (this.open = resolve));
  async handle(): Promise<Disposition> {
    this.started++;
    await this.gate;
    return ack();
  }
}

describeWithServices(['redis'], 'failure lines while Redis is down (private redis-server)', () => {
  let server: RedisServerProcess | undefined;
  afterEach(async () => {
    await server?.destroy();
    server = undefined;
  });

  it('lease-extend and commit failures of 20 handlers are summarised, not logged one by one', async () => {
    server = await RedisServerProcess.start();
    const client = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true, retryStrategy: () => 100, maxRetriesPerRequest: 1 });
    const claimer = new RedisClaimer({ redis: client, logger: silentLogger }, { prefix: uniquePrefix('flood'), operationTimeoutMs: 100 });
    const lines: { level: string; msg?: string; obj: Record<string, unknown> }[] = [];
    const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, msg, obj: obj as Record<string, unknown> });
    const logger: Logger = { debug: () => undefined, info: () => undefined, warn: at('warn'), error: at('error') };
    const broker = new MemoryBroker();
    const consumer = new Held({
      name: 'flood',
      claimer,
      source: new MemorySource({ broker, queue: 'q' }),
      logger,
      leaseTtlMs: 300,
      doneTtlMs: 600_000,
      concurrency: 20,
      commitDeadlineMs: 200,
    });
    try {
      await consumer.start();
      for (let i = 0; i < 20; i++) broker.publish('q', { body: '{}', headers: { 'idempotency-key': `k${i}` } });
      await waitFor(() => consumer.started === 20, { timeoutMs: 10_000 });
      await server.stop();
      await waitFor(() => claimer.stats.notReady >= 300, { timeoutMs: 20_000 }); // ~15 extension rounds of 20 handlers
      consumer.open();
      await waitFor(() => consumer.health().inFlight === 0, { timeoutMs: 20_000 });
      await consumer.stop();
    } finally {
      broker.close();
      await claimer.close();
      // Quit once reconnected: disconnect() while reconnecting leaves ioredis' 2 s force-close timer behind.
      if (!server.running) await server.startAgain();
      await waitFor(() => client.status === 'ready', { timeoutMs: 10_000 });
      await client.quit();
    }
    const extendLines = lines.filter((l) => l.msg?.includes('lease extend failed'));
    const commitLines = lines.filter((l) => l.obj.reason === 'commit_failed');
    const summaries = lines.filter((l) => l.obj.suppressed !== undefined);
    const suppressed = (reason: string) => summaries.reduce((n, l) => n + ((l.obj.suppressed as Record<string, number>)[reason] ?? 0), 0);
    expect(extendLines.length).toBeLessThanOrEqual(5);
    expect(extendLines.length + suppressed('lease_extend_failed')).toBeGreaterThanOrEqual(250);
    expect(commitLines.length + suppressed('commit_failed')).toBe(20);
    expect(commitLines[0]).toMatchObject({ level: 'error', obj: { consumer: 'flood', destination: 'ack' } });
    expect(lines.length).toBeLessThanOrEqual(15);
  });
});
