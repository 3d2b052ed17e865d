/**
 * The transactional mode writes values into its statements in place of `$n`: placeholders inside
 * quoted identifiers and string literals are text, not placeholders.
 */
import { inline } from '../../adapters/postgres/statements/transaction';

describe('PostgreSQL statements: inline placeholders', () => {
  test('$n is replaced by its literal; a value that looks like a placeholder is not replaced again', () => {
    expect(inline('SELECT $1, $2', ["a'b", '$1'])).toBe("SELECT 'a''b', '$1'");
  });

  test('"…" and \'…\' keep their $n (a schema named tp_$1 stays tp_$1)', () => {
    expect(inline('UPDATE "tp_$1"."t""$2" SET a = $1 WHERE b = \'$2\' AND c = $2', ['x', 'y'])).toBe('UPDATE "tp_$1"."t""$2" SET a = \'x\' WHERE b = \'$2\' AND c = \'y\'');
  });

  test('a placeholder without a value throws', () => {
    expect(() => inline('SELECT $3', [1])).toThrow(RangeError);
  });
});
