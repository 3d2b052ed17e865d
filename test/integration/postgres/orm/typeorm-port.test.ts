/**
 * `twophase/typeorm` on the shared PostgreSQL: the port's contract on a TypeORM `DataSource`
 * (type `postgres`), the effect saved through the transaction's repository; the claimer's suite on
 * a pool of its own (the claim inside `dataSource.transaction`) and on the DataSource's own pool
 * (`typeorm-pool`: the claim without a port, `overPoolClient`); what that path sends and refuses.
 */
import { DataSource, type EntityManager } from 'typeorm';
import { ConfigurationError, runOnce } from '../../../../src';
import { PostgresClaimer, TransactionAbortedError, TransactionMisuseError, type TransactionReceipt } from '../../../../adapters/postgres';
import { typeormPool, typeormTransactions } from '../../../../adapters/postgres/orm/typeorm';
import { describeWithServices } from '../../../support/services';
import { silentLogger } from '../../redis/support/redis-helpers';
import { freshSchema, pgConfig, type SchemaFixture } from '../support/pg-helpers';
import { describePortContract, createEffectTable } from '../support/port-contract';
import { recordStatements, type StatementLog } from '../support/statement-log';
import { describeClaimerThroughOrm } from '../support/orm-claimer-suite';
import { EffectEntity, typeormUnderTest } from '../support/orm-libraries';

describeWithServices(['postgres'], 'twophase/typeorm', () => {
  describePortContract<EntityManager>('orm_more_typeorm', 'typeorm', (f) => typeormUnderTest(f.schema));
  describeClaimerThroughOrm('typeorm');
  describeClaimerThroughOrm('typeorm-pool');

  test('typeormTransactions refuses an object that is not a DataSource and an unknown option (ConfigurationError)', () => {
    expect(() => typeormTransactions({} as unknown as DataSource)).toThrow(ConfigurationError);
    expect(() => typeormTransactions(new DataSource({ type: 'postgres' }), { timeoutMs: 1 } as never)).toThrow(/unknown option "timeoutMs"/);
  });

  test('typeormPool refuses a DataSource not yet initialized and one of another type (ConfigurationError)', () => {
    expect(() => typeormPool(new DataSource({ type: 'postgres' }))).toThrow(/call it after `await dataSource.initialize\(\)`/);
    expect(() => typeormPool({ isInitialized: true, options: { type: 'mysql' } } as unknown as DataSource)).toThrow(/of type "postgres" \(got type "mysql"\)/);
    expect(() => typeormPool({} as unknown as DataSource)).toThrow(ConfigurationError);
  });

  describe("on the DataSource's own pool", () => {
    const OPTIONS = { leaseTtlMs: 5000, doneTtlMs: 60_000 };
    let f: SchemaFixture;
    let dataSource: DataSource;
    let claimer: PostgresClaimer<EntityManager>;
    /** What the clients of TypeORM's pool sent, in order. */
    let log: StatementLog;
    beforeEach(async () => {
      f = await freshSchema('ormfast_typeorm');
      await createEffectTable(f.pool, f.schema);
      const c = pgConfig();
      dataSource = await new DataSource({ type: 'postgres', host: c.host, port: c.port, username: c.user, database: c.database, schema: f.schema, entities: [EffectEntity], poolSize: 4 }).initialize();
      const pool = typeormPool(dataSource);
      claimer = new PostgresClaimer({ pool, logger: silentLogger, transactions: typeormTransactions(dataSource) }, { schema: f.schema, mode: 'transactional' });
      log = recordStatements(pool);
    });
    afterEach(async () => {
      await f.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state LIKE 'idle in transaction%' AND query LIKE '%${f.schema}%'`);
      await dataSource.destroy();
      await f.cleanup();
    });
    const count = async () => (await f.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${f.schema}.effect`)).rows[0]!.n;
    const acquire = async (key: string) => {
      const claim = await claimer.claim(key, OPTIONS);
      if (claim.state !== 'acquired') throw new Error(claim.state);
      return claim.receipt as TransactionReceipt<EntityManager>;
    };

    test("the claim runs as without a port: three statements a message on one client of TypeORM's pool, none of them TypeORM's START TRANSACTION or COMMIT; a repository save in the handler commits with the claim", async () => {
      await claimer.ready();
      log.clear();
      const receipt = await acquire('t1');
      const saved = await receipt.transaction.getRepository(EffectEntity).save({ key: 't1', amount: receipt.fencingToken });
      expect(saved.id).toBeGreaterThan(0);
      expect(await count()).toBe(0);
      await receipt.commit({ ok: 1 });
      expect(await count()).toBe(1);
      // The claim (with its BEGIN), the handler's INSERT, the completion (with its COMMIT), on one client.
      expect(log.sent).toHaveLength(3);
      expect(new Set(log.senders).size).toBe(1);
      expect(log.sent[1]).toMatch(/^insert into/);
      expect(log.sent.filter((q) => /^(start transaction|commit|begin)$/.test(q))).toEqual([]);
      expect(await claimer.claim('t1', OPTIONS)).toMatchObject({ state: 'done', result: { ok: 1 } });
    });

    test('manager.transaction inside the handler is a SAVEPOINT: its rollback keeps the outer write, and both commit with the claim', async () => {
      const receipt = await acquire('t2');
      await receipt.transaction.getRepository(EffectEntity).insert({ key: 't2', amount: 1 });
      await expect(
        receipt.transaction.transaction(async (inner) => {
          await inner.getRepository(EffectEntity).insert({ key: 't2-inner', amount: 2 });
          throw new Error('inner fails');
        }),
      ).rejects.toThrow('inner fails');
      await receipt.transaction.transaction(async (inner) => inner.getRepository(EffectEntity).insert({ key: 't2-kept', amount: 3 }));
      await receipt.commit();
      const keys = (await f.pool.query<{ key: string }>(`SELECT key FROM ${f.schema}.effect ORDER BY key`)).rows.map((r) => r.key);
      expect(keys).toEqual(['t2', 't2-kept']);
      expect(log.sent.filter((q) => q.startsWith('savepoint') || q.startsWith('rollback to savepoint') || q.startsWith('release savepoint'))).toHaveLength(4);
    });

    test('a COMMIT through the manager (queryRunner.commitTransaction) is refused: TransactionMisuseError, the claim commit fails, nothing is applied; the next claim writes once', async () => {
      const receipt = await acquire('t3');
      await receipt.transaction.getRepository(EffectEntity).insert({ key: 't3', amount: 1 });
      const refused = await receipt.transaction.queryRunner!.commitTransaction().then(
        () => undefined,
        (error: unknown) => error,
      );
      // twophase's own error, not TypeORM's QueryFailedError around it: the consumer dead-letters it at once.
      expect(refused).toBeInstanceOf(TransactionMisuseError);
      await expect(receipt.commit()).rejects.toBeInstanceOf(TransactionAbortedError);
      expect(await count()).toBe(0);
      const next = await acquire('t3');
      expect((await claimer.claim('t3', OPTIONS)).state).toBe('busy');
      await next.transaction.getRepository(EffectEntity).insert({ key: 't3', amount: next.fencingToken });
      await next.commit();
      expect(await count()).toBe(1);
    });

    test('runOnce: a throwing function rolls its repository write back, TypeORM opens no transaction; the next run commits once', async () => {
      const options = { claimer, scope: { operation: 'typeorm-pool' }, key: 't4', leaseTtlMs: 5000, doneTtlMs: 60_000 };
      log.clear();
      await expect(
        runOnce<null, EntityManager>(options, async ({ transaction }) => {
          await transaction.getRepository(EffectEntity).insert({ key: 't4', amount: 1 });
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect(await count()).toBe(0);
      expect(log.sent.filter((q) => q === 'start transaction')).toEqual([]);
      const outcome = await runOnce<string, EntityManager>(options, async ({ transaction }) => {
        await transaction.getRepository(EffectEntity).insert({ key: 't4', amount: 2 });
        return 'ok';
      });
      expect(outcome).toMatchObject({ status: 'ran', result: 'ok' });
      expect((await f.pool.query(`SELECT amount FROM ${f.schema}.effect`)).rows).toEqual([{ amount: 2 }]);
    });
  });
});
