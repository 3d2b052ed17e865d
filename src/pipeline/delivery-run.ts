/**
 * One delivery on its way through the pipeline, in one object: the delivery and its trace, what
 * the claim gave (key, attempt, fencing token, receipt), the concurrency permit, and the running
 * handler's abort signal and keep-alive callbacks (one allocation per message instead of several
 * objects and closures passed around as positional arguments).
 */
import type { ClaimState, Receipt } from '../claim/claimer';
import type { Delivery } from '../ports/delivery';
import { type LeaseLostError, ShutdownError, TimeoutError } from '../util/errors';
import { LazyAbort } from './handler-signal';
import type { KeptLeaseCallbacks } from '../claim/keep-alive';
import type { Logger } from '../util/logger';
import type { ConsumerEvent, DeliveryTrace } from '../ports/observer';
import type { Semaphore } from '../util/semaphore';

/** What a run reports back to its consumer while its handler runs. */
export interface RunHost {
  /** The consumer's name (the key namespace), for events. */
  readonly name: string;
  /** Rate-limited logger of lease-extend failures. */
  readonly floodLogger: Logger;
}

export class DeliveryRun extends LazyAbort implements KeptLeaseCallbacks {
  /** The namespaced key, once derived. */
  key: string | undefined = undefined;
  /** The claim's state, once claimed. */
  claimState: ClaimState | undefined = undefined;
  /** Attempt number of this handler run (1-based), once acquired (or on the fail-open path). */
  attempt: number | undefined = undefined;
  /** The lease's fencing token, once acquired (0 on the fail-open path). */
  fencingToken: number | undefined = undefined;
  /** The acquired claim's receipt; undefined without a lease. */
  receipt: Receipt | undefined = undefined;
  /** Set when keep-alive found the lease taken over. */
  lost: LeaseLostError | undefined = undefined;
  /** Set once the settler was told the delivery is handled: from then on it must end in an ack. */
  handled = false;
  /**
   * Called once (DeliverySink.submit's `handled`): with `true` when the delivery is bound to end in
   * an ack, else with `false` as the delivery ends.
   */
  onHandled: ((early: boolean) => void) | undefined = undefined;
  private permitHeld = true;
  private onAbandon: ((reason: unknown) => void) | undefined = undefined;

  constructor(
    private readonly host: RunHost,
    private readonly limiter: Semaphore,
    readonly delivery: Delivery,
    readonly trace: DeliveryTrace,
  ) {
    super();
  }

  /**
   * Reports one event of this delivery with its key, attempt and fencing token (as far as they
   * are known). The one observer fast path: builds nothing when no observer is registered.
   */
  emit(type: ConsumerEvent['type'], error?: unknown, reason?: string): void {
    if (!this.trace.observed) return;
    this.trace.emit({
      type,
      consumer: this.host.name,
      key: this.key,
      attempt: this.attempt,
      fencingToken: this.fencingToken,
      reason,
      error,
      metadata: this.delivery.metadata,
    });
  }

  /** Gives the concurrency permit back; only the first call counts. */
  releasePermit(): void {
    if (!this.permitHeld) return;
    this.permitHeld = false;
    this.limiter.release();
  }

  /**
   * Resolves or rejects as `work` does, or rejects with the abort reason as soon as the run is
   * aborted for a shutdown or a handler timeout (not for a lost lease: that handler may finish,
   * and its commit is fenced). An abandoned `work` is left running with its rejection handled.
   */
  race<T>(work: Promise<T>): Promise<T> {
    if (this.aborted && abandonsOn(this.reason)) {
      work.catch(() => undefined);
      return Promise.reject(this.reason);
    }
    // `work` settles the race through the race's own resolve and reject (so its rejection stays
    // handled once abandoned); an abort rejects first. Rejecting a settled race is a no-op.
    return new Promise<T>((resolve, reject) => {
      this.onAbandon = reject;
      work.then(resolve, reject);
    });
  }

  override abort(reason: unknown): void {
    super.abort(reason);
    if (this.onAbandon && abandonsOn(reason)) {
      const abandon = this.onAbandon;
      this.onAbandon = undefined;
      abandon(reason);
    }
  }

  onLost(error: LeaseLostError): void {
    this.lost = error;
    this.abort(error);
  }

  onExtended(): void {
    this.emit('lease_extended');
  }

  onError(error: unknown): void {
    this.host.floodLogger.warn({ err: error, key: this.key }, 'lease extend failed; will try again');
  }
}

function abandonsOn(reason: unknown): boolean {
  return reason instanceof ShutdownError || reason instanceof TimeoutError;
}
