/**
 * Lease keep-alive: extends a receipt's lease while its handler runs.
 */
import type { Receipt } from './claimer';
import { LeaseLostError } from './errors';

export interface KeepAliveOptions {
  /** Lease length requested on each extend, ms. */
  readonly leaseTtlMs: number;
  /** Time between extends, ms (the consumer uses leaseTtlMs / 3). */
  readonly intervalMs: number;
  /** Called with the LeaseLostError when the store reports the lease lost; keep-alive stops. */
  readonly onLost: (error: LeaseLostError) => void;
  /** Called after each successful extend. */
  readonly onExtended?: () => void;
  /** Called when an extend fails transiently; keep-alive goes on. */
  readonly onError?: (error: unknown) => void;
}

/**
 * Starts extending `receipt` every `intervalMs` until {@link KeepAlive.stop}. One extend is in
 * flight at a time; the timer is unref'd and cleared on stop, so nothing outlives the handler.
 */
export class KeepAlive {
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly receipt: Receipt,
    private readonly options: KeepAliveOptions,
  ) {
    this.schedule();
  }

  /** Stops extending and waits for an extend already in flight, so commit never races it. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.inFlight;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.inFlight = this.tick().finally(() => {
        this.inFlight = undefined;
        this.schedule();
      });
    }, this.options.intervalMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    try {
      await this.receipt.extend(this.options.leaseTtlMs);
      if (!this.stopped) this.options.onExtended?.();
    } catch (error) {
      if (this.stopped) return;
      if (error instanceof LeaseLostError) {
        this.stopped = true;
        this.options.onLost(error);
      } else {
        this.options.onError?.(error);
      }
    }
  }
}
