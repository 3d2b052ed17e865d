/**
 * The scan that finds statements ending or nesting the inbox transaction in text sent through
 * `ctx.transaction`: keywords in any case, after comments, in multi-statement text; never inside
 * quoted strings, identifiers or dollar-quoted bodies; savepoints allowed.
 */
import { transactionControl } from '../../adapters/postgres/transaction-control';

describe('transactionControl', () => {
  test.each([
    ['COMMIT', 'COMMIT'],
    ['  commit work', 'COMMIT'],
    ['begin', 'BEGIN'],
    ['BEGIN ISOLATION LEVEL SERIALIZABLE', 'BEGIN'],
    ['start transaction', 'START TRANSACTION'],
    ['END', 'END'],
    ['abort', 'ABORT'],
    ['ROLLBACK', 'ROLLBACK'],
    ['ROLLBACK WORK', 'ROLLBACK'],
    ["PREPARE TRANSACTION 'x'", 'PREPARE TRANSACTION'],
    ["COMMIT PREPARED 'x'", 'COMMIT'],
    ['INSERT INTO t VALUES (1); COMMIT', 'COMMIT'],
    ['/* helper */ COMMIT', 'COMMIT'],
    ['-- wrap\nBEGIN;', 'BEGIN'],
    ['/* a /* nested */ comment */ rollback', 'ROLLBACK'],
  ])('%j is refused as %s', (sql, keyword) => {
    expect(transactionControl(sql)).toBe(keyword);
  });

  test.each([
    'INSERT INTO ledger (key) VALUES ($1)',
    'SAVEPOINT s1',
    'RELEASE SAVEPOINT s1',
    'ROLLBACK TO SAVEPOINT s1',
    'rollback transaction to s1',
    "SELECT 'COMMIT'; SELECT 1",
    "SELECT E'it\\'s; COMMIT'",
    'SELECT "commit" FROM t',
    'DO $$ BEGIN PERFORM 1; END $$',
    'CREATE FUNCTION f() RETURNS int AS $body$ BEGIN RETURN 1; END $body$ LANGUAGE plpgsql',
    'UPDATE t SET begin_at = now() -- COMMIT',
    'SELECT 1 /* ; COMMIT */',
    'SET LOCAL statement_timeout = 1000',
  ])('%j passes', (sql) => {
    expect(transactionControl(sql)).toBeUndefined();
  });
});
