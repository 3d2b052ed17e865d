/**
 * The outbox table stays bounded: the relay DELETEs each row once the broker confirmed it, so
 * after a batch is relayed the table is empty, and once VACUUM ran (autovacuum's job in
 * production) the next batches reuse the space instead of growing the table. The size after a
 * large number of messages is measured in `npm run bench:outbox` (docs/performance.md).
 */
import { stageOutbox } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { waitFor } from '../../support/wait';
import { OutboxFixture } from './support/outbox-fixture';

const ROUNDS = 4;
const PER_ROUND = 1000;
const BODY = Buffer.alloc(1024, 0x61);

describeWithServices(['rabbitmq', 'postgres'], 'transactional outbox: table size', () => {
  let f: OutboxFixture;
  beforeEach(async () => {
    f = await OutboxFixture.create('outbox_size');
  });
  afterEach(async () => {
    await f.cleanup();
  });

  test(`relaying ${ROUNDS} batches of ${PER_ROUND} 1 KiB messages leaves no row; VACUUM empties the heap after each batch and the indexes stay under twice one batch's size`, async () => {
    const table = `${f.schema}.twophase_outbox`;
    // relayOnce() without start(): the publisher is started here.
    const publisher = f.rabbit();
    const relay = f.relay({ publisher }, { batchSize: 500 });
    await publisher.start();
    const sizes: { heap: number; total: number }[] = [];
    try {
      for (let round = 0; round < ROUNDS; round++) {
        for (let t = 0; t < PER_ROUND / 500; t++) {
          await f.inTransaction((c) =>
            stageOutbox(c, Array.from({ length: 500 }, (_, i) => ({ to: { exchange: f.exchange, routingKey: 'placed' }, body: BODY, orderingKey: `k${i % 10}` })), { schema: f.schema }),
          );
        }
        expect(Number((await f.pool.query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n)).toBe(PER_ROUND);
        let relayed = 0;
        for (;;) {
          const cycle = await relay.relayOnce();
          relayed += cycle.published;
          if (cycle.claimed === 0) break;
        }
        expect(relayed).toBe(PER_ROUND);
        expect(Number((await f.pool.query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n)).toBe(0);
        await (await f.admin.ch()).purgeQueue(f.queue);
        // VACUUM removes the deleted rows and truncates the empty heap, once no other session of
        // the (shared) server still holds a snapshot older than the DELETEs.
        const size = await waitFor(
          async () => {
            await f.pool.query(`VACUUM ${table}`);
            const r = await f.pool.query<{ heap: string; total: string }>(`SELECT pg_relation_size($1::regclass) AS heap, pg_total_relation_size($1::regclass) AS total`, [table]);
            return Number(r.rows[0]!.heap) === 0 ? { heap: 0, total: Number(r.rows[0]!.total) } : undefined;
          },
          { what: `VACUUM to empty ${table}`, intervalMs: 200 },
        );
        sizes.push(size);
      }
    } finally {
      await publisher.close();
    }
    // What is left is the indexes' emptied pages: a btree reuses them one VACUUM later, so they
    // level off under twice the first batch's (seen: 1.0, 1.55, 1.55, 1.68, 1.68, 1.68 × over six
    // batches of 1,500) instead of adding a batch's worth each time.
    expect(sizes[ROUNDS - 1]!.total).toBeLessThanOrEqual(sizes[0]!.total * 2);
  });
});
