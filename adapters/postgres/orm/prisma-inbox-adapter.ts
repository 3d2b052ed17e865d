/**
 * `inboxAdapter(new PrismaPg(pool))`: `@prisma/adapter-pg`'s driver adapter, able to run one
 * interactive transaction of the `PrismaClient` on a connection twophase already holds in an open
 * transaction (a claim's). With it, and the claimer on the same `pool`, the claimer's transactional
 * mode runs as without a port: BEGIN with the claim, the handler's Prisma statements, then the
 * completion with the COMMIT, 3 round trips a message instead of 6, and `ctx.transaction` is still
 * the `tx` of `prisma.$transaction(async (tx) => …)`.
 *
 * How: the claimer calls `prisma.$transaction(callback)` inside an AsyncLocalStorage scope that
 * holds the claim's client. Prisma asks the driver adapter to start a transaction; in that scope
 * this adapter answers with `@prisma/adapter-pg`'s own transaction over the claim's client: its
 * BEGIN is answered without being sent (the claim began), and the transaction is marked so that
 * Prisma sends no COMMIT or ROLLBACK of its own (Prisma's `usePhantomQuery`), and the release of
 * the connection does nothing (twophase returns it). Outside such a scope every call goes to the
 * wrapped adapter unchanged.
 *
 * This relies on `@prisma/adapter-pg` 7.x internals (its adapter's `client` and the transaction's
 * `options`), as the Drizzle and TypeORM paths rely on theirs; a change there fails the claim with
 * a ConfigurationError, never a transaction on another connection.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { PoolClient } from 'pg';
import { ConfigurationError } from '../../../src';
import type { SqlDriverAdapterFactory } from '@prisma/client/runtime/client';

/** `@prisma/adapter-pg`'s name for itself (`adapterName`). */
const ADAPTER_PG = '@prisma/adapter-pg';

/**
 * A driver adapter factory for `new PrismaClient({ adapter })` that also serves twophase's claims.
 * Built by {@link inboxAdapter}; pass it to `prismaTransactions(prisma, { adapter })` too.
 */
export interface InboxAdapter extends SqlDriverAdapterFactory {
  /** The `pg` Pool the wrapped `PrismaPg` sends through: give the same one to the claimer. */
  readonly pool: unknown;
}

/** A claim's connection waiting for Prisma to start its transaction on it. */
interface ClaimSlot {
  readonly connection: ClaimConnection;
  taken: boolean;
  /** Called once, when the slot is taken or its start settled without taking it. */
  readonly settle: () => void;
}

/** The scope in which Prisma's next transaction start takes the claim's connection. */
const claimScope = new AsyncLocalStorage<ClaimSlot>();
/**
 * Slots whose transaction start has not yet come. When none is left the scope is disabled: on
 * Node 20 an enabled AsyncLocalStorage tracks every promise of the process (a few µs a message
 * measured on the core pipeline), so it stays enabled only from a claim's `$transaction` call to
 * its transaction start.
 */
let pendingSlots = 0;

/** What of `@prisma/adapter-pg`'s adapter this file uses (7.x). */
interface PgAdapterInternals {
  readonly client?: unknown;
  startTransaction(isolationLevel?: string): Promise<PgTransactionInternals>;
}

/** What of `@prisma/adapter-pg`'s transaction this file reads or sets (7.x). */
interface PgTransactionInternals {
  client?: unknown;
  options?: { usePhantomQuery: boolean };
}

/**
 * Wraps `@prisma/adapter-pg`'s factory so that a claim's transaction can run on the claim's own
 * connection (see the file header). Everything else, including `connectToShadowDb` for Prisma
 * Migrate, is the wrapped factory's.
 * @param factory `new PrismaPg(pool)`, built over a `pg` Pool (not a connection string or config,
 *   which would make the adapter open a pool of its own)
 * @throws ConfigurationError when `factory` is not `@prisma/adapter-pg`'s, or was built without a Pool
 */
export function inboxAdapter(factory: SqlDriverAdapterFactory): InboxAdapter {
  const given = factory as unknown as { adapterName?: unknown; connect?: unknown; externalPool?: unknown } | null;
  if (given?.adapterName !== ADAPTER_PG || typeof given.connect !== 'function') {
    throw new ConfigurationError(`inboxAdapter(factory): factory must be ${ADAPTER_PG}'s PrismaPg (got ${describe(given?.adapterName)})`);
  }
  const pool = given.externalPool;
  if (typeof pool !== 'object' || pool === null || typeof (pool as { connect?: unknown }).connect !== 'function') {
    throw new ConfigurationError('inboxAdapter(new PrismaPg(pool)): build PrismaPg over a pg Pool (new PrismaPg(pool)), and give the claimer the same pool; PrismaPg built from a connection string or a config opens a pool of its own');
  }
  const wrapped = new Proxy(factory as InboxAdapter, {
    get(target, property) {
      if (property === 'pool') return pool;
      if (property === 'connect') return async () => overClaims(await target.connect());
      return forwarded(target, property);
    },
  });
  built.add(wrapped);
  return wrapped;
}

/** Every factory {@link inboxAdapter} returned. */
const built = new WeakSet<object>();

/** Whether `value` is a factory {@link inboxAdapter} returned. */
export function isInboxAdapter(value: unknown): value is InboxAdapter {
  return typeof value === 'object' && value !== null && built.has(value);
}

/**
 * Runs `start` (a call of `prisma.$transaction`) so that the transaction Prisma starts through an
 * {@link inboxAdapter} takes `client`, in its open transaction. `taken()` tells, once Prisma's
 * callback runs, whether it did.
 */
export function startOnClaim<T>(client: PoolClient, start: () => Promise<T>): { readonly done: Promise<T>; taken(): boolean } {
  let pending = true;
  const settle = (): void => {
    if (!pending) return;
    pending = false;
    pendingSlots -= 1;
    if (pendingSlots === 0) claimScope.disable();
  };
  const slot: ClaimSlot = { connection: claimConnection(client), taken: false, settle };
  pendingSlots += 1;
  const done = claimScope.run(slot, start);
  done.then(settle, settle);
  return { done, taken: () => slot.taken };
}

/** The adapter `connect()` made, with `startTransaction` answering a claim's slot when in one. */
function overClaims<A extends object>(adapter: A): A {
  const internals = adapter as unknown as PgAdapterInternals;
  const startOnSlot = async (slot: ClaimSlot, isolationLevel: string | undefined): Promise<PgTransactionInternals> => {
    slot.taken = true;
    slot.settle();
    if (isolationLevel !== undefined) {
      throw new ConfigurationError(
        `inboxAdapter: Prisma asked for isolation level ${isolationLevel}, but the claim's transaction has begun before Prisma's, so its isolation level can no longer be set; ` +
          "remove transactionOptions.isolationLevel from the PrismaClient, or use prismaTransactions(prisma) without the adapter option",
      );
    }
    if (internals.client === undefined) throw internalsChanged('its adapter has no client');
    // The wrapped adapter's own code, with the claim's connection in place of its pool.
    const view = Object.create(adapter, { client: { value: { connect: async () => slot.connection } } }) as PgAdapterInternals;
    const tx = await internals.startTransaction.call(view, undefined);
    if (!slot.connection.begun || tx.client !== slot.connection || tx.options?.usePhantomQuery !== false) {
      throw internalsChanged('its transaction did not start the way twophase expects');
    }
    // Prisma sends no COMMIT or ROLLBACK then: twophase's completion commits, its release rolls back.
    tx.options = { ...tx.options, usePhantomQuery: true };
    return tx;
  };
  return new Proxy(adapter, {
    get(target, property) {
      if (property === 'startTransaction') {
        return (isolationLevel?: string) => {
          const slot = claimScope.getStore();
          if (slot === undefined || slot.taken) return internals.startTransaction.call(target, isolationLevel);
          return startOnSlot(slot, isolationLevel);
        };
      }
      return forwarded(target, property);
    },
  });
}

/** The claim's client as `@prisma/adapter-pg` uses a pooled connection. */
interface ClaimConnection {
  /** Whether the adapter's BEGIN came, and was answered without being sent. */
  readonly begun: boolean;
  query(...args: unknown[]): unknown;
  on(event: string, listener: (...a: unknown[]) => void): unknown;
  removeListener(event: string, listener: (...a: unknown[]) => void): unknown;
  release(): void;
}

function claimConnection(client: PoolClient): ClaimConnection {
  let begun = false;
  return {
    get begun() {
      return begun;
    },
    query(...args: unknown[]): unknown {
      // The adapter's first statement is its BEGIN: the claim's transaction is already open.
      if (!begun && (args[0] as { text?: unknown } | null)?.text === 'BEGIN') {
        begun = true;
        return Promise.resolve({ command: 'BEGIN', rowCount: null, rows: [], fields: [] });
      }
      return (client.query as (...a: unknown[]) => unknown)(...args);
    },
    on: (event, listener) => client.on(event as 'error', listener),
    removeListener: (event, listener) => client.removeListener(event as 'error', listener),
    // twophase returns the client to the pool after its COMMIT or ROLLBACK.
    release: () => undefined,
  };
}

/** `target`'s own `property`, a method bound to `target`: what a Proxy that changes one member forwards. */
function forwarded(target: object, property: string | symbol): unknown {
  const value: unknown = Reflect.get(target, property, target);
  return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
}

function internalsChanged(what: string): ConfigurationError {
  return new ConfigurationError(`inboxAdapter: this ${ADAPTER_PG} is not the 7.x twophase was built for (${what}); use prismaTransactions(prisma) without the adapter option`);
}

function describe(value: unknown): string {
  return typeof value === 'string' ? `"${value}"` : typeof value;
}
