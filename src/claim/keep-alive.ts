/**
 * Lease keep-alive: extends the leases of running handlers.
 *
 * One keeper per consumer runs one unref'd timer while at least one lease is kept, instead of a
 * timer per message; each lease is extended about every `intervalMs` (the consumer uses
 * leaseTtlMs / 3), with one extend in flight per lease at a time.
 */
import type { Receipt } from './claimer';
import { systemClock, type TimerClock, type TimerHandle } from '../util/clock';
import { LeaseLostError, ReceiptStateError } from '../util/errors';

/** Callbacks of one kept lease. */
export interface KeptLeaseCallbacks {
  /**
   * Called with the LeaseLostError when the store reports the lease lost; the lease is no longer
   * kept. A receipt that is already settled (ReceiptStateError) stops being kept without this call.
   */
  readonly onLost: (error: LeaseLostError) => void;
  /** Called after each successful extend. */
  readonly onExtended?: () => void;
  /** Called when an extend fails transiently; extending goes on. */
  readonly onError?: (error: unknown) => void;
}

/** Handle on one kept lease. */
export interface KeptLease {
  /**
   * Stops extending. Returns a promise only when an extend is in flight (await it so a commit
   * never races that extend); otherwise returns undefined.
   */
  stop(): Promise<void> | undefined;
}

/** One kept lease (a class, so keeping a lease makes one object and no closure). */
class Entry implements KeptLease {
  inFlight: Promise<void> | undefined = undefined;
  stopped = false;

  constructor(
    private readonly entries: Set<Entry>,
    readonly receipt: Receipt,
    /** Lease requested on each extend, and time between extends, ms. */
    readonly leaseTtlMs: number,
    readonly intervalMs: number,
    readonly callbacks: KeptLeaseCallbacks,
    public dueAt: number,
  ) {}

  stop(): Promise<void> | undefined {
    this.stopped = true;
    this.entries.delete(this);
    return this.inFlight;
  }
}

export class LeaseKeeper {
  private readonly entries = new Set<Entry>();
  private timer: TimerHandle | undefined;
  private readonly tickMs: number;

  /**
   * @param leaseTtlMs lease length requested on each extend, ms (unless `keep` is given another)
   * @param intervalMs time between extends of one lease, ms
   * @param clock time source and timers (default: the system clock; a manual one in tests)
   * @param shortestLeaseTtlMs the shortest lease `keep` will be given, ms, when leases differ
   *   (per message type TTLs): the timer ticks often enough for it. Default `leaseTtlMs`.
   */
  constructor(
    private readonly leaseTtlMs: number,
    private readonly intervalMs: number,
    private readonly clock: TimerClock = systemClock,
    shortestLeaseTtlMs: number = leaseTtlMs,
  ) {
    const shortestIntervalMs = shortestLeaseTtlMs < leaseTtlMs ? Math.max(1, Math.floor(shortestLeaseTtlMs / 3)) : intervalMs;
    this.tickMs = Math.max(1, Math.floor(Math.min(intervalMs, shortestIntervalMs) / 4));
  }

  /** Stops the timer at once (used at shutdown); leases still kept are no longer extended. */
  close(): void {
    this.entries.clear();
    this.idle();
  }

  /** Number of leases being kept. */
  get size(): number {
    return this.entries.size;
  }

  /**
   * Starts extending `receipt` until the returned handle is stopped: to `leaseTtlMs` (default the
   * keeper's) every `leaseTtlMs / 3` (the keeper's interval for its own lease length).
   */
  keep(receipt: Receipt, callbacks: KeptLeaseCallbacks, leaseTtlMs: number = this.leaseTtlMs): KeptLease {
    const intervalMs = leaseTtlMs === this.leaseTtlMs ? this.intervalMs : Math.max(1, Math.floor(leaseTtlMs / 3));
    const entry = new Entry(this.entries, receipt, leaseTtlMs, intervalMs, callbacks, this.clock.now() + intervalMs);
    this.entries.add(entry);
    if (this.timer === undefined) {
      this.timer = this.clock.setInterval(() => this.tick(), this.tickMs, { unref: true });
    }
    return entry;
  }

  private idle(): void {
    if (this.entries.size === 0 && this.timer !== undefined) {
      this.clock.clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private tick(): void {
    // The timer stops on the first tick with nothing to keep (not on every stop: messages come
    // and go faster than timers should be made and cleared).
    if (this.entries.size === 0) {
      this.idle();
      return;
    }
    const now = this.clock.now();
    for (const entry of this.entries) {
      if (entry.inFlight || entry.dueAt > now) continue;
      entry.dueAt = now + entry.intervalMs;
      entry.inFlight = this.extend(entry).finally(() => {
        entry.inFlight = undefined;
      });
    }
  }

  private async extend(entry: Entry): Promise<void> {
    try {
      await entry.receipt.extend(entry.leaseTtlMs);
      if (!entry.stopped) entry.callbacks.onExtended?.();
    } catch (error) {
      if (entry.stopped) return;
      if (error instanceof LeaseLostError || error instanceof ReceiptStateError) {
        entry.stopped = true;
        this.entries.delete(entry);
        this.idle();
        // A settled receipt (committed or released, perhaps by a call whose reply was lost) has no
        // lease left to keep; only a newer owner is a loss.
        if (error instanceof LeaseLostError) entry.callbacks.onLost(error);
      } else {
        entry.callbacks.onError?.(error);
      }
    }
  }
}
