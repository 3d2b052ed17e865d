/**
 * Names of the inbox's schema and of the application's tenants table, validated and quoted once.
 */
import { escapeIdentifier } from 'pg';
import { ConfigurationError } from '../../src';

/** Default schema of the inbox tables. */
export const DEFAULT_SCHEMA = 'twophase';

/** PostgreSQL's identifier limit (NAMEDATALEN - 1), in bytes. */
const MAX_IDENTIFIER_BYTES = 63;

/**
 * Checks an identifier (schema, table or column name as written in the catalog: case-sensitive,
 * unquoted) and returns it quoted for SQL. Any character but NUL and `$` is accepted (quotes,
 * spaces, upper case, non-ASCII). `$` is refused: the transactional mode writes values into its
 * statements in place of `$n` placeholders, and the migrations quote function bodies with `$fn$`,
 * so a `$` in a name could put text outside its quotes.
 * @throws ConfigurationError naming the field and the value
 */
export function quoteIdentifier(field: string, name: unknown): string {
  if (typeof name !== 'string' || name.length === 0) {
    throw new ConfigurationError(`${field} must be a non-empty string, got ${JSON.stringify(name)}`);
  }
  if (Buffer.byteLength(name, 'utf8') > MAX_IDENTIFIER_BYTES || name.includes('\u0000')) {
    throw new ConfigurationError(`${field} must be at most ${MAX_IDENTIFIER_BYTES} bytes without NUL, got ${JSON.stringify(name)}`);
  }
  if (name.includes('$')) {
    throw new ConfigurationError(`${field} must not contain "$" (it could end a quoted name inside twophase's statements), got ${JSON.stringify(name)}`);
  }
  return escapeIdentifier(name);
}

/** The application's tenants table, as given to the migrations and the tenant claimer. */
export interface TenantsTable {
  /** Schema of the tenants table. Default `public`. */
  readonly schema?: string;
  /** Name of the tenants table, e.g. `tenants`. */
  readonly table: string;
  /** Its key column the tenant inbox references. Default `id`. */
  readonly column?: string;
}

/** Parses `schema.table` or `table` (CLI form). */
export function parseTenantsTable(text: string, column?: string): TenantsTable {
  const dot = text.indexOf('.');
  const base = dot === -1 ? { table: text } : { schema: text.slice(0, dot), table: text.slice(dot + 1) };
  return column === undefined ? base : { ...base, column };
}
