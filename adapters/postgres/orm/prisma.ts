/**
 * `twophase/prisma`: the transaction port on Prisma ORM 7 (`@prisma/client` with a driver adapter
 * such as `@prisma/adapter-pg`). The claimer's transactional mode then runs each delivery in one
 * interactive transaction of the application's own `PrismaClient`, and the handler writes its
 * effect with Prisma's model API on `ctx.transaction`:
 *
 * ```ts
 * import { PrismaPg } from '@prisma/adapter-pg';
 * import { PrismaClient } from './generated/prisma/client';
 * import { prismaTransactions } from 'twophase/prisma';
 * const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL }) });
 * const transactions = prismaTransactions(prisma);
 * // transactions.transaction(async (tx) => tx.order.create({ data }), limits)
 * ```
 *
 * The interactive transaction's timer: Prisma closes an interactive transaction after its
 * `timeout` (5000 ms unless the client's `transactionOptions` say otherwise) and waits at most
 * `maxWait` (2000 ms) for a connection. This port passes twophase's limits for every transaction
 * it opens: `timeout` = `limits.timeoutMs` (the claim's lease plus a margin) and `maxWait` =
 * `limits.maxWaitMs`, overriding the client's `transactionOptions` for these transactions only.
 * The lease ends first; Prisma's timer is the backstop that frees the connection of an owner
 * that stopped. To give a handler more time, raise the claimer's lease (`leaseTtlMs`), not
 * Prisma's timeout.
 */
// First: a missing client library is named before any module that needs it loads.
import { SUPPORTED_RANGE } from './prisma-peer';
import { ConfigurationError, consoleWarnLogger, type Logger } from '../../../src';
import { checkKnownOptions, checkPeerVersion } from '../../../src/adapter-kit';
import type { ITXClientDenyList } from '@prisma/client/runtime/client';
import type { PoolClient } from 'pg';
import type { EnteredPoolClient, EnteredTransaction, SqlRow, TransactionLimits, TransactionPort } from '../transaction-port';
import { type InboxAdapter, inboxAdapter, isInboxAdapter, startOnClaim } from './prisma-inbox-adapter';

export { SUPPORTED_RANGE, inboxAdapter, type InboxAdapter };

/** Options of {@link prismaTransactions}. */
export interface PrismaTransactionsOptions {
  /** Where a version warning goes (`@prisma/client` outside ^7). Default: the core's `consoleWarnLogger`. */
  readonly logger?: Pick<Logger, 'warn'>;
  /**
   * The driver adapter `prisma` was built with, when it is {@link inboxAdapter}`(new PrismaPg(pool))`.
   * A claimer on that same `pool` then runs each claim's transaction on its own connection, with
   * Prisma's interactive transaction inside it (3 round trips a message instead of 6); on another
   * pool, or without this option, the claim runs inside `prisma.$transaction` on Prisma's connection.
   * Default: none.
   */
  readonly adapter?: InboxAdapter;
}

/** What the port needs of a `PrismaClient` (generated or extended with `$extends`). */
export interface PrismaTransactionHost {
  $transaction(...args: never[]): unknown;
  $queryRawUnsafe(query: string, ...values: never[]): unknown;
}

/** The two calls the port makes, as Prisma documents them. */
interface PrismaCalls<Tx> {
  $transaction<R>(fn: (tx: Tx) => Promise<R>, options: { maxWait: number; timeout: number }): Promise<R>;
  $queryRawUnsafe<T>(query: string, ...values: unknown[]): Promise<T>;
}

/**
 * Prisma's interactive-transaction client for `Client`: the client without the methods a
 * transaction does not have (`$connect`, `$transaction`, `$extends`…), as Prisma types the `tx`
 * of `prisma.$transaction(async (tx) => …)`. `ctx.transaction.order.create(…)` type-checks on it.
 */
export type PrismaTransactionClient<Client> = Omit<Client, ITXClientDenyList>;

/**
 * The transaction port on a `PrismaClient`.
 * - `transaction(work, limits)` is `prisma.$transaction(async (tx) => work(tx), { timeout:
 *   limits.timeoutMs, maxWait: limits.maxWaitMs })`: Prisma commits when `work` resolves and rolls
 *   back when it rejects; a failed COMMIT rejects with Prisma's error.
 * - `query(tx, text, values)` is `tx.$queryRawUnsafe(text, ...values)`: `$1`… placeholders bound
 *   by the driver adapter, never spliced into the text.
 * @param prisma the application's client, with a PostgreSQL driver adapter
 * @param options see {@link PrismaTransactionsOptions}
 * @throws ConfigurationError on an unknown option, or when `prisma` has no `$transaction` or `$queryRawUnsafe`
 */
export function prismaTransactions<Client extends PrismaTransactionHost>(prisma: Client, options: PrismaTransactionsOptions = {}): TransactionPort<PrismaTransactionClient<Client>> {
  const host = prisma as unknown as { $transaction?: unknown; $queryRawUnsafe?: unknown } | null;
  if (typeof host?.$transaction !== 'function' || typeof host.$queryRawUnsafe !== 'function') {
    throw new ConfigurationError('prismaTransactions(prisma): prisma must be a PrismaClient (it has no $transaction / $queryRawUnsafe)');
  }
  checkKnownOptions('prismaTransactions options', options, ['logger', 'adapter']);
  if (options.adapter !== undefined && !isInboxAdapter(options.adapter)) {
    throw new ConfigurationError('prismaTransactions(prisma, { adapter }): adapter must be what inboxAdapter(new PrismaPg(pool)) returned, the one the PrismaClient was built with');
  }
  checkPeerVersion('@prisma/client', SUPPORTED_RANGE, options.logger ?? consoleWarnLogger);
  return new PrismaTransactionPort<PrismaTransactionClient<Client>>(prisma as unknown as PrismaCalls<PrismaTransactionClient<Client>>, options.adapter);
}

/** Why twophase left Prisma's callback without committing (never reaches the user). */
class ClaimReleased extends Error {}

class PrismaTransactionPort<Tx> implements TransactionPort<Tx> {
  readonly name = 'prisma';
  readonly overPoolClient: EnteredPoolClient<Tx> | undefined;

  constructor(
    private readonly prisma: PrismaCalls<Tx>,
    adapter: InboxAdapter | undefined,
  ) {
    this.overPoolClient = adapter === undefined ? undefined : { pool: adapter.pool, enter: (client, limits) => this.enter(client, limits) };
  }

  /**
   * `prisma.$transaction(callback)` started on the claim's `client` (see prisma-inbox-adapter.ts):
   * resolves when the callback holds `tx`; the callback then waits for `leave`. Rejects with a
   * ConfigurationError when Prisma's transaction did not take `client` (a PrismaClient built
   * without the adapter), after Prisma rolled its own transaction back.
   */
  private enter(client: PoolClient, limits: TransactionLimits): Promise<EnteredTransaction<Tx>> {
    return new Promise((resolve, reject) => {
      let open!: (commit: boolean) => void;
      const left = new Promise<void>((commit, release) => {
        open = (ok) => (ok ? commit() : release(new ClaimReleased('released')));
      });
      let entered = false;
      const run = startOnClaim(client, () =>
        this.prisma.$transaction(async (tx) => {
          if (!run.taken()) {
            throw new ConfigurationError("prismaTransactions(prisma, { adapter }): Prisma's transaction did not start through the adapter; build the PrismaClient with that adapter (new PrismaClient({ adapter }))");
          }
          entered = true;
          resolve({ tx, leave: (commit) => this.leave(run.done, open, commit) });
          await left;
        }, { timeout: limits.timeoutMs, maxWait: limits.maxWaitMs }),
      );
      run.done.catch((error: unknown) => {
        if (!entered) reject(error);
      });
    });
  }

  /** Lets the callback return (`commit`) or throw, then waits for Prisma to let go. */
  private async leave(done: Promise<unknown>, open: (commit: boolean) => void, commit: boolean): Promise<void> {
    open(commit);
    try {
      await done;
    } catch (error) {
      if (!commit) return;
      throw new Error(this.rolledBackBy(error) ?? (error as Error)?.message ?? String(error), { cause: error });
    }
  }

  transaction<T>(work: (tx: Tx) => Promise<T>, limits: TransactionLimits): Promise<T> {
    return this.prisma.$transaction((tx) => work(tx), { timeout: limits.timeoutMs, maxWait: limits.maxWaitMs });
  }

  query(tx: Tx, text: string, values: readonly unknown[]): Promise<readonly SqlRow[]> {
    return (tx as unknown as PrismaCalls<Tx>).$queryRawUnsafe<SqlRow[]>(text, ...values);
  }

  /**
   * Prisma's P2028 ("Transaction API error") for an expired interactive transaction: Prisma's
   * timer (`limits.timeoutMs`) ran out, and Prisma rolled the transaction back. Its own message
   * names the call twophase made and advises raising Prisma's timeout; the reason given instead
   * names the claim's lease.
   */
  rolledBackBy(error: unknown): string | undefined {
    const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
    if (code !== 'P2028' || typeof message !== 'string' || !/expired transaction/.test(message)) return undefined;
    const timeout = /timeout for this transaction was (\d+) ms/.exec(message)?.[1];
    return (
      `Prisma closed the interactive transaction when its timer${timeout === undefined ? '' : ` (${timeout} ms)`} ran out, and rolled it back; ` +
      'the timer is the claim\'s lease plus operationTimeoutMs: to give a handler more time, raise leaseTtlMs'
    );
  }
}
