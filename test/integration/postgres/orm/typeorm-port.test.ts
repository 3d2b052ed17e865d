/**
 * `twophase/typeorm` on the shared PostgreSQL: the port's contract on a TypeORM `DataSource`
 * (type `postgres`), the effect saved through the transaction's repository.
 */
import { DataSource, EntitySchema, type EntityManager } from 'typeorm';
import { ConfigurationError } from '../../../../src';
import { typeormTransactions } from '../../../../adapters/postgres/orm/typeorm';
import { describeWithServices } from '../../../support/services';
import { pgConfig } from '../support/pg-helpers';
import { describePortContract } from '../support/port-contract';

interface Effect {
  id: number;
  key: string;
  amount: number;
}

const EffectEntity = new EntitySchema<Effect>({
  name: 'Effect',
  tableName: 'effect',
  columns: { id: { type: Number, primary: true, generated: true }, key: { type: String }, amount: { type: Number } },
});

describeWithServices(['postgres'], 'twophase/typeorm', () => {
  describePortContract<EntityManager>('orm_more_typeorm', 'typeorm', async (f) => {
    const c = pgConfig();
    const dataSource = await new DataSource({
      type: 'postgres',
      host: c.host,
      port: c.port,
      username: c.user,
      database: c.database,
      schema: f.schema,
      entities: [EffectEntity],
      poolSize: 5,
    }).initialize();
    return {
      port: typeormTransactions(dataSource),
      writeEffect: async (manager, key, amount) => {
        await manager.getRepository(EffectEntity).insert({ key, amount });
      },
      close: () => dataSource.destroy(),
    };
  });

  test('typeormTransactions refuses an object that is not a DataSource and an unknown option (ConfigurationError)', () => {
    expect(() => typeormTransactions({} as unknown as DataSource)).toThrow(ConfigurationError);
    expect(() => typeormTransactions(new DataSource({ type: 'postgres' }), { timeoutMs: 1 } as never)).toThrow(/unknown option "timeoutMs"/);
  });
});
