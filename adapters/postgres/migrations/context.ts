/**
 * What a migration's SQL is rendered with. Identifiers arrive already quoted.
 */
export interface MigrationContext {
  /** Quoted schema of the inbox tables, e.g. `"twophase"`. */
  readonly schema: string;
  /** The schema's name unquoted, e.g. `twophase` (the outbox's notification payload). */
  readonly schemaName?: string;
  /** The application's tenants table and its key column, quoted, with the column's SQL type; undefined = no tenant inbox. */
  readonly tenants?: {
    /** Quoted, schema-qualified table, e.g. `"public"."tenants"`. */
    readonly table: string;
    /** Quoted column, e.g. `"id"`. */
    readonly column: string;
    /** The column's type as `format_type` prints it, e.g. `uuid`, `bigint`, `text`. */
    readonly type: string;
  };
}
