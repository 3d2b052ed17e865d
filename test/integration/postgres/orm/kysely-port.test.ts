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
});
