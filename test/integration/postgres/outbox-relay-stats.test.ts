/**
 * `relay.health().stats` on the real PostgreSQL + RabbitMQ: present when `start()` resolves (the
 * table as the relay found it), and following the table's pending count and lag within a poll of
 * a change, not at the next `statsIntervalMs` (set to a minute here, past every wait below).
 */
import { transactionOutbox } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { waitFor } from '../../support/wait';
import { GatedPublisher, OutboxFixture } from './support/outbox-fixture';

describeWithServices(['rabbitmq', 'postgres'], 'outbox relay health().stats', () => {
  let f: OutboxFixture;
  beforeEach(async () => {
    f = await OutboxFixture.create('outbox_stats');
  });
  afterEach(async () => {
    await f.cleanup();
  });

  const STATS_INTERVAL_MS = 60_000;
  const stage = (n: number) =>
    f.inTransaction((c) => transactionOutbox(c, { schema: f.schema }).stageMany(Array.from({ length: n }, (_, i) => ({ to: { exchange: f.exchange, routingKey: 'placed' }, body: { i } }))));

  test('stats are present when start() resolves: the table as the relay found it', async () => {
    await stage(2);
    const relay = f.relay({}, { statsIntervalMs: STATS_INTERVAL_MS });
    await relay.start();
    const stats = relay.health().stats;
    expect(stats).toMatchObject({ pending: 2, leased: 0, dead: {} });
    expect(stats!.oldestPendingAgeMs).toBeGreaterThanOrEqual(0);
  });

  test('once the relay emptied the table, stats show 0 pending and no lag (before the next statsIntervalMs)', async () => {
    await stage(3);
    const relay = f.relay({}, { statsIntervalMs: STATS_INTERVAL_MS });
    await relay.start();
    expect(relay.health().stats?.pending).toBe(3);
    await waitFor(async () => (await f.rows()).length === 0, { what: 'the table emptied by the relay' });
    await waitFor(() => relay.health().stats?.pending === 0, { what: 'health().stats.pending 0' });
    expect(relay.health().stats).toEqual({ pending: 0, oldestPendingAgeMs: 0, leased: 0, dead: {} });
  });

  test('a message staged while the relay runs shows as pending while its publish is held, then 0 once published', async () => {
    const publisher = new GatedPublisher(f.rabbit());
    const relay = f.relay({ publisher }, { statsIntervalMs: STATS_INTERVAL_MS });
    await relay.start();
    expect(relay.health().stats).toEqual({ pending: 0, oldestPendingAgeMs: 0, leased: 0, dead: {} });
    await stage(1);
    await waitFor(() => publisher.waiting.length === 1, { what: 'the publish held' });
    await waitFor(() => relay.health().stats?.pending === 1, { what: 'health().stats.pending 1' });
    publisher.openAll();
    await waitFor(async () => (await f.rows()).length === 0, { what: 'the message published and removed' });
    await waitFor(() => relay.health().stats?.pending === 0, { what: 'health().stats.pending back to 0' });
    expect(relay.health().stats!.oldestPendingAgeMs).toBe(0);
  });

  test('statsIntervalMs: 0 reads no counts at all', async () => {
    await stage(1);
    const relay = f.relay({}, { statsIntervalMs: 0 });
    await relay.start();
    await waitFor(async () => (await f.rows()).length === 0, { what: 'the message published' });
    expect(relay.health().stats).toBeUndefined();
  });
});
