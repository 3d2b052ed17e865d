/**
 * Names of the inbox's schema and of the application's tenants table, validated and quoted once.
 */
import { escapeIdentifier } from 'pg';
import { checkIdentifier } from './identifier-rules';

/** Default schema of the inbox tables. */
export const DEFAULT_SCHEMA = 'twophase';

/**
 * Checks an identifier (see {@link checkIdentifier}) and returns it quoted for SQL.
 * @throws ConfigurationError naming the field and the value
 */
export function quoteIdentifier(field: string, name: unknown): string {
  checkIdentifier(field, name);
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
