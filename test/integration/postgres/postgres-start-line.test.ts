/**
 * The consumer's start line with a PostgresClaimer names the claimer's mode and schema (through
 * the claimer's own `describe()`: the core knows no PostgreSQL).
 */
import { ack } from '../../../src';
import { MemoryBroker, MemorySource } from '../../../adapters/memory';
import { PostgresClaimer } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { InboxConsumer } from './support/inbox-fixture';
import { freshSchema, type SchemaFixture } from './support/pg-helpers';

describeWithServices(['postgres'], 'consumer start line with a PostgresClaimer', () => {
  let f: SchemaFixture;
  beforeEach(async () => {
    f = await freshSchema('startline');
  });
  afterEach(async () => {
    await f.cleanup();
  });

  test.each(['standalone', 'transactional'] as const)('%s: one info line naming the mode and the schema', async (mode) => {
    const infos: { obj: Record<string, unknown>; msg?: string }[] = [];
    const logger = { debug: () => undefined, warn: () => undefined, error: () => undefined, info: (obj: object, msg?: string) => void infos.push({ obj: obj as Record<string, unknown>, msg }) };
    const claimer = new PostgresClaimer({ pool: f.pool, logger }, { schema: f.schema, mode });
    const consumer = new InboxConsumer(
      { name: 'orders', claimer, source: new MemorySource({ broker: new MemoryBroker(), queue: 'orders' }), leaseTtlMs: 5000, doneTtlMs: 60_000, concurrency: 2, logger },
      async () => ack(),
    );
    await consumer.start();
    await consumer.stop();
    const started = infos.filter((l) => l.msg === 'twophase: consumer started');
    expect(started).toHaveLength(1);
    expect(started[0]!.obj).toMatchObject({ consumer: 'orders', claimer: 'distributed', claimerDetails: { store: 'postgresql', mode, schema: f.schema } });
  });
});
