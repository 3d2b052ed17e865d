/**
 * The transactional inbox on Kafka with the source's defaults, on real Kafka + PostgreSQL:
 * 1,000 records of which 15 % repeat a key a few records after its first copy.
 *
 * - Per-record transactions (the claimer's default) with the Kafka source's default
 *   `claimBatchSize`: no record is claimed ahead into a transaction left idle while earlier
 *   records run, so no session ever sits `idle in transaction` for long and none is terminated by
 *   `idle_in_transaction_session_timeout`. Watched structurally (pg_stat_activity, the pool's
 *   errors, the log lines), never by wall-clock speed: timing belongs to `npm run bench:postgres`.
 * - Per-chunk transactions: a key repeated inside a chunk never rolls the chunk back; a run
 *   without faults logs no warning or error and counts no chunk rollback.
 */
import { Pool } from 'pg';
import type { Logger } from '../../../src';
import { PostgresClaimer, type TransactionBatch } from '../../../adapters/postgres';
import type { KafkaSource } from '../../../adapters/kafka';
import { describeWithServices } from '../../support/services';
import { fastSource, keyedProducer, makeKafka, TopicFixture, unique } from '../kafka/support/kafka-helpers';
import { waitFor } from '../../support/wait';
import { InboxConsumer, type InboxFixture, inboxFixture, ledgerHandler } from './support/inbox-fixture';
import { pgConfig } from './support/pg-helpers';

/** A session idle inside a transaction longer than this is a stall (records run in a few ms). */
const STALL_MS = 3000;

interface Line {
  readonly level: string;
  readonly obj: object;
  readonly msg?: string;
}

function recordingLogger(lines: Line[]): Logger {
  const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, obj, msg });
  return { debug: () => undefined, info: () => undefined, warn: at('warn'), error: at('error') } as Logger;
}

/** 1,000 records: 850 keys, 150 of them sent again 1–6 records after their first copy. */
function recordsWithRepeats(prefix: string): { idempotencyKey: string; value: string }[] {
  const out: { idempotencyKey: string; value: string }[] = [];
  const pending: { at: number; key: string }[] = [];
  for (let i = 0; i < 850; i++) {
    const key = `${prefix}-${i}`;
    out.push({ idempotencyKey: key, value: JSON.stringify({ id: key }) });
    if (i % 17 < 3) pending.push({ at: out.length + 1 + (i % 6), key });
    while (pending.length > 0 && pending[0]!.at <= out.length) {
      const repeat = pending.shift()!;
      out.push({ idempotencyKey: repeat.key, value: JSON.stringify({ id: repeat.key }) });
    }
  }
  for (const repeat of pending) out.push({ idempotencyKey: repeat.key, value: JSON.stringify({ id: repeat.key }) });
  return out;
}

/**
 * Samples pg_stat_activity for sessions of `applicationName` idle inside a transaction: the
 * longest idle time seen, in ms.
 */
function watchIdleTransactions(applicationName: string): { longestIdleMs: () => number; stalled: Promise<never>; stop: () => Promise<void> } {
  const watcher = new Pool(pgConfig({ max: 1 }));
  watcher.on('error', () => undefined);
  let longest = 0;
  let stopped = false;
  let stall!: (error: Error) => void;
  const stalled = new Promise<never>((_, reject) => {
    stall = reject;
  });
  stalled.catch(() => undefined);
  const loop = (async () => {
    while (!stopped) {
      const rows = await watcher
        .query<{ ms: number | null }>(
          `SELECT max(extract(epoch FROM clock_timestamp() - state_change) * 1000)::float8 AS ms FROM pg_stat_activity
            WHERE application_name = $1 AND state IN ('idle in transaction', 'idle in transaction (aborted)')`,
          [applicationName],
        )
        .catch(() => ({ rows: [{ ms: null }] }));
      longest = Math.max(longest, rows.rows[0]?.ms ?? 0);
      if (longest > STALL_MS) stall(new Error(`a transaction stayed idle ${Math.round(longest)} ms while records waited`));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  return {
    longestIdleMs: () => longest,
    stalled,
    stop: async () => {
      stopped = true;
      await loop;
      await watcher.end();
    },
  };
}

describeWithServices(['kafka', 'postgres'], 'transactional inbox on Kafka with the defaults', () => {
  const kafka = makeKafka('twophase-pg-defaults');
  const topics = new TopicFixture(kafka);
  let f: InboxFixture | undefined;
  const consumers: InboxConsumer[] = [];
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.stop()));
    await f?.cleanup();
    f = undefined;
  });
  afterAll(() => topics.destroy());

  async function run(transactionBatch: TransactionBatch | undefined): Promise<{ lines: Line[]; source: KafkaSource; longestIdleMs: number; poolErrors: Error[] }> {
    const applicationName = unique('tp-defaults');
    f = await inboxFixture('kdefaults', { application_name: applicationName });
    const poolErrors: Error[] = [];
    f.pool.on('error', (error) => void poolErrors.push(error));
    const topic = await topics.create('pg-defaults', 2);
    const groupId = unique('pg-defaults-group');
    const { producer, close } = await keyedProducer(kafka);
    const records = recordsWithRepeats(unique('pay'));
    for (let i = 0; i < records.length; i += 250) await producer.send(topic, records.slice(i, i + 250));
    await close();
    const lines: Line[] = [];
    const logger = recordingLogger(lines);
    // The source's defaults (claimBatchSize, preclaimMaxAgeMs), as a new user has them.
    const source = fastSource(kafka, { topics: [topic], groupId, logger });
    const claimer = new PostgresClaimer(
      { pool: f.pool, logger },
      { schema: f.schema, mode: 'transactional', ...(transactionBatch === undefined ? {} : { transactionBatch }) },
    );
    const consumer = new InboxConsumer({ name: groupId, claimer, source, logger }, ledgerHandler(f.ledger));
    consumers.push(consumer);
    const watch = watchIdleTransactions(applicationName);
    try {
      await consumer.start();
      const fixture = f;
      await Promise.race([
        watch.stalled,
        waitFor(async () => (await fixture.counts()).size === 850 && (await topics.fullyCommitted(groupId, topic)), {
          what: 'every key booked and every offset committed',
          timeoutMs: 90_000,
          intervalMs: 100,
        }),
      ]);
      expect([...(await fixture.counts()).values()].every((n) => n === 1)).toBe(true);
    } finally {
      await watch.stop();
    }
    return { lines, source, longestIdleMs: watch.longestIdleMs(), poolErrors };
  }

  test('per-record transactions on the source defaults: no transaction idles while earlier records run, none is terminated', async () => {
    const { lines, longestIdleMs, poolErrors } = await run(undefined);
    expect(longestIdleMs).toBeLessThan(STALL_MS);
    expect(poolErrors.map((e) => e.message)).toEqual([]);
    expect(lines.filter((l) => JSON.stringify(l).includes('idle-in-transaction'))).toEqual([]);
    expect(lines.filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([]);
  }, 150_000);

  test('claimBatchSize above 1 with per-record transactions is refused at construction, naming both fixes; per-chunk keeps it', () => {
    const pool = new Pool(pgConfig({ max: 1 }));
    const handler = ledgerHandler('unused');
    const claimer = (transactionBatch: TransactionBatch) => new PostgresClaimer({ pool }, { mode: 'transactional', transactionBatch });
    const source = (claimBatchSize?: number) => fastSource(kafka, { topics: ['unused'], groupId: 'unused', ...(claimBatchSize === undefined ? {} : { claimBatchSize }) });
    expect(() => new InboxConsumer({ name: 'c', claimer: claimer('per-record'), source: source(16) }, handler)).toThrow(
      /claimBatchSize 16 with a claimer that opens one transaction per record.*Leave claimBatchSize unset \(or 1\), or .*transactionBatch: 'per-chunk'/,
    );
    const defaults = source();
    new InboxConsumer({ name: 'c', claimer: claimer('per-record'), source: defaults }, handler);
    expect(defaults.settings.claimBatchSize).toBe(1);
    const chunked = source();
    new InboxConsumer({ name: 'c', claimer: claimer('per-chunk'), source: chunked }, handler);
    expect(chunked.settings.claimBatchSize).toBe(64);
    return pool.end();
  });

  test('per-chunk transactions with keys repeated inside chunks: no chunk rolls back, no warning, no failed ack', async () => {
    const { lines, source, longestIdleMs } = await run('per-chunk');
    expect(source.stats.chunkRollbacks).toBe(0);
    expect(longestIdleMs).toBeLessThan(STALL_MS);
    expect(lines).toEqual([]);
  }, 150_000);
});
