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
import { prismaTransactions, type PrismaTransactionClient } from '../../../../adapters/postgres/orm/prisma';
import { typeormTransactions } from '../../../../adapters/postgres/orm/typeorm';
import type { TransactionPort } from '../../../../adapters/postgres/transaction-port';
import { PrismaClient } from '../../../support/prisma/generated/client';
import { pgConfig, pgUrl } from './pg-helpers';

export type OrmName = 'prisma' | 'kysely' | 'typeorm';
export const ORM_NAMES: readonly OrmName[] = ['prisma', 'kysely', 'typeorm'];

/** One library on one schema. */
export interface OrmUnderTest<Tx> {
  readonly name: OrmName;
  readonly port: TransactionPort<Tx>;
  /** Inserts one `effect` row through the library's own API (model, query builder, repository). */
  writeEffect(tx: Tx, key: string, amount: number): Promise<void>;
  close(): Promise<void>;
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
  const c = pgConfig();
  const dataSource = await new DataSource({
    type: 'postgres',
    host: c.host,
    port: c.port,
    username: c.user,
    database: c.database,
    schema,
    entities: [EffectEntity],
    poolSize: max,
  }).initialize();
  return {
    name: 'typeorm',
    port: typeormTransactions(dataSource),
    writeEffect: async (manager, key, amount) => {
      await manager.getRepository(EffectEntity).insert({ key, amount });
    },
    close: () => dataSource.destroy(),
  };
}

/**
 * The library `name` on `schema`, its transaction object untyped (for suites that run all three).
 * @param max the most connections its pool opens
 */
export async function ormUnderTest(name: OrmName, schema: string, max = POOL_SIZE): Promise<OrmUnderTest<unknown>> {
  const made = name === 'prisma' ? await prismaUnderTest(schema, max) : name === 'kysely' ? await kyselyUnderTest(schema, max) : await typeormUnderTest(schema, max);
  return made as unknown as OrmUnderTest<unknown>;
}
