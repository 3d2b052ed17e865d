/**
 * Misuses of the transactional inbox on real Kafka + PostgreSQL, each told by an error that
 * names its fix:
 * - a handler written for `ctx.transaction` with a claimer that has no transaction (the
 *   PostgreSQL claimer's default standalone mode): refused at construction when the consumer
 *   declares `requireTransaction`; otherwise each delivery fails with an error naming
 *   `mode: 'transactional'`, not a TypeError;
 * - a handler that ends or nests the inbox transaction itself (a data-access helper wrapping its
 *   work in BEGIN … COMMIT, a ROLLBACK): the statement is refused before it is sent; the error
 *   that says why dead-letters the delivery at once when it propagates, and a caught one fails
 *   the commit (requeued); no effect is applied twice.
 */
import { ack, type ConsumerEvent, type Logger } from '../../../src';
import { PostgresClaimer } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { fastSource, keyedProducer, makeKafka, messages, TopicFixture, unique } from '../kafka/support/kafka-helpers';
import { waitFor } from '../../support/wait';
import type { PoolClient } from 'pg';
import { InboxConsumer, type InboxFixture, inboxFixture, type InboxHandler, writeLedger } from './support/inbox-fixture';
import { silentLogger } from '../redis/support/redis-helpers';

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

  /** The consumer's log lines that carry an error (`err`), in order. */
  function errorLog(errors: Error[]): Logger {
    const note = (obj: object) => {
      const err = (obj as { err?: unknown }).err;
      if (err instanceof Error) errors.push(err);
    };
    return { debug: () => undefined, info: () => undefined, warn: note, error: note } as Logger;
  }

  function transactionalConsumer(topic: string, groupId: string, handler: InboxHandler, events: ConsumerEvent[], errors: Error[]): InboxConsumer {
    const c = new InboxConsumer(
      {
        name: groupId,
        claimer: new PostgresClaimer({ pool: f.pool, logger: silentLogger }, { schema: f.schema, mode: 'transactional' }),
        source: fastSource(kafka, { topics: [topic], groupId }),
        leaseTtlMs: 2000,
        busyRequeueDelayMs: 50,
        retryBackoff: { initialDelayMs: 50, maxDelayMs: 100, jitter: 0 },
        observers: [{ onEvent: (event) => void events.push(event) }],
        logger: errorLog(errors),
      },
      handler,
    );
    consumers.push(c);
    return c;
  }

  test('a helper that wraps its write in BEGIN … COMMIT on ctx.transaction, its error propagating: refused, dead-lettered at once (permanent), no effect', async () => {
    const topic = await topics.create('pg-misuse-commit', 1);
    const groupId = unique('pg-misuse-commit');
    const { producer, close } = await keyedProducer(kafka);
    await producer.send(topic, messages('pay', 1));
    await close();
    const events: ConsumerEvent[] = [];
    const errors: Error[] = [];
    let runs = 0;
    const helper = async (tx: PoolClient, key: string) => {
      await tx.query('BEGIN');
      await writeLedger(tx, f.ledger, key);
      await tx.query('/* helper */ COMMIT');
    };
    await transactionalConsumer(topic, groupId, async (m, ctx) => {
      runs++;
      await helper(ctx.transaction, m.key);
      return ack();
    }, events, errors).start();
    await waitFor(async () => events.some((e) => e.type === 'rejected') && (await topics.fullyCommitted(groupId, topic)), { what: 'the dead letter and its offset committed', timeoutMs: 30_000 });
    // The handler's own code sent BEGIN: a retry would meet it again, so it ran once.
    expect(runs).toBe(1);
    expect(events.filter((e) => e.type === 'rejected')).toMatchObject([{ reason: 'permanent_error', attempt: 1 }]);
    expect(await f.counts()).toEqual(new Map());
    expect(errors[0]?.name).toBe('TransactionMisuseError');
    expect(errors[0]?.message).toMatch(/BEGIN.*ctx\.transaction.*nothing was sent/);
  }, 60_000);

  test('a handler that sends ROLLBACK, writes and acks: refused before sending; the delivery fails saying why (no other statement\'s error), one effect in the end', async () => {
    const topic = await topics.create('pg-misuse-rollback', 1);
    const groupId = unique('pg-misuse-rollback');
    const { producer, close } = await keyedProducer(kafka);
    await producer.send(topic, messages('pay', 1));
    await close();
    const events: ConsumerEvent[] = [];
    const errors: Error[] = [];
    await transactionalConsumer(topic, groupId, async (m, ctx) => {
      if (ctx.attempt === 1) await ctx.transaction.query('ROLLBACK').catch(() => undefined);
      await writeLedger(ctx.transaction, f.ledger, m.key);
      return ack();
    }, events, errors).start();
    await waitFor(async () => (await topics.fullyCommitted(groupId, topic)) && (await f.counts()).size === 1, { what: 'the key booked and its offset committed', timeoutMs: 30_000 });
    expect([...(await f.counts()).values()]).toEqual([1]);
    expect(events.filter((e) => e.type === 'rejected')).toEqual([]);
    expect(events.filter((e) => e.type === 'committed').map((e) => e.attempt)).toEqual([2]);
    const message = errors.map((e) => e.message).join(' | ');
    expect(message).toMatch(/ROLLBACK/);
    expect(message).not.toMatch(/division by zero/);
  }, 60_000);

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
