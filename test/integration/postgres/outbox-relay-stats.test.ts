/**
 * `relay.health().stats` on the real PostgreSQL + RabbitMQ: present when `start()` resolves (the
 * table as the relay found it), and following the table's pending count and lag within a poll of
 * a change, not at the next `statsIntervalMs` (set to a minute here, past every wait below).
 */
import { transactionOutbox } from '../../../adapters/postgres';
import { stats as statsStatement } from '../../../adapters/postgres/statements/outbox';
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

  test('the store counts pending, leased (live leases only) and dead rows by reason in one pass over the table', async () => {
    await stage(5);
    const t = `${f.schema}.twophase_outbox`;
    const seqs = (await f.pool.query<{ seq: string }>(`SELECT seq FROM ${t} ORDER BY seq`)).rows.map((r) => r.seq);
    // Two live leases, one run out; two dead by one reason, one by another; the oldest pending row 5 s old.
    await f.pool.query(`UPDATE ${t} SET lease_owner = 'r', fencing_token = 1, lease_expires_at = clock_timestamp() + interval '1 minute' WHERE seq = ANY($1::bigint[])`, [[seqs[0], seqs[1]]]);
    await f.pool.query(`UPDATE ${t} SET lease_owner = 'r', fencing_token = 2, lease_expires_at = clock_timestamp() - interval '1 second', created_at = clock_timestamp() - interval '5 seconds' WHERE seq = $1`, [seqs[2]]);
    await f.pool.query(`UPDATE ${t} SET state = 'dead', dead_reason = 'unroutable', created_at = clock_timestamp() - interval '1 hour' WHERE seq = $1`, [seqs[3]]);
    await f.pool.query(`UPDATE ${t} SET state = 'dead', dead_reason = 'too_large' WHERE seq = $1`, [seqs[4]]);
    await stage(1);
    await f.pool.query(`UPDATE ${t} SET state = 'dead', dead_reason = 'unroutable' WHERE seq = (SELECT max(seq) FROM ${t})`);

    const stats = await f.store().stats();
    expect(stats).toMatchObject({ pending: 3, leased: 2, dead: { unroutable: 2, too_large: 1 } });
    // The dead row's hour does not count: the oldest pending row is the one 5 s old.
    expect(stats.oldestPendingAgeMs).toBeGreaterThanOrEqual(5000);
    expect(stats.oldestPendingAgeMs).toBeLessThan(60_000);

    // One scan of the outbox table, whatever its size (it was four: one per figure).
    const plan = (await f.pool.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${statsStatement(f.schema)}`)).rows[0]!['QUERY PLAN'];
    const scans: string[] = [];
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) return node.forEach(walk);
      if (!node || typeof node !== 'object') return;
      const n = node as Record<string, unknown>;
      if (n['Relation Name'] === 'twophase_outbox') scans.push(String(n['Node Type']));
      Object.values(n).forEach(walk);
    };
    walk(plan);
    expect(scans).toHaveLength(1);
  });

  test('statsIntervalMs: 0 reads no counts at all', async () => {
    await stage(1);
    const relay = f.relay({}, { statsIntervalMs: 0 });
    await relay.start();
    await waitFor(async () => (await f.rows()).length === 0, { what: 'the message published' });
    expect(relay.health().stats).toBeUndefined();
  });
});
