/**
 * The three ORM libraries of the transaction port as the suites (and their child processes) build
 * them on one schema: the library's object on the shared PostgreSQL, its port, its own way to write
 * an effect row (`effect (key, amount)`, see port-contract.ts) and its shutdown.
 */
import { PrismaPg } from '@prisma/adapter-pg';
import { Kysely, PostgresDialect, type Generated, type Transaction } from 'kysely';
import { Pool } from 'pg';
import { DataSource, EntitySchema, type EntityManager } from 'typeorm';
import { kyselyTransactions } from '../../../../adapters/postgres/orm/kysely';
import { inboxAdapter, prismaTransactions, type PrismaTransactionClient } from '../../../../adapters/postgres/orm/prisma';
import { typeormPool, typeormTransactions } from '../../../../adapters/postgres/orm/typeorm';
import type { TransactionPort } from '../../../../adapters/postgres/transaction-port';
import { PrismaClient } from '../../../support/prisma/generated/client';
import { pgConfig, pgUrl } from './pg-helpers';

/**
 * `typeorm-pool`: TypeORM with the claimer on the DataSource's own pool; `prisma-pool`: Prisma
 * through `inboxAdapter(new PrismaPg(pool))` with the claimer on that pool (the path without a port).
 */
export type OrmName = 'prisma' | 'prisma-pool' | 'kysely' | 'typeorm' | 'typeorm-pool';
export const ORM_NAMES: readonly OrmName[] = ['prisma', 'prisma-pool', 'kysely', 'typeorm', 'typeorm-pool'];

/** One library on one schema. */
export interface OrmUnderTest<Tx> {
  readonly name: OrmName;
  readonly port: TransactionPort<Tx>;
  /** Inserts one `effect` row through the library's own API (model, query builder, repository). */
  writeEffect(tx: Tx, key: string, amount: number): Promise<void>;
  close(): Promise<void>;
  /** The pool the claimer must use, when the library's path needs its own (`typeorm-pool`); else any. */
  readonly claimerPool?: Pool;
  /** Throws when `tx` (a claim's `ctx.transaction`) was not built the way this variant must build it. */
  checkClaimTransaction?(tx: Tx): void;
}

export type PrismaTx = PrismaTransactionClient<PrismaClient>;

/** Connections each library's pool opens at most, unless a suite asks for more. */
const POOL_SIZE = 5;

export function prismaOn(schema: string, max = POOL_SIZE): PrismaClient {
  return new PrismaClient({ adapter: new PrismaPg({ connectionString: pgUrl(), max }, { schema }) });
}

export async function prismaUnderTest(schema: string, max = POOL_SIZE): Promise<OrmUnderTest<PrismaTx>> {
  const prisma = prismaOn(schema, max);
  return {
    name: 'prisma',
    port: prismaTransactions(prisma),
    writeEffect: async (tx, key, amount) => {
      await tx.effect.create({ data: { key, amount } });
    },
    close: () => prisma.$disconnect(),
  };
}

/** Every transaction client the `prisma-pool` port's `overPoolClient.enter` handed out. */
const enteredOverClient = new WeakSet<object>();

/**
 * Prisma through `inboxAdapter(new PrismaPg(pool))`, the claimer on `pool`. The port's
 * `overPoolClient.enter` is spied on: `checkClaimTransaction` throws for a claim's `tx` it did not
 * hand out (the claim ran inside `prisma.$transaction` on Prisma's connection).
 */
export async function prismaOnClaimerPoolUnderTest(schema: string, max = POOL_SIZE): Promise<OrmUnderTest<PrismaTx>> {
  const pool = new Pool(pgConfig({ max }));
  const adapter = inboxAdapter(new PrismaPg(pool, { schema }));
  const prisma = new PrismaClient({ adapter });
  const port = prismaTransactions(prisma, { adapter });
  const over = port.overPoolClient;
  if (over === undefined || !('enter' in over)) throw new Error('prismaTransactions offered no overPoolClient.enter');
  const spied: TransactionPort<PrismaTx> = {
    name: port.name,
    transaction: port.transaction.bind(port),
    query: port.query.bind(port),
    rolledBackBy: port.rolledBackBy?.bind(port),
    overPoolClient: {
      pool: over.pool,
      enter: async (client, limits) => {
        const entered = await over.enter(client, limits);
        enteredOverClient.add(entered.tx);
        return entered;
      },
    },
  };
  return {
    name: 'prisma-pool',
    port: spied,
    claimerPool: pool,
    writeEffect: async (tx, key, amount) => {
      await tx.effect.create({ data: { key, amount } });
    },
    checkClaimTransaction: (tx) => {
      if (!enteredOverClient.has(tx)) throw new Error("prisma-pool: ctx.transaction was not entered over the claimer's client (the claim did not take overPoolClient)");
    },
    close: async () => {
      await prisma.$disconnect();
      await pool.end();
    },
  };
}

export interface KyselyDatabase {
  effect: { id: Generated<number>; key: string; amount: number; created_at: Generated<Date> };
}

export async function kyselyUnderTest(schema: string, max = POOL_SIZE): Promise<OrmUnderTest<Transaction<KyselyDatabase>>> {
  const pool = new Pool(pgConfig({ max, options: `-c search_path=${schema}` }));
  const db = new Kysely<KyselyDatabase>({ dialect: new PostgresDialect({ pool }) });
  return {
    name: 'kysely',
    port: kyselyTransactions(db, { pool }),
    writeEffect: async (trx, key, amount) => {
      await trx.insertInto('effect').values({ key, amount }).execute();
    },
    close: () => db.destroy(),
  };
}

interface Effect {
  id: number;
  key: string;
  amount: number;
}

export const EffectEntity = new EntitySchema<Effect>({
  name: 'Effect',
  tableName: 'effect',
  columns: { id: { type: Number, primary: true, generated: true }, key: { type: String }, amount: { type: Number } },
});

export async function typeormUnderTest(schema: string, max = POOL_SIZE): Promise<OrmUnderTest<EntityManager>> {
  const dataSource = await typeormDataSource(schema, max);
  return {
    name: 'typeorm',
    port: typeormTransactions(dataSource),
    writeEffect: async (manager, key, amount) => {
      await manager.getRepository(EffectEntity).insert({ key, amount });
    },
    close: () => dataSource.destroy(),
  };
}

async function typeormDataSource(schema: string, max: number): Promise<DataSource> {
  const c = pgConfig();
  return new DataSource({ type: 'postgres', host: c.host, port: c.port, username: c.user, database: c.database, schema, entities: [EffectEntity], poolSize: max }).initialize();
}

/** Every EntityManager the `typeorm-pool` port's `overPoolClient.wrap` built. */
const builtOverClient = new WeakSet<object>();

/**
 * TypeORM with the claimer on the DataSource's own pool. The port's `overPoolClient.wrap` is spied
 * on: `checkClaimTransaction` throws for a claim's manager it did not build (the claim ran inside
 * `dataSource.transaction`).
 */
export async function typeormOnItsPoolUnderTest(schema: string, max = POOL_SIZE): Promise<OrmUnderTest<EntityManager>> {
  const dataSource = await typeormDataSource(schema, max);
  const port = typeormTransactions(dataSource);
  const over = port.overPoolClient;
  if (over === undefined || !('wrap' in over)) throw new Error('typeormTransactions offered no overPoolClient.wrap');
  const spied: TransactionPort<EntityManager> = {
    name: port.name,
    transaction: port.transaction.bind(port),
    query: port.query.bind(port),
    overPoolClient: {
      get pool() {
        return over.pool;
      },
      wrap: (client) => {
        const manager = over.wrap(client);
        builtOverClient.add(manager);
        return manager;
      },
    },
  };
  return {
    name: 'typeorm-pool',
    port: spied,
    claimerPool: typeormPool(dataSource),
    writeEffect: async (manager, key, amount) => {
      await manager.getRepository(EffectEntity).insert({ key, amount });
    },
    checkClaimTransaction: (manager) => {
      if (!builtOverClient.has(manager)) throw new Error("typeorm-pool: ctx.transaction was not built over the claimer's client (the claim did not take overPoolClient)");
    },
    close: () => dataSource.destroy(),
  };
}

/**
 * The library `name` on `schema`, its transaction object untyped (for suites that run all three).
 * @param max the most connections its pool opens
 */
export async function ormUnderTest(name: OrmName, schema: string, max = POOL_SIZE): Promise<OrmUnderTest<unknown>> {
  const made =
    name === 'prisma'
      ? await prismaUnderTest(schema, max)
      : name === 'prisma-pool'
        ? await prismaOnClaimerPoolUnderTest(schema, max)
        : name === 'kysely'
        ? await kyselyUnderTest(schema, max)
        : name === 'typeorm'
          ? await typeormUnderTest(schema, max)
          : await typeormOnItsPoolUnderTest(schema, max);
  return made as unknown as OrmUnderTest<unknown>;
}
