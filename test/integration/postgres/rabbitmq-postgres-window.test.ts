/**
 * RabbitMQ batch mode of the transactional inbox on real RabbitMQ + PostgreSQL: with
 * `batchClaims` and `transactionBatch: 'per-chunk'`, the deliveries of one claim window share one
 * transaction, each acked after its COMMIT; a failure rolls the window back and its deliveries
 * come back redelivered, each then claimed and run on its own. Ledger rows per key are counted
 * (the ledger has no unique key: a repeat would show); COMMITs are counted from the statements
 * sent on the pool's clients.
 */
import type { PoolClient } from 'pg';
import { ack } from '../../../src';
import { PostgresClaimer } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { Harness } from '../rabbitmq/support/harness';
import { waitFor } from '../../support/wait';
import { type InboxFixture, InboxConsumer, type InboxHandler, inboxFixture, ledgerHandler, writeLedger } from './support/inbox-fixture';

function countCommits(f: InboxFixture): { commits: number } {
  const counter = { commits: 0 };
  const observed = new WeakSet<PoolClient>();
  f.pool.on('acquire', (client: PoolClient) => {
    if (observed.has(client)) return;
    observed.add(client);
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const first = args[0];
      const text = typeof first === 'string' ? first : ((first as { text?: string } | undefined)?.text ?? '');
      counter.commits += (text.match(/(^|;)\s*COMMIT\s*(;|$)/g) ?? []).length;
      return query(...args);
    };
  });
  return counter;
}

describeWithServices(['rabbitmq', 'postgres'], 'transactional inbox, RabbitMQ batch mode (one transaction per claim window)', () => {
  let h: Harness;
  let f: InboxFixture;
  const consumers: InboxConsumer[] = [];
  beforeEach(async () => {
    h = new Harness();
    await h.admin.open();
    f = await inboxFixture('rwin');
  });
  afterEach(async () => {
    for (const c of consumers.splice(0)) await c.stop().catch(() => undefined);
    await h.cleanup();
    await f.cleanup();
  });

  function consumer(queue: string, handler: InboxHandler): InboxConsumer {
    const c = new InboxConsumer(
      {
        name: 'inbox-window',
        claimer: new PostgresClaimer({ pool: f.pool, logger: h.logger }, { schema: f.schema, mode: 'transactional', transactionBatch: 'per-chunk' }),
        source: h.source({ queue, batchClaims: true, batchWindowMs: 20 }),
        concurrency: 16,
        leaseTtlMs: 5000,
        busyRequeueDelayMs: 50,
        retryBackoff: { initialDelayMs: 50, maxDelayMs: 100, jitter: 0 },
        logger: h.logger,
      },
      handler,
    );
    consumers.push(c);
    return c;
  }

  test('deliveries of one window share one transaction: every key booked once, far fewer COMMITs than messages', async () => {
    const queue = h.queue('inbox-window');
    const counted = countCommits(f);
    const count = 64;
    await consumer(queue, ledgerHandler(f.ledger)).start();
    await Promise.all(Array.from({ length: count }, (_, n) => h.admin.publish('', queue, { n }, { messageId: `m-${n}`, headers: { 'idempotency-key': `pay-${n}` } })));
    await waitFor(async () => (await f.counts()).size === count && (await h.admin.messageCount(queue)) === 0, { what: 'every key booked', timeoutMs: 60_000 });
    expect([...(await f.counts()).values()].every((n) => n === 1)).toBe(true);
    // The attempt counts' own transactions end in COMMIT too: one per window, plus one per window's chunk.
    expect(counted.commits).toBeLessThan(count);
  }, 90_000);

  test('a failing delivery rolls its window back; the window comes back redelivered and runs one by one; every key booked once', async () => {
    const queue = h.queue('inbox-window-fail');
    const count = 32;
    const runs = new Map<string, number>();
    const started = consumer(queue, async (m, ctx) => {
      runs.set(m.key, (runs.get(m.key) ?? 0) + 1);
      await writeLedger(ctx.transaction, f.ledger, m.key);
      if (m.key.endsWith(':pay-7') && ctx.attempt === 1) throw new Error('flaky once');
      return ack();
    });
    await started.start();
    await Promise.all(Array.from({ length: count }, (_, n) => h.admin.publish('', queue, { n }, { messageId: `m-${n}`, headers: { 'idempotency-key': `pay-${n}` } })));
    await waitFor(async () => (await f.counts()).size === count && (await h.admin.messageCount(queue)) === 0, { what: 'every key booked', timeoutMs: 60_000 });
    await waitFor(async () => [...(await f.counts()).values()].every((n) => n === 1), { what: 'one row per key' });
    expect([...(await f.counts()).values()].every((n) => n === 1)).toBe(true);
    expect(runs.get([...runs.keys()].find((k) => k.endsWith(':pay-7'))!)).toBe(2);
  }, 90_000);
});
