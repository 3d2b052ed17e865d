/**
 * Misuses of the transactional inbox on real Kafka + PostgreSQL, each told by an error that
 * names its fix:
 * - a handler written for `ctx.transaction` with a claimer that has no transaction (the
 *   PostgreSQL claimer's default standalone mode): refused at construction when the consumer
 *   declares `requireTransaction`; otherwise each delivery fails with an error naming
 *   `mode: 'transactional'`, not a TypeError.
 */
import { ack, type ConsumerEvent } from '../../../src';
import { PostgresClaimer } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { fastSource, keyedProducer, makeKafka, messages, TopicFixture, unique } from '../kafka/support/kafka-helpers';
import { waitFor } from '../../support/wait';
import { InboxConsumer, type InboxFixture, inboxFixture, writeLedger } from './support/inbox-fixture';

describeWithServices(['kafka', 'postgres'], 'transactional inbox misuses name their fix', () => {
  const kafka = makeKafka('twophase-pg-misuse');
  const topics = new TopicFixture(kafka);
  let f: InboxFixture;
  const consumers: InboxConsumer[] = [];
  beforeEach(async () => {
    f = await inboxFixture('misuse');
  });
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.stop()));
    await f.cleanup();
  });
  afterAll(() => topics.destroy());

  test('ctx.transaction with a standalone claimer: requireTransaction refuses at construction; without it the delivery fails naming mode: transactional', async () => {
    const topic = await topics.create('pg-misuse-standalone', 1);
    const groupId = unique('pg-misuse-standalone');
    const handler = async (m: { key: string }, ctx: { transaction: import('pg').PoolClient }) => {
      await writeLedger(ctx.transaction, f.ledger, m.key);
      return ack();
    };
    expect(
      () =>
        new InboxConsumer(
          { name: groupId, claimer: new PostgresClaimer({ pool: f.pool }, { schema: f.schema }), source: fastSource(kafka, { topics: [topic], groupId }), requireTransaction: true },
          handler,
        ),
    ).toThrow(/requireTransaction.*mode: 'transactional'/);

    const { producer, close } = await keyedProducer(kafka);
    await producer.send(topic, messages('pay', 1));
    await close();
    const events: ConsumerEvent[] = [];
    const c = new InboxConsumer(
      {
        name: groupId,
        claimer: new PostgresClaimer({ pool: f.pool }, { schema: f.schema }),
        source: fastSource(kafka, { topics: [topic], groupId }),
        retryBackoff: { initialDelayMs: 50, maxDelayMs: 100, jitter: 0 },
        observers: [{ onEvent: (event) => void events.push(event) }],
      },
      handler,
    );
    consumers.push(c);
    await c.start();
    const failed = await waitFor(() => events.find((e) => e.error !== undefined), { what: 'a failed delivery' });
    expect(String((failed.error as Error).message)).toMatch(/ctx\.transaction.*no transaction.*mode: 'transactional'/);
    expect((failed.error as Error).name).toBe('TransactionUnavailableError');
    expect((await f.counts()).size).toBe(0);
  }, 60_000);
});
