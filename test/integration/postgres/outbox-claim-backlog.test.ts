/**
 * The outbox claim's cost does not grow with the backlog behind a few ordering keys (migration 6).
 *
 * The measure is the shared buffers one claim call touches (`EXPLAIN (ANALYZE, BUFFERS)` of the
 * call: the function's own statements count in it), a count that does not depend on the machine's
 * speed. Each call runs in a transaction rolled back afterwards, so it changes nothing. The same
 * table shape is built twice, with 100 and with 1,000 rows waiting per key (4 keys, interleaved as
 * a busy stager commits them, and one key held by a dead head), followed by three rows without a
 * key; the claim must touch about as many buffers in both.
 */
import { PostgresOutboxStore, stageOutbox } from '../../../adapters/postgres';
import type { OutboxMessage } from '../../../src';
import { describeWithServices } from '../../support/services';
import { freshSchema, type SchemaFixture } from './support/pg-helpers';

const KEYS = ['k0', 'k1', 'k2', 'k3', 'held'];
const to = { exchange: 'x', routingKey: 'r' };
const LIMIT = 10;

interface Cost {
  /** Shared buffers touched by the claim call (hit + read). */
  readonly buffers: number;
  /** The ordering keys of the rows it leased, in order (null: no key). */
  readonly keys: (string | null)[];
}

describeWithServices(['postgres'], 'transactional outbox: the claim over a deep backlog behind few keys', () => {
  const fixtures: SchemaFixture[] = [];
  afterAll(async () => {
    for (const f of fixtures) await f.cleanup();
  });

  /** One claim of LIMIT rows by `owner`, rolled back: its buffers and the keys it leased. */
  async function claimCost(f: SchemaFixture, owner: string): Promise<Cost> {
    const client = await f.pool.connect();
    try {
      await client.query('BEGIN');
      const call = `SELECT * FROM ${f.schema}.twophase_outbox_claim('${owner}', ${LIMIT}, 60000, '{rabbitmq}', true)`;
      // The first call also compiles the function in this session (catalog reads): not counted.
      await client.query('SAVEPOINT first');
      const keys = (await client.query<{ ordering_key: string | null }>(call)).rows.map((r) => r.ordering_key);
      await client.query('ROLLBACK TO SAVEPOINT first');
      const plan = (await client.query<{ 'QUERY PLAN': [{ Plan: Record<string, number> }] }>(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${call}`)).rows[0]!['QUERY PLAN'][0].Plan;
      return { buffers: plan['Shared Hit Blocks']! + plan['Shared Read Blocks']!, keys };
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  }

  /** A fresh migrated schema, its store, and a stager committing one transaction per call. */
  async function table(): Promise<{ f: SchemaFixture; store: PostgresOutboxStore; stage(messages: OutboxMessage[]): Promise<void> }> {
    const f = await freshSchema('outbox_backlog');
    fixtures.push(f);
    const store = new PostgresOutboxStore({ pool: f.pool }, { schema: f.schema });
    const stage = async (messages: OutboxMessage[]) => {
      const client = await f.pool.connect();
      try {
        await client.query('BEGIN');
        await stageOutbox(client, messages, { schema: f.schema, notify: false });
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    };
    return { f, store, stage };
  }

  /** A table with `perKey` rows waiting behind each key, then three rows without a key; the claim's cost with the keys free, and with them leased to another relay. */
  async function scenario(perKey: number): Promise<{ free: Cost; leased: Cost }> {
    const { f, store, stage } = await table();
    // The first row of `held` goes dead: under deadKeyPolicy 'hold' its key waits behind it.
    await stage([{ to, body: 'dead', orderingKey: 'held' }]);
    const first = await store.claim({ owner: 'setup', limit: 1, leaseMs: 60_000, systems: ['rabbitmq'], deadKeyPolicy: 'hold' });
    expect(first.records.map((r) => r.orderingKey)).toEqual(['held']);
    expect(await store.fail(first.lease, [{ sequence: first.records[0]!.sequence, reason: 'poison', error: 'test', retryInMs: undefined }])).toBe(1);
    for (let start = 0; start < perKey; start += 200) {
      const rows = Math.min(200, perKey - start);
      await stage(Array.from({ length: rows * KEYS.length }, (_, i) => ({ to, body: 'b', orderingKey: KEYS[i % KEYS.length]! })));
    }
    await stage([1, 2, 3].map(() => ({ to, body: 'keyless', orderingKey: null })));
    await f.pool.query(`ANALYZE ${f.schema}.twophase_outbox`);

    const free = await claimCost(f, 'me');
    // Another relay takes the four free keys (their first rows come first in seq order).
    const other = await store.claim({ owner: 'other', limit: LIMIT, leaseMs: 60_000, systems: ['rabbitmq'], deadKeyPolicy: 'hold' });
    expect(new Set(other.records.map((r) => r.orderingKey))).toEqual(new Set(['k0', 'k1', 'k2', 'k3']));
    const leased = await claimCost(f, 'me');
    return { free, leased };
  }

  test('a claim touches about as many buffers with 1,000 rows waiting per key as with 100 (4 keys, a key held by a dead head, rows without a key behind)', async () => {
    const small = await scenario(100);
    const large = await scenario(1000);
    // The rows leased: the first LIMIT rows of the four free keys; with those keys leased
    // elsewhere, the three rows without a key (never the held key's rows).
    const interleaved = Array.from({ length: LIMIT }, (_, i) => ['k0', 'k1', 'k2', 'k3'][i % 4]);
    for (const run of [small, large]) {
      expect(run.free.keys).toEqual(interleaved);
      expect(run.leased.keys).toEqual([null, null, null]);
    }
    // Ten times the backlog: the claim's buffers stay within half again of the small table's.
    expect(large.free.buffers).toBeLessThanOrEqual(small.free.buffers * 1.5);
    expect(large.leased.buffers).toBeLessThanOrEqual(small.leased.buffers * 1.5);
  });

  test('many keys of one row each, and rows without a key: the claim touches about as many buffers with 2,000 of each as with 200', async () => {
    const costs: Cost[] = [];
    for (const n of [200, 2000]) {
      const { f, stage } = await table();
      await stage(Array.from({ length: 2 * n }, (_, i) => ({ to, body: 'b', orderingKey: i % 2 === 0 ? `key-${i}` : null })));
      await f.pool.query(`ANALYZE ${f.schema}.twophase_outbox`);
      costs.push(await claimCost(f, 'me'));
    }
    const [small, large] = costs as [Cost, Cost];
    for (const run of [small, large]) expect(run.keys).toEqual(Array.from({ length: LIMIT }, (_, i) => (i % 2 === 0 ? `key-${i}` : null)));
    expect(large.buffers).toBeLessThanOrEqual(small.buffers * 1.5);
  });
});
