/**
 * `twophase/typeorm` on the shared PostgreSQL: the port's contract on a TypeORM `DataSource`
 * (type `postgres`), the effect saved through the transaction's repository.
 */
import { DataSource, type EntityManager } from 'typeorm';
import { ConfigurationError } from '../../../../src';
import { typeormTransactions } from '../../../../adapters/postgres/orm/typeorm';
import { describeWithServices } from '../../../support/services';
import { describePortContract } from '../support/port-contract';
import { describeClaimerThroughOrm } from '../support/orm-claimer-suite';
import { typeormUnderTest } from '../support/orm-libraries';

describeWithServices(['postgres'], 'twophase/typeorm', () => {
  describePortContract<EntityManager>('orm_more_typeorm', 'typeorm', (f) => typeormUnderTest(f.schema));
  describeClaimerThroughOrm('typeorm');

  test('typeormTransactions refuses an object that is not a DataSource and an unknown option (ConfigurationError)', () => {
    expect(() => typeormTransactions({} as unknown as DataSource)).toThrow(ConfigurationError);
    expect(() => typeormTransactions(new DataSource({ type: 'postgres' }), { timeoutMs: 1 } as never)).toThrow(/unknown option "timeoutMs"/);
  });
});
