/**
 * What a claim needs of its claimer, and no more: the caller's pool, the options in force, the
 * logger, the clock, the warning limiter, the tenant of a key and one auto-committed statement.
 *
 * The `PostgresClaimer` builds one {@link PoolClaimSession} and hands it to the modules of
 * each mode (standalone-lease.ts, transaction-lease.ts, chunk-claim.ts, chunk-transaction.ts,
 * port-lease.ts). They depend on the {@link ClaimSession} interface, never on the claimer, so the
 * claimer imports them and none of them imports it back.
 */
import type { Pool, QueryResultRow } from 'pg';
import { type Clock, ConfigurationError } from '../../src';
import type { LogLimiter } from '../../src/adapter-kit';
import type { PostgresClaimerLogger, ResolvedPostgresClaimerOptions } from './options';
import { borrow } from './pool-client';
import { runWithin } from './statement-runner';

/** The claimer as the modules of each mode see it. */
export interface ClaimSession {
  /** The caller's pool: every statement borrows a client from it. */
  readonly pool: Pool;
  /** The options in force, defaults applied. */
  readonly options: ResolvedPostgresClaimerOptions;
  readonly logger: PostgresClaimerLogger;
  /** Local clock of the operation deadlines (`now()` in ms). */
  readonly clock: Clock;
  /** Rate limit of repeated session warnings (a few per window, then a summary). */
  readonly warnings: LogLimiter;
  /**
   * True once the claimer's `ready()` found migration 7 applied: a per-record transaction
   * completes through `twophase_complete` (planned once per session) instead of the inline
   * statement.
   */
  readonly completesInFunction: boolean;
  /**
   * The tenant of a key, or undefined for the platform inbox.
   * @throws ConfigurationError when `tenantOf` returns anything but a non-empty string
   */
  tenantOf(key: string): string | undefined;
  /** Milliseconds left before `deadlineAt` (local clock). */
  remaining(deadlineAt: number): number;
  /**
   * One auto-committed statement on a borrowed client, under the operation deadline
   * (`operationTimeoutMs`, the wait for the client included).
   * @throws ClaimerUnavailableError (or a classified error, see errors.ts)
   */
  query<R extends QueryResultRow>(what: string, text: string, values: readonly unknown[]): Promise<R[]>;
}

/** The {@link ClaimSession} of one claimer. */
export class PoolClaimSession implements ClaimSession {
  /** Set by the claimer's `ready()` (see {@link ClaimSession.completesInFunction}). */
  completesInFunction = false;

  constructor(
    readonly pool: Pool,
    readonly options: ResolvedPostgresClaimerOptions,
    readonly logger: PostgresClaimerLogger,
    readonly clock: Clock,
    readonly warnings: LogLimiter,
  ) {}

  tenantOf(key: string): string | undefined {
    const of = this.options.tenantOf;
    if (!of) return undefined;
    const tenant = of(key);
    if (typeof tenant !== 'string' || tenant.length === 0) {
      throw new ConfigurationError(`tenantOf returned ${JSON.stringify(tenant)} for key "${key}"; it must return a non-empty string`);
    }
    return tenant;
  }

  remaining(deadlineAt: number): number {
    return deadlineAt - this.clock.now();
  }

  async query<R extends QueryResultRow>(what: string, text: string, values: readonly unknown[]): Promise<R[]> {
    const deadlineAt = this.clock.now() + this.options.operationTimeoutMs;
    const borrowed = await borrow(this.pool, what, this.options.operationTimeoutMs);
    try {
      return await runWithin<R>(borrowed, what, text, values, this.remaining(deadlineAt));
    } finally {
      borrowed.giveBack();
    }
  }
}
