/**
 * What the claimer checks before the first message (`ready()`, called by the consumer's
 * `start()`): the migrations it needs were applied, and its inbox table has the expected columns
 * with the expected types. Anything else fails closed with {@link SchemaMismatchError}.
 */
import type { ClientBase } from 'pg';
import { SchemaMismatchError } from './errors';
import { REQUIRED_PLATFORM_VERSION, REQUIRED_TENANT_VERSION } from './migrations';

/** Columns every inbox table has, with their `format_type` types. */
const INBOX_COLUMNS: Readonly<Record<string, string>> = {
  key_digest: 'bytea',
  key_text: 'text',
  fingerprint: 'bytea',
  status: 'text',
  attempt: 'integer',
  owner_token: 'text',
  fencing_token: 'bigint',
  outcome: 'jsonb',
  expires_at: 'timestamp with time zone',
  created_at: 'timestamp with time zone',
  updated_at: 'timestamp with time zone',
};

/**
 * Checks the inbox table the claimer uses, and collects every difference before failing (a
 * schema never migrated lists the missing schema, migrations table, migrations and table).
 * @param schemaName unquoted schema; `schema` the same, quoted
 * @param tenant true for the tenant inbox
 * @param alsoRequired further migration versions the claimer needs (a transaction port's: 4)
 * @returns the migration versions applied to the schema
 * @throws SchemaMismatchError whose `problems` lists every difference, one line each
 */
export async function checkSchema(client: ClientBase, schemaName: string, schema: string, tenant: boolean, alsoRequired: readonly number[] = []): Promise<readonly number[]> {
  const table = tenant ? 'twophase_tenant_inbox' : 'twophase_inbox';
  const required = tenant ? REQUIRED_TENANT_VERSION : REQUIRED_PLATFORM_VERSION;
  const hint = 'run `twophase postgres migrate --url … --schema ' + schemaName + (tenant ? ' --tenants-table …` (the tenant inbox needs the tenants table)' : '`');
  const problems: string[] = [];
  const schemaExists = (await client.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1', [schemaName])).rows[0]?.n === 1;
  if (!schemaExists) problems.push(`schema ${schemaName} does not exist`);
  const migrations = (await client.query<{ r: string | null }>('SELECT to_regclass($1) AS r', [`${schema}.twophase_migrations`])).rows[0]?.r;
  let versions: number[] = [];
  if (!migrations) problems.push(`table ${schemaName}.twophase_migrations does not exist (no migration was applied)`);
  else versions = (await client.query<{ version: number }>(`SELECT version FROM ${schema}.twophase_migrations`)).rows.map((r) => r.version);
  const missing = [...Array.from({ length: required }, (_, i) => i + 1), ...alsoRequired.filter((v) => v > required)].filter((v) => !versions.includes(v));
  for (const version of missing) problems.push(`migration ${version} is not applied`);
  const columns = await client.query<{ name: string; type: string; notnull: boolean }>(
    `SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS notnull
       FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`,
    [`${schema}.${table}`],
  );
  const found = new Map(columns.rows.map((c) => [c.name, c]));
  if (found.size === 0) problems.push(`table ${schemaName}.${table} does not exist`);
  else {
    for (const [name, type] of Object.entries(INBOX_COLUMNS)) {
      const column = found.get(name);
      if (!column) problems.push(`column ${table}.${name} is missing`);
      else if (column.type !== type) problems.push(`column ${table}.${name} is ${column.type}, expected ${type}`);
    }
    if (tenant && !found.has('tenant_id')) problems.push(`column ${table}.tenant_id is missing`);
  }
  if (problems.length === 0) return versions;
  const summary = !migrations
    ? `the inbox schema "${schemaName}" has no migrations table: ${hint}`
    : missing.includes(required) || alsoRequired.some((v) => missing.includes(v))
      ? `the inbox schema "${schemaName}" lacks migration ${missing.filter((v) => v === required || alsoRequired.includes(v)).join(', ')} (applied: ${versions.join(', ') || 'none'}): ${hint}`
      : `the inbox table does not have the expected shape (${hint})`;
  throw new SchemaMismatchError(summary, problems);
}
