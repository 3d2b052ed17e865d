/**
 * `twophase/kysely` on the shared PostgreSQL: the port's contract on a `Kysely` instance with
 * `PostgresDialect` over a `pg` Pool, the effect written with Kysely's query builder.
 */
import { Kysely, PostgresDialect, type Transaction } from 'kysely';
import { Pool } from 'pg';
import { ConfigurationError } from '../../../../src';
import { kyselyTransactions } from '../../../../adapters/postgres/orm/kysely';
import { describeWithServices } from '../../../support/services';
import { pgConfig } from '../support/pg-helpers';
import { describePortContract } from '../support/port-contract';
import { kyselyUnderTest, type KyselyDatabase as Database } from '../support/orm-libraries';

describeWithServices(['postgres'], 'twophase/kysely', () => {
  describePortContract<Transaction<Database>>('orm_more_kysely', 'kysely', (f) => kyselyUnderTest(f.schema));

  test('kyselyTransactions refuses an object that is not a Kysely instance and an unknown option (ConfigurationError)', () => {
    expect(() => kyselyTransactions({} as unknown as Kysely<Database>)).toThrow(ConfigurationError);
    expect(() => kyselyTransactions(new Kysely<Database>({ dialect: new PostgresDialect({ pool: new Pool(pgConfig()) }) }), { timeoutMs: 1 } as never)).toThrow(/unknown option "timeoutMs"/);
  });
});
