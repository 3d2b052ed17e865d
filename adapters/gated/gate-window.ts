/**
 * The gate's availability: after a gate failure the gated claimer goes to the truth alone for
 * `gateRetryMs`, then tries the gate again. One transition logs one line each way (down, back),
 * so an outage logs twice, not once per message.
 */
import type { Clock, Logger } from '../../src';

export class GateWindow {
  /** Local clock ms before which claims skip the gate. */
  private skipUntil = Number.NEGATIVE_INFINITY;
  private down = false;

  constructor(
    private readonly retryMs: number,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** True when the next claim should ask the gate (it is up, or its skip window has passed). */
  usable(): boolean {
    return this.clock.now() >= this.skipUntil;
  }

  /** True while the gate is considered down (from a failure until its next success). */
  get isDown(): boolean {
    return this.down;
  }

  /** Records a gate failure (an outage or a passed deadline): skip the gate for `retryMs`. */
  failed(operation: string, error: unknown): void {
    this.skipUntil = this.clock.now() + this.retryMs;
    if (this.down) return;
    this.down = true;
    this.logger.warn(
      { component: 'GatedClaimer', operation, err: error, gateRetryMs: this.retryMs },
      'twophase: the gate (Redis) failed; claims go to the truth (PostgreSQL) alone, slower but correct, and the gate is tried again every gateRetryMs',
    );
  }

  /** Records a gate answer: ends an outage. */
  succeeded(): void {
    if (!this.down) return;
    this.down = false;
    this.logger.warn({ component: 'GatedClaimer' }, 'twophase: the gate (Redis) answers again; claims go through it');
  }
}
