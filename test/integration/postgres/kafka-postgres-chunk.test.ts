/**
 * Kafka batch mode of the transactional inbox (`transactionBatch: 'per-chunk'`) on real Kafka +
 * PostgreSQL: the records of a chunk of one partition share one transaction, so a chunk costs one
 * COMMIT; a failing record rolls the chunk back and the chunk's records run again one by one, so
 * every effect written through `ctx.transaction` still lands exactly once; a consumer killed
 * (SIGKILL) while a chunk is open applies nothing of that chunk, and its successor books each key once.
 *
 * COMMITs are counted from the statements the claimer sends on its pool clients (every client is
 * observed from its first checkout), not estimated.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import type { PoolClient } from 'pg';
import { ack, type Logger, PermanentError } from '../../../src';
import { PostgresClaimer } from '../../../adapters/postgres';
import type { KafkaSource } from '../../../adapters/kafka';
import { describeWithServices } from '../../support/services';
import { fastSource, keyedProducer, makeKafka, messages, TopicFixture, unique} from '../kafka/support/kafka-helpers';
import { waitFor } from '../../support/wait';
import { InboxConsumer, type InboxFixture, inboxFixture, type InboxHandler, ledgerHandler, writeLedger } from './support/inbox-fixture';
import { pgConfig } from './support/pg-helpers';

/** Counts the COMMIT statements sent on every client of `f.pool` (a simple query may hold several statements). */
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
      // The COMMIT that ends the attempt counts' implicit transaction before the claim's BEGIN
      // (`COMMIT; BEGIN` in one claim text) commits no effect: not counted.
      counter.commits += (text.match(/(^|;)\s*COMMIT\s*(;(?!\s*BEGIN)|$)/g) ?? []).length;
      return query(...args);
    };
  });
  return counter;
}

describeWithServices(['kafka', 'postgres'], 'transactional inbox, Kafka batch mode (per-chunk transactions)', () => {
  const kafka = makeKafka('twophase-pg-chunk');
  const topics = new TopicFixture(kafka);
  let f: InboxFixture;
  const consumers: InboxConsumer[] = [];
  beforeEach(async () => {
    f = await inboxFixture('kchunk');
  });
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.stop()));
    await f.cleanup();
  });
  afterAll(() => topics.destroy());

  function consumer(topic: string, groupId: string, handler: InboxHandler, transactionBatch: 'per-record' | 'per-chunk', logger?: Logger): { consumer: InboxConsumer; source: KafkaSource } {
    const source = fastSource(kafka, { topics: [topic], groupId, claimBatchSize: transactionBatch === 'per-chunk' ? 16 : 1, preclaimMaxAgeMs: 20_000 });
    const c = new InboxConsumer(
      {
        name: groupId,
        claimer: new PostgresClaimer({ pool: f.pool }, { schema: f.schema, mode: 'transactional', transactionBatch }),
        source,
        concurrency: 4,
        leaseTtlMs: 30_000,
        maxAttempts: 3,
        busyRequeueDelayMs: 50,
        retryBackoff: { initialDelayMs: 50, maxDelayMs: 200, jitter: 0 },
        ...(logger ? { logger } : {}),
      },
      handler,
    );
    consumers.push(c);
    return { consumer: c, source };
  }

  async function produce(label: string, count: number): Promise<string> {
    const topic = await topics.create(label, 1);
    const { producer, close } = await keyedProducer(kafka);
    await producer.send(topic, messages('pay', count));
    await close();
    return topic;
  }

  // Chunks of 16 records with concurrency 4: a member's commit never holds a handler slot while it
  // waits for the later members (that would deadlock; see partition-worker.ts).
  test('one partition, 60 records: each booked once, with far fewer COMMITs than records (one per chunk); per-record mode commits once per record', async () => {
    const count = 60;
    const counted = countCommits(f);
    const chunked = await produce('pg-chunk', count);
    const group = unique('pg-chunk-group');
    const { consumer: c, source } = consumer(chunked, group, ledgerHandler(f.ledger), 'per-chunk');
    await c.start();
    await waitFor(async () => (await f.counts()).size === count && (await topics.fullyCommitted(group, chunked)), { what: 'every key booked and every offset committed', timeoutMs: 90_000 });
    await c.stop();
    const chunkCommits = counted.commits;
    expect([...(await f.counts()).values()].every((n) => n === 1)).toBe(true);
    expect(source.stats.chunkRollbacks).toBe(0);
    // Chunks grow 1, 2, 4, 8, 16 records (claimBatchSize 16): at most 9 chunks for 60 records.
    expect(chunkCommits).toBeGreaterThan(0);
    expect(chunkCommits).toBeLessThanOrEqual(12);

    // The same records, per record: one transaction (and COMMIT) per record, plus the attempt count's own.
    await f.pool.query(`TRUNCATE ${f.ledger}`);
    counted.commits = 0;
    const perRecord = await produce('pg-chunk-per-record', count);
    const group2 = unique('pg-chunk-per-record-group');
    await consumer(perRecord, group2, ledgerHandler(f.ledger), 'per-record').consumer.start();
    await waitFor(async () => (await f.counts()).size === count && (await topics.fullyCommitted(group2, perRecord)), { what: 'every key booked (per record)', timeoutMs: 90_000 });
    expect(counted.commits).toBeGreaterThanOrEqual(count);
  }, 180_000);

  test('a key repeated inside one chunk: the chunk ends before the copy and commits; the copy is then a duplicate; nothing rolls back, every key booked once', async () => {
    const topic = await topics.create('pg-chunk-repeat', 1);
    const group = unique('pg-chunk-repeat-group');
    const batch = messages('pay', 30);
    const { producer, close } = await keyedProducer(kafka);
    // pay-9 comes again right after pay-10: both fall in the chunk pay-7 … pay-14
    await producer.send(topic, [...batch.slice(0, 11), batch[9]!, ...batch.slice(11)]);
    await close();
    const { consumer: c, source } = consumer(topic, group, ledgerHandler(f.ledger), 'per-chunk');
    await c.start();
    await waitFor(async () => (await f.counts()).size === 30 && (await topics.fullyCommitted(group, topic)), { what: 'every key booked and every offset committed', timeoutMs: 90_000 });
    expect([...(await f.counts()).values()].every((n) => n === 1)).toBe(true);
    expect(source.stats.settled).toBe(31);
    expect(source.stats.chunkRollbacks).toBe(0);
  }, 120_000);

  test('graceful stop while a chunk is open: the chunk rolls back, its offsets stay uncommitted; the next consumer books every key once', async () => {
    const count = 40;
    const topic = await produce('pg-chunk-stop', count);
    const group = unique('pg-chunk-stop-group');
    let release: (() => void) | undefined;
    const reached = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slow: InboxHandler = async (m, ctx) => {
      await writeLedger(ctx.transaction, f.ledger, m.key);
      if (m.key.endsWith(':pay-10')) {
        release!();
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
      return ack({ booked: m.key });
    };
    const first = consumer(topic, group, slow, 'per-chunk');
    await first.consumer.start();
    await reached;
    await first.consumer.stop();
    const afterStop = await f.counts();
    // pay-9 and pay-10 shared the open chunk (chunks of 1, 2, 4, 8 records: pay-7 … pay-14): the
    // stopped consumer applied neither; the records before the chunk were committed.
    expect([...afterStop.keys()].filter((k) => /:pay-(9|10)$/.test(k))).toEqual([]);
    expect(afterStop.size).toBeGreaterThan(0);
    const second = consumer(topic, group, ledgerHandler(f.ledger), 'per-chunk');
    await second.consumer.start();
    await waitFor(async () => (await f.counts()).size === count && (await topics.fullyCommitted(group, topic)), { what: 'every key booked and every offset committed', timeoutMs: 90_000 });
    expect([...(await f.counts()).values()].every((n) => n === 1)).toBe(true);
  }, 120_000);

  test('a record that fails once and a poison record in a chunk: the chunk rolls back, its records run again one by one; every other key booked once, the poison one never', async () => {
    const count = 40;
    const topic = await produce('pg-chunk-fail', count);
    const group = unique('pg-chunk-fail-group');
    const runs = new Map<string, number>();
    const handler: InboxHandler = async (m, ctx) => {
      await writeLedger(ctx.transaction, f.ledger, m.key);
      runs.set(m.key, (runs.get(m.key) ?? 0) + 1);
      if (m.key.endsWith(':pay-20') && ctx.attempt < 2) throw new Error('flaky once');
      if (m.key.endsWith(':pay-33')) throw new PermanentError('poison');
      return ack({ booked: m.key });
    };
    const lines: { level: string; msg: string }[] = [];
    const at = (level: string) => (_obj: object, msg?: string) => void lines.push({ level, msg: msg ?? '' });
    const logger: Logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
    const { consumer: c, source } = consumer(topic, group, handler, 'per-chunk', logger);
    await c.start();
    await waitFor(async () => (await topics.fullyCommitted(group, topic)) && (await f.counts()).size === count - 1, { what: 'every offset committed, every good key booked', timeoutMs: 90_000 });
    // The rolled-back neighbours' acks were left undone on purpose: a debug line each, never a
    // warning that the broker failed (the failing handler's own lines say why).
    expect(lines.filter((l) => l.msg.includes('broker settle failed'))).toEqual([]);
    expect(lines.some((l) => l.level === 'debug' && /not made: the transaction its chunk shared rolled back/.test(l.msg))).toBe(true);
    const counts = await f.counts();
    expect([...counts.keys()].filter((k) => k.endsWith(':pay-33'))).toEqual([]);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect(source.stats.chunkRollbacks).toBeGreaterThanOrEqual(2);
    expect(source.stats.deadLettered).toBe(1);
    // Records rolled back with a failing neighbour ran again (their first run left nothing).
    expect([...runs.values()].some((n) => n > 1)).toBe(true);
    expect([...runs.entries()].find(([k]) => k.endsWith(':pay-20'))?.[1]).toBe(2);
  }, 120_000);
});

describeWithServices(['kafka', 'postgres'], 'transactional inbox, Kafka batch mode: SIGKILL of the consumer process mid-chunk', () => {
  const kafka = makeKafka('twophase-pg-chunk-kill');
  const topics = new TopicFixture(kafka);
  let f: InboxFixture;
  let child: ChildProcess | undefined;
  let survivor: InboxConsumer | undefined;
  beforeEach(async () => {
    f = await inboxFixture('kchunkkill');
    await f.pool.query(`CREATE TABLE ${f.schema}.markers (name text NOT NULL)`);
  });
  afterEach(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await survivor?.stop().catch(() => undefined);
    await f.cleanup();
  });
  afterAll(() => topics.destroy());

  test('SIGKILL while a chunk is open (earlier records of the chunk wrote their effects, uncommitted): nothing of the chunk was applied; the next consumer books every key once', async () => {
    const count = 30;
    const topic = await topics.create('pg-chunk-kill', 1);
    const groupId = unique('pg-chunk-kill-group');
    const { producer, close } = await keyedProducer(kafka);
    await producer.send(topic, messages('pay', count));
    await close();
    // Chunks grow 1, 2, 4, 8 records: pay-7 … pay-14 form the fourth; the kill lands at pay-10.
    const config = { topic, groupId, schema: f.schema, pg: pgConfig({ max: 6 }), targetSuffix: ':pay-10' };
    child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, 'support', 'kafka-chunk-child.ts'), JSON.stringify(config)], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, TS_NODE_TRANSPILE_ONLY: 'true' },
    });
    const exited = new Promise<void>((resolve) => child!.once('exit', () => resolve()));
    await waitFor(async () => (await f.pool.query(`SELECT 1 FROM ${f.schema}.markers WHERE name = 'inserted'`)).rowCount === 1, { what: 'the chunk open at pay-10', timeoutMs: 90_000 });
    const beforeKill = await f.counts();
    child.kill('SIGKILL');
    await exited;
    expect(child.signalCode).toBe('SIGKILL');
    // Records before the open chunk were committed; the chunk's own (pay-7 … pay-10) are not visible.
    const chunkKeys = [...beforeKill.keys()].filter((k) => /:pay-(7|8|9|10)$/.test(k));
    expect(chunkKeys).toEqual([]);
    expect(beforeKill.size).toBeGreaterThan(0);
    await waitFor(async () => (await f.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND query LIKE '%${f.schema}%'`)).rows[0].n === 0, { what: 'no open transaction left', timeoutMs: 20_000 });
    expect([...(await f.counts()).keys()].filter((k) => /:pay-(7|8|9|10)$/.test(k))).toEqual([]);

    survivor = new InboxConsumer(
      {
        name: groupId,
        claimer: new PostgresClaimer({ pool: f.pool }, { schema: f.schema, mode: 'transactional', transactionBatch: 'per-chunk' }),
        source: fastSource(kafka, { topics: [topic], groupId, claimBatchSize: 16 }),
        concurrency: 4,
        leaseTtlMs: 30_000,
      },
      ledgerHandler(f.ledger),
    );
    await survivor.start();
    await waitFor(async () => (await f.counts()).size === count && (await topics.fullyCommitted(groupId, topic)), { what: 'every key booked and every offset committed', timeoutMs: 90_000 });
    await survivor.stop();
    expect([...(await f.counts()).entries()].filter(([, n]) => n !== 1)).toEqual([]);
  }, 180_000);
});
