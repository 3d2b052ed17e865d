/**
 * The connections of a {@link RabbitMqSource}: one for consuming and one for republishing
 * (requeue copies, dead letters), both through amqp-connection-manager, which reconnects.
 *
 * Two connections because under a resource alarm the broker blocks connections that publish, and
 * a shared one would stop the acks as well ("Connections" docs and "Blocked Connection
 * Notifications": use separate connections for publishing and consuming). Reconnects back off
 * exponentially; a failure retrying cannot fix (credentials, vhost) ends a start at once.
 */
import type { Channel, ChannelModel } from 'amqplib';
import { type AmqpConnectionManager, connect } from 'amqp-connection-manager';
import { type Logger, ShutdownError, TimeoutError } from '../../src';
import { withDeadline, withoutPasswords } from '../../src/adapter-kit';
import { BrokerConnectionError, connectFailureReason, isPermanentConnectFailure } from './connection-error';
import { BrokerUnavailableError } from './errors';
import type { SourceLifecycle } from './lifecycle';
import type { ResolvedSourceOptions } from './options';
import type { SourceReporter } from './reporting';

type Role = 'consume' | 'publish';

export class SourceConnections {
  /** The consuming connection, once opened. */
  consume: AmqpConnectionManager | undefined;
  /** The republishing connection, once opened. */
  publish: AmqpConnectionManager | undefined;
  private connects = 0;
  /** Failed connect attempts in a row, per connection role (reset on connect); drives the backoff. */
  private readonly failures: Record<Role, number> = { consume: 0, publish: 0 };
  /** The newest connect error and the URL it came from, for the error a start ends with. */
  private lastFailure: { error: Error; url: string } | undefined;
  /** Rejects the connect wait at once on a failure retrying cannot fix. */
  private failConnect: ((error: Error) => void) | undefined;

  constructor(
    private readonly options: ResolvedSourceOptions,
    private readonly lifecycle: SourceLifecycle,
    private readonly reporter: SourceReporter,
    private readonly logger: Logger,
  ) {}

  /**
   * Opens both connections and waits until both connected, within `connectTimeoutMs`.
   * @param untilClosed ends the wait with ShutdownError when the source closes first
   * @throws BrokerConnectionError naming the URL and the last failure, when one was seen
   * @throws BrokerUnavailableError when no connection opened in time and no failure was seen
   * @throws ShutdownError when the source closed first
   */
  async open(untilClosed: <T>(step: Promise<T>) => Promise<T>): Promise<void> {
    const o = this.options;
    const consume = this.manager(o.connectionName, 'consume');
    const publish = this.manager(`${o.connectionName}:publish`, 'publish');
    this.consume = consume;
    this.publish = publish;
    const permanent = new Promise<never>((_, reject) => {
      this.failConnect = reject;
    });
    permanent.catch(() => undefined);
    const startedAt = Date.now();
    try {
      // Not amqp-connection-manager's own connect timeout: close() would not cancel its timer.
      await withDeadline(untilClosed(Promise.race([Promise.all([consume.connect(), publish.connect()]), permanent])), o.connectTimeoutMs, 'connecting to RabbitMQ');
    } catch (error) {
      if (error instanceof ShutdownError) throw error;
      const last = this.lastFailure;
      const attempts = Math.max(this.failures.consume, this.failures.publish);
      if (last) throw new BrokerConnectionError(last.url, last.error, { attempts, elapsedMs: Date.now() - startedAt });
      if (error instanceof TimeoutError) throw new BrokerUnavailableError(`could not connect to RabbitMQ at ${redact(o.urls[0])} within ${o.connectTimeoutMs} ms`, { cause: error });
      throw new BrokerConnectionError(o.urls[0]!, error, { attempts: Math.max(1, attempts), elapsedMs: Date.now() - startedAt });
    } finally {
      this.failConnect = undefined;
    }
  }

  /** A plain channel on the consuming connection (topology declares and checks). */
  async topologyChannel(): Promise<Channel> {
    const model = this.consume?.connection as ChannelModel | undefined;
    if (!model) throw new BrokerUnavailableError('not connected');
    return model.createChannel();
  }

  /** Closes both connections gracefully; a failure is logged. */
  async close(): Promise<void> {
    for (const manager of [this.consume, this.publish]) {
      await manager?.close().catch((error: unknown) => this.logger.warn({ err: error }, 'closing a RabbitMQ connection failed'));
    }
  }

  /** Destroys both sockets without an AMQP close (a simulated crash). */
  async destroy(): Promise<void> {
    await Promise.all([destroySocket(this.consume), destroySocket(this.publish)]);
  }

  private manager(connectionName: string, role: Role): AmqpConnectionManager {
    const o = this.options;
    const manager = connect([...o.urls], {
      heartbeatIntervalInSeconds: o.heartbeatSeconds,
      reconnectTimeInSeconds: o.reconnectDelayMs / 1000,
      connectionOptions: { clientProperties: { connection_name: connectionName } },
    });
    this.watch(manager, role);
    return manager;
  }

  private watch(manager: AmqpConnectionManager, role: Role): void {
    const lifecycle = this.lifecycle;
    manager.on('connect', ({ url }: { url: unknown }) => {
      this.failures[role] = 0;
      manager.reconnectTimeInSeconds = this.options.reconnectDelayMs / 1000;
      if (role === 'publish') return;
      const reconnect = this.connects++ > 0;
      if (reconnect) this.reporter.counters.reconnects++;
      this.reporter.emit('connected', { url: redact(url), reconnect });
    });
    manager.on('disconnect', ({ err }: { err?: Error }) => {
      if (lifecycle.closing) return;
      this.logger.warn({ err, queue: this.options.queue, connection: role, reconnectDelayMs: this.options.reconnectDelayMs }, 'RabbitMQ connection lost; reconnecting');
      if (role === 'publish') return;
      lifecycle.recovering();
      this.reporter.emit('disconnected', { error: err });
    });
    manager.on('connectFailed', ({ err, url }: { err: Error; url: unknown }) => {
      if (lifecycle.closing) return;
      const o = this.options;
      const failures = ++this.failures[role];
      const from = typeof url === 'string' ? url : (url as { url?: unknown } | undefined)?.url;
      this.lastFailure = { error: err, url: typeof from === 'string' ? from : o.urls[0]! };
      const reason = connectFailureReason(err);
      if (lifecycle.state === 'starting' && isPermanentConnectFailure(reason)) {
        this.failConnect?.(err);
        return;
      }
      // Exponential backoff: reconnectDelayMs, doubling after each failure in a row, at most
      // 16 × reconnectDelayMs and 30 s (amqp-connection-manager waits reconnectTimeInSeconds).
      const delayMs = Math.min(o.reconnectDelayMs * 2 ** Math.min(failures, 4), Math.max(o.reconnectDelayMs, 30_000));
      manager.reconnectTimeInSeconds = delayMs / 1000;
      // Few lines: the 1st, 2nd, 4th, 8th … failure in a row, and during start() only for the
      // consuming connection (the publishing one fails alike).
      if ((failures & (failures - 1)) !== 0 || (lifecycle.state === 'starting' && role === 'publish')) return;
      const error = new BrokerConnectionError(this.lastFailure.url, err, { attempts: failures });
      this.logger.warn({ err, queue: o.queue, connection: role, attempts: failures, reason, nextAttemptInMs: delayMs }, `${error.message}; retrying with backoff`);
    });
    manager.on('blocked', ({ reason }: { reason: string }) => {
      this.logger.warn({ reason, queue: this.options.queue, connection: role }, 'RabbitMQ blocked the connection (resource alarm): republishes wait');
      this.reporter.emit('blocked', { reason });
    });
    manager.on('unblocked', () => this.reporter.emit('unblocked', {}));
  }
}

/**
 * Destroys a manager's socket without an AMQP close (a simulated crash) and waits until amqplib
 * noticed, so a later graceful close has nothing to send.
 */
async function destroySocket(manager: AmqpConnectionManager | undefined): Promise<void> {
  const model = manager?.connection as ChannelModel | undefined;
  const stream = (model?.connection as unknown as { stream?: { destroy(error?: Error): void } } | undefined)?.stream;
  if (!manager || !stream) return;
  const gone = new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 2000);
    manager.once('disconnect', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  // With an error, so amqplib sees the socket die (it listens for 'error' and 'end', not 'close').
  stream.destroy(new BrokerUnavailableError('connection destroyed to simulate a crash'));
  await gone;
}

/**
 * The URL without its password, for logs and errors: `amqp://user:***@host`. The user may be
 * empty (`amqp://:***@host`); the password runs to the last `@` before the path, so an unescaped
 * `@` in it is hidden too.
 */
export function redact(url: unknown): string {
  const text = typeof url === 'string' ? url : typeof url === 'object' && url !== null && 'url' in url ? String((url as { url: unknown }).url) : 'amqp';
  return withoutPasswords(text);
}
