/**
 * A channel of amqp-connection-manager that also recovers from channel-level closes.
 *
 * amqp-connection-manager re-creates channels (and re-runs their setup functions) after the
 * *connection* is lost. When the broker closes only a *channel* (a consumer ack timeout, a 404 on
 * a deleted queue, a 406), its ChannelWrapper waits for a reconnect that never comes. This
 * supervisor notices that case (the connection that owned the channel is still the manager's
 * current one) and replaces the wrapper with a new one from the same manager: at once, so the
 * operations that come after the close go to a working channel, or, when the previous
 * replacement was less than `recoveryDelayMs` ago (a channel the broker keeps closing), once
 * that much time passed since it.
 * Reconnection itself stays with amqp-connection-manager.
 */
import { performance } from 'node:perf_hooks';
import type { Channel, ChannelModel } from 'amqplib';
import type { AmqpConnectionManager, ChannelWrapper } from 'amqp-connection-manager';
import type { Logger } from '../../src';

/** Options of a {@link SupervisedChannel}. */
export interface SupervisedChannelOptions {
  /** Name for logs. */
  readonly name: string;
  /** Create a confirm channel (publisher confirms on). */
  readonly confirm: boolean;
  /**
   * Runs on every new underlying channel (first connect, reconnect, replacement). Should not
   * throw; a throw is logged.
   */
  readonly setup: (channel: Channel) => Promise<void>;
  /**
   * Called once per underlying channel when it closes. `recovering` is true when the connection
   * is still up and the supervisor will replace the channel; false when the connection went down
   * (amqp-connection-manager reconnects) or the supervisor is closed.
   */
  readonly onClose?: (channel: Channel, error: Error | undefined, recovering: boolean) => void;
  /** Pause before replacing a channel the broker closed, ms. */
  readonly recoveryDelayMs: number;
  readonly logger: Logger;
}

/** One supervised channel. Not exported from the package. */
export class SupervisedChannel {
  private wrapper: ChannelWrapper | undefined;
  private closed = false;
  private recoveryTimer: NodeJS.Timeout | undefined;
  /** When the wrapper was last replaced after a close (performance.now() ms), if ever. */
  private replacedAt: number | undefined;
  /**
   * The broker's reason for the latest close of an underlying channel (`404 (NOT-FOUND) … no
   * exchange 'x'`), for the errors of the operations that close failed: amqplib rejects them
   * with a bare "channel closed".
   */
  lastCloseError: Error | undefined;

  constructor(
    private readonly manager: AmqpConnectionManager,
    private readonly options: SupervisedChannelOptions,
  ) {}

  /** Creates the first wrapper. Its setup runs as soon as the manager is connected. */
  start(): void {
    this.wrapper ??= this.create();
  }

  /** The current wrapper (replaced after a channel-level close). */
  get current(): ChannelWrapper {
    if (!this.wrapper) this.wrapper = this.create();
    return this.wrapper;
  }

  /** Stops supervising and closes the wrapper (unsent publishes reject). Safe to repeat. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.recoveryTimer);
    const wrapper = this.wrapper;
    this.wrapper = undefined;
    await wrapper?.close().catch(() => undefined);
  }

  private create(): ChannelWrapper {
    const wrapper = this.manager.createChannel({
      name: this.options.name,
      confirm: this.options.confirm,
      setup: (channel: Channel) => this.runSetup(channel),
    });
    // Setup errors and worker errors arrive here; without a listener they would crash the process.
    wrapper.on('error', (error: Error) => this.options.logger.warn({ err: error, channel: this.options.name }, 'twophase/rabbitmq channel error'));
    return wrapper;
  }

  private async runSetup(channel: Channel): Promise<void> {
    let closeError: Error | undefined;
    this.lastCloseError = undefined; // a new channel: an earlier one's reason says nothing of it
    channel.on('error', (error: Error) => {
      closeError = error;
      this.lastCloseError = error;
    });
    channel.once('close', () => this.onRawClose(channel, closeError));
    try {
      await this.options.setup(channel);
    } catch (error) {
      this.options.logger.warn({ err: error, channel: this.options.name }, 'twophase/rabbitmq channel setup failed');
    }
  }

  private onRawClose(channel: Channel, error: Error | undefined): void {
    if (this.closed) {
      this.options.onClose?.(channel, error, false);
      return;
    }
    // On a connection loss amqplib closes every channel first and the connection right after,
    // in the same turn: look once that turn has ended.
    setImmediate(() => {
      const model = this.manager.connection as ChannelModel | undefined;
      const recovering = !this.closed && model !== undefined && model.connection === channel.connection;
      this.options.onClose?.(channel, error, recovering);
      if (!recovering) return;
      const sinceLast = this.replacedAt === undefined ? Infinity : performance.now() - this.replacedAt;
      const delayMs = Math.max(0, Math.ceil(this.options.recoveryDelayMs - sinceLast));
      this.options.logger.warn({ err: error, channel: this.options.name, delayMs }, 'twophase/rabbitmq channel closed by the broker; opening a new one');
      clearTimeout(this.recoveryTimer);
      if (delayMs === 0) this.replace();
      else this.recoveryTimer = setTimeout(() => this.replace(), delayMs);
    });
  }

  private replace(): void {
    if (this.closed) return;
    this.replacedAt = performance.now();
    const old = this.wrapper;
    this.wrapper = this.create();
    void old?.close().catch(() => undefined);
  }
}
