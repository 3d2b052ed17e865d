/**
 * What twophase accepts as a schema, table or column name, without pg: the CLI checks its
 * `--schema` with it while parsing the command line, before `pg` is loaded.
 */
import { ConfigurationError } from '../../src';

/** PostgreSQL's identifier limit (NAMEDATALEN - 1), in bytes. */
export const MAX_IDENTIFIER_BYTES = 63;

/**
 * Checks an identifier as written in the catalog (case-sensitive, unquoted). Any character but
 * NUL and `$` is accepted (quotes, spaces, upper case, non-ASCII). `$` is refused: the
 * transactional mode writes values into its statements in place of `$n` placeholders, and the
 * migrations quote function bodies with `$fn$`, so a `$` in a name could put text outside its quotes.
 * @throws ConfigurationError naming the field and the value
 */
export function checkIdentifier(field: string, name: unknown): asserts name is string {
  if (typeof name !== 'string' || name.length === 0) {
    throw new ConfigurationError(`${field} must be a non-empty string, got ${JSON.stringify(name)}`);
  }
  if (Buffer.byteLength(name, 'utf8') > MAX_IDENTIFIER_BYTES || name.includes('\u0000')) {
    throw new ConfigurationError(`${field} must be at most ${MAX_IDENTIFIER_BYTES} bytes without NUL, got ${JSON.stringify(name)}`);
  }
  if (name.includes('$')) {
    throw new ConfigurationError(`${field} must not contain "$" (it could end a quoted name inside twophase's statements), got ${JSON.stringify(name)}`);
  }
}
