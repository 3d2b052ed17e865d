/**
 * Wake-up of outbox relays by LISTEN/NOTIFY: staging sends `NOTIFY twophase_outbox, '<schema>'`,
 * delivered by PostgreSQL when the staging transaction commits (never for a rollback). The
 * notifier holds one client of the pool for its LISTEN session.
 *
 * LISTEN needs a session of its own: behind a transaction-pooling proxy (PgBouncer
 * `pool_mode = transaction`) notifications do not arrive. There, run the relay without a notifier
 * (polling only), or give the notifier a pool that connects to PostgreSQL directly.
 */
import type { Notification, Pool, PoolClient } from 'pg';
import { ConfigurationError, type Logger, consoleWarnLogger } from '../../src';
import { checkKnownOptions, describeType, type OutboxNotifier, type OutboxSubscription } from '../../src/adapter-kit';
import { toClaimerError } from './errors';
import { DEFAULT_SCHEMA } from './identifiers';
import { OUTBOX_CHANNEL } from './migrations';

/** What the notifier uses and does not own. */
export interface PostgresOutboxNotifierDependencies {
  /** Pool whose client is held for LISTEN (one client for as long as the relay runs). */
  readonly pool: Pool;
  readonly logger?: Logger;
}

/** Options of a {@link PostgresOutboxNotifier}. */
export interface PostgresOutboxNotifierOptions {
  /** Schema of the outbox table: notifications of other schemas are ignored. Default `twophase`. */
  readonly schema?: string;
  /** Pause before listening again after the session was lost, ms. Default 1000. [10, 600 000]. */
  readonly reconnectDelayMs?: number;
}

/** LISTEN/NOTIFY for the outbox relay (`OutboxRelay` of `twophase`). */
export class PostgresOutboxNotifier implements OutboxNotifier {
  private readonly pool: Pool;
  private readonly logger: Logger;
  private readonly schemaName: string;
  private readonly reconnectDelayMs: number;

  /** @throws ConfigurationError for a missing pool or an invalid option */
  constructor(dependencies: PostgresOutboxNotifierDependencies, options: PostgresOutboxNotifierOptions = {}) {
    if (!dependencies?.pool || typeof dependencies.pool.connect !== 'function') throw new ConfigurationError(`PostgresOutboxNotifier needs { pool } (a pg Pool), got ${describeType(dependencies)}`);
    checkKnownOptions('PostgresOutboxNotifier dependencies', dependencies, ['pool', 'logger']);
    checkKnownOptions('PostgresOutboxNotifier options', options, ['schema', 'reconnectDelayMs']);
    this.pool = dependencies.pool;
    this.logger = dependencies.logger ?? consoleWarnLogger;
    this.schemaName = options.schema ?? DEFAULT_SCHEMA;
    const delay = options.reconnectDelayMs ?? 1000;
    if (!Number.isInteger(delay) || delay < 10 || delay > 600_000) throw new ConfigurationError(`reconnectDelayMs must be an integer in [10, 600000], got ${describeType(delay)}`);
    this.reconnectDelayMs = delay;
  }

  /**
   * Takes a client and LISTENs. When the session is lost, calls `onError` once, then listens again
   * every `reconnectDelayMs` until it succeeds; once back, calls `onNotify` (commits made meanwhile
   * sent no notification the relay heard).
   * @throws ClaimerUnavailableError when the first LISTEN fails
   */
  async listen(onNotify: () => void, onError: (error: unknown) => void): Promise<OutboxSubscription> {
    const subscription = new Subscription(this.pool, this.schemaName, this.reconnectDelayMs, this.logger, onNotify, onError);
    await subscription.connect();
    return subscription;
  }
}

class Subscription implements OutboxSubscription {
  private client: PoolClient | undefined;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly schemaName: string,
    private readonly reconnectDelayMs: number,
    private readonly logger: Logger,
    private readonly onNotify: () => void,
    private readonly onError: (error: unknown) => void,
  ) {}

  private readonly onNotification = (message: Notification): void => {
    if (message.channel === OUTBOX_CHANNEL && message.payload === this.schemaName) this.onNotify();
  };

  private readonly onClientError = (error: unknown): void => this.lost(error);

  async connect(): Promise<void> {
    let client: PoolClient | undefined;
    try {
      client = await this.pool.connect();
      client.on('notification', this.onNotification);
      client.on('error', this.onClientError);
      await client.query(`LISTEN ${OUTBOX_CHANNEL}`);
    } catch (error) {
      if (client) this.drop(client, error);
      throw toClaimerError(error, 'outbox LISTEN');
    }
    if (this.closed) {
      this.drop(client, undefined);
      return;
    }
    this.client = client;
  }

  private lost(error: unknown): void {
    const client = this.client;
    if (!client || this.closed) return;
    this.client = undefined;
    this.drop(client, error);
    this.onError(error);
    this.retry();
  }

  private retry(): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      this.connect().then(
        () => {
          if (!this.closed) this.onNotify();
        },
        (error: unknown) => {
          this.logger.warn({ err: error }, 'outbox notifier: LISTEN failed again; retrying');
          this.retry();
        },
      );
    }, this.reconnectDelayMs);
    this.timer.unref();
  }

  private drop(client: PoolClient, error: unknown): void {
    client.off('notification', this.onNotification);
    client.off('error', this.onClientError);
    // A LISTENing session must not go back to the pool: destroy it.
    client.release(error instanceof Error ? error : new Error('outbox notifier closed its LISTEN session'));
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    if (client) this.drop(client, undefined);
  }
}
