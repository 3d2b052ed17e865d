/**
 * The lifecycle of a {@link RabbitMqSource}, shared by its parts (connections, subscription,
 * façade): one mutable record, so each part reads the same truth.
 */

/**
 * Lifecycle of a source: `created` → `starting` → `consuming` ⇄ `recovering` (connection or
 * channel lost) / `cancelled` (broker cancel, waiting to resubscribe) → `stopping` (intake
 * stopped, settling) → `closed`; `failed` after a failed start or a broker cancel with
 * `onCancel: 'stop'`.
 */
export type RabbitMqSourceState = 'created' | 'starting' | 'consuming' | 'recovering' | 'cancelled' | 'stopping' | 'closed' | 'failed';

/** Where a source is in its life, and why it failed. */
export class SourceLifecycle {
  state: RabbitMqSourceState = 'created';
  /** True from `stopIntake()` (or `close()`) on: never subscribe again. */
  intakeStopped = false;
  /** True from the start of the shutdown on: connection and channel events are expected. */
  closing = false;
  /** Why the source failed, when `state` is `failed`. */
  failure: Error | undefined;

  /** Marks the source failed with `error` (the state stays `failed` through the close). */
  fail(error: Error): void {
    this.state = 'failed';
    this.failure = error;
  }

  /** Connection or channel lost while consuming (or waiting after a cancel): recovering. */
  recovering(): void {
    if (this.state === 'consuming' || this.state === 'cancelled') this.state = 'recovering';
  }

  /** The source closed, unless it failed (a failed source keeps saying why). */
  closed(): void {
    if (this.state !== 'failed') this.state = 'closed';
  }
}
