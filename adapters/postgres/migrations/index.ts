/**
 * The inbox's versioned, forward-only migrations. Each is applied once, in order, inside one
 * transaction that also records it in `<schema>.twophase_migrations`; none is ever edited once
 * released — a change is a new version.
 */
import type { MigrationContext } from './context';
import * as m0001 from './0001-platform-inbox';
import * as m0002 from './0002-tenant-inbox';
import * as m0003 from './0003-outbox';
import * as m0004 from './0004-port-claim';
import * as m0005 from './0005-outbox-hot-lease';
import * as m0006 from './0006-outbox-claim-by-key';
import * as m0007 from './0007-inbox-completion';

export type { MigrationContext } from './context';

/** One migration. */
export interface Migration {
  /** 1, 2, … in order of application. */
  readonly version: number;
  readonly name: string;
  /** True when the migration needs the tenants table (`tenants` option). */
  readonly needsTenants: boolean;
  /** The SQL, rendered for a schema (and tenants table). */
  sql(context: MigrationContext): string;
}

export const MIGRATIONS: readonly Migration[] = [
  { version: m0001.VERSION, name: m0001.NAME, needsTenants: false, sql: m0001.sql },
  { version: m0002.VERSION, name: m0002.NAME, needsTenants: true, sql: m0002.sql },
  { version: m0003.VERSION, name: m0003.NAME, needsTenants: false, sql: m0003.sql },
  { version: m0004.VERSION, name: m0004.NAME, needsTenants: false, sql: m0004.sql },
  { version: m0005.VERSION, name: m0005.NAME, needsTenants: false, sql: m0005.sql },
  { version: m0006.VERSION, name: m0006.NAME, needsTenants: false, sql: m0006.sql },
  { version: m0007.VERSION, name: m0007.NAME, needsTenants: false, sql: m0007.sql },
];

/**
 * The outbox migration a relay or a stager of this version needs. Migration 5 makes its leases
 * cheaper and migration 6 its claim over a deep backlog behind few keys; the relay runs without them.
 */
export const REQUIRED_OUTBOX_VERSION = m0003.VERSION;
export { OUTBOX_CHANNEL } from './0003-outbox';

/** The newest platform-inbox migration a claimer of this version needs. */
export const REQUIRED_PLATFORM_VERSION = 1;
/** The migration a claimer with a transaction port (`transactions`) needs besides the platform inbox's. */
export const REQUIRED_PORT_VERSION = m0004.VERSION;
/** The migration whose completion function a transactional claimer uses when the schema has it (the inline statement otherwise). */
export const COMPLETION_FUNCTION_VERSION = m0007.VERSION;
/** The newest tenant-inbox migration a tenant claimer of this version needs. */
export const REQUIRED_TENANT_VERSION = 2;
