/**
 * `twophase/kysely` on the shared PostgreSQL: the port's contract on a `Kysely` instance with
 * `PostgresDialect` over a `pg` Pool, the effect written with Kysely's query builder; on the
 * claimer's own pool, the claim without a port (`overPoolClient`), and the fallback when Kysely
 * lacks what that path is built from. (The transactional-mode suite and the SIGKILL test run on
 * that path too: `kysely` in support/ports.ts.)
 */
import { Kysely, PostgresDialect, sql, type LogEvent, type Transaction } from 'kysely';
import { Pool, type PoolClient } from 'pg';
import { ConfigurationError } from '../../../../src';
import { PostgresClaimer, TransactionAbortedError, TransactionMisuseError, type TransactionReceipt } from '../../../../adapters/postgres';
import { kyselyTransactions } from '../../../../adapters/postgres/orm/kysely';
import { describeWithServices } from '../../../support/services';
import { silentLogger } from '../../redis/support/redis-helpers';
import { freshSchema, pgConfig, type SchemaFixture } from '../support/pg-helpers';
import { describePortContract } from '../support/port-contract';
import { describeClaimerThroughOrm } from '../support/orm-claimer-suite';
import { kyselyUnderTest, type KyselyDatabase as Database } from '../support/orm-libraries';

describeWithServices(['postgres'], 'twophase/kysely', () => {
  describePortContract<Transaction<Database>>('orm_more_kysely', 'kysely', (f) => kyselyUnderTest(f.schema));
  describeClaimerThroughOrm('kysely');

  test('kyselyTransactions refuses an object that is not a Kysely instance, an unknown option and a missing pool (ConfigurationError)', () => {
    const pool = new Pool(pgConfig());
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    expect(() => kyselyTransactions({} as unknown as Kysely<Database>, { pool })).toThrow(ConfigurationError);
    expect(() => kyselyTransactions(db, { pool, timeoutMs: 1 } as never)).toThrow(/unknown option "timeoutMs"/);
    expect(() => kyselyTransactions(db, {} as never)).toThrow(/pool, the pg Pool given to Kysely's PostgresDialect, is required/);
    expect(() => kyselyTransactions(db, undefined as never)).toThrow(ConfigurationError);
  });

  describe("on the claimer's own pool", () => {
    interface Effects {
      effects: { key: string; fence: number };
    }
    const OPTIONS = { leaseTtlMs: 5000, doneTtlMs: 60_000 };
    let f: SchemaFixture;
    /** The statements the clients of the claimer's pool sent, in order (counted at each client's `query`). */
    let sent: string[];
    /** The client that sent each of `sent`. */
    let senders: object[];
    beforeEach(async () => {
      f = await freshSchema('ormfast_kysely');
      await f.pool.query(`CREATE TABLE ${f.schema}.effects (key text NOT NULL, fence bigint NOT NULL)`);
      sent = [];
      senders = [];
      const counted = new WeakSet<object>();
      f.pool.on('acquire', (client: PoolClient) => {
        if (counted.has(client)) return;
        counted.add(client);
        const query = client.query.bind(client) as (...args: unknown[]) => unknown;
        (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
          const text = String(typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string }).text).trim().toLowerCase();
          // The test's own row counts are not the claim's.
          if (!text.startsWith('select count(*)::int as n from')) {
            sent.push(text);
            senders.push(client);
          }
          return query(...args);
        };
      });
    });
    afterEach(async () => {
      await f.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state LIKE 'idle in transaction%' AND query LIKE '%${f.schema}%'`);
      await f.cleanup();
    });
    const count = async () => (await f.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${f.schema}.effects`)).rows[0]!.n;

    test("the claim runs as without a port: three statements a message on one client, none of them Kysely's BEGIN or COMMIT, none in Kysely's log; stream() and a COMMIT through trx are refused", async () => {
      const logged: string[] = [];
      const db = new Kysely<Effects>({ dialect: new PostgresDialect({ pool: f.pool }), log: (event: LogEvent) => void logged.push(event.query.sql.trim().toLowerCase()) });
      const claimer = new PostgresClaimer({ pool: f.pool, logger: silentLogger, transactions: kyselyTransactions(db, { pool: f.pool }) }, { schema: f.schema, mode: 'transactional' });
      await claimer.ready();
      sent = [];
      senders = [];
      const claim = await claimer.claim('q1', OPTIONS);
      if (claim.state !== 'acquired') throw new Error(claim.state);
      const trx = (claim.receipt as TransactionReceipt<Transaction<Effects>>).transaction;
      expect(trx.isTransaction).toBe(true);
      const inserted = await trx.withSchema(f.schema).insertInto('effects').values({ key: 'q1', fence: claim.receipt.fencingToken }).executeTakeFirst();
      expect(inserted.numInsertedOrUpdatedRows).toBe(1n);
      expect(await count()).toBe(0);
      await claim.receipt.commit({ ok: 1 });
      expect(await count()).toBe(1);
      // The claim (with its BEGIN), the handler's INSERT, the completion (with its COMMIT), on one client.
      expect(sent).toHaveLength(3);
      expect(new Set(senders).size).toBe(1);
      expect(sent[1]).toMatch(/^insert into/);
      // Kysely's log sees none of it: no BEGIN or COMMIT, and not the INSERT (the log wraps only its own driver's connections).
      expect(logged).toEqual([]);
      expect(await claimer.claim('q1', OPTIONS)).toMatchObject({ state: 'done', result: { ok: 1 } });

      const second = await claimer.claim('q2', OPTIONS);
      if (second.state !== 'acquired') throw new Error(second.state);
      const trx2 = (second.receipt as TransactionReceipt<Transaction<Effects>>).transaction;
      await trx2.withSchema(f.schema).insertInto('effects').values({ key: 'q2', fence: 1 }).execute();
      const streamed = async () => {
        for await (const row of trx2.withSchema(f.schema).selectFrom('effects').selectAll().stream()) void row;
      };
      await expect(streamed()).rejects.toThrow(/stream\(\) is not available/);
      const refused = await sql.raw('COMMIT').execute(trx2).then(() => undefined, (error: unknown) => error);
      expect(refused).toBeInstanceOf(TransactionMisuseError);
      await expect(second.receipt.commit()).rejects.toBeInstanceOf(TransactionAbortedError);
      expect(await count()).toBe(1);
    });

    test('a handler that throws: its Kysely writes roll back with the claim, and Kysely opens no transaction; the next run commits once', async () => {
      const db = new Kysely<Effects>({ dialect: new PostgresDialect({ pool: f.pool }) });
      const claimer = new PostgresClaimer({ pool: f.pool, logger: silentLogger, transactions: kyselyTransactions(db, { pool: f.pool }) }, { schema: f.schema, mode: 'transactional' });
      const { runOnce } = await import('../../../../src');
      const options = { claimer, scope: { operation: 'fast' }, key: 'q3', leaseTtlMs: 5000, doneTtlMs: 60_000 };
      sent = [];
      await expect(
        runOnce<null, Transaction<Effects>>(options, async ({ transaction }) => {
          await transaction.withSchema(f.schema).insertInto('effects').values({ key: 'q3', fence: 1 }).execute();
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect(await count()).toBe(0);
      expect(sent.filter((q) => q === 'begin')).toEqual([]); // Kysely's own transaction was not opened
      const outcome = await runOnce<string, Transaction<Effects>>(options, async ({ transaction }) => {
        await transaction.withSchema(f.schema).insertInto('effects').values({ key: 'q3', fence: 2 }).execute();
        return 'ok';
      });
      expect(outcome).toMatchObject({ status: 'ran', result: 'ok' });
      expect((await f.pool.query(`SELECT fence::int FROM ${f.schema}.effects`)).rows).toEqual([{ fence: 2 }]);
    });

    test('a Kysely without getExecutor: no overPoolClient, one warning, and the claim runs inside db.transaction()', async () => {
      const db = new Kysely<Effects>({ dialect: new PostgresDialect({ pool: f.pool }) });
      // The two methods the generic path uses, and nothing else.
      const older = { transaction: () => db.transaction(), executeQuery: db.executeQuery.bind(db) } as unknown as Kysely<Effects>;
      const warned: string[] = [];
      const port = kyselyTransactions(older, { pool: f.pool, logger: { warn: (_obj: object, msg?: string) => void warned.push(String(msg)) } });
      expect(port.overPoolClient).toBeUndefined();
      expect(warned).toEqual([expect.stringMatching(/no getExecutor\(\)\.withConnectionProvider; each claim runs inside db\.transaction\(\)/)]);
      const claimer = new PostgresClaimer({ pool: f.pool, logger: silentLogger, transactions: port }, { schema: f.schema, mode: 'transactional' });
      sent = [];
      const claim = await claimer.claim('q4', OPTIONS);
      if (claim.state !== 'acquired') throw new Error(claim.state);
      await (claim.receipt as TransactionReceipt<Transaction<Effects>>).transaction.withSchema(f.schema).insertInto('effects').values({ key: 'q4', fence: 1 }).execute();
      await claim.receipt.commit();
      expect(await count()).toBe(1);
      expect(sent).toContain('begin');
    });
  });
});
