/**
 * The claim step of the pipeline: the claim options (in one place), a claim with its local
 * retries while the store is unavailable, and the batch claim a source may make ahead of dispatch.
 */
import type { ClaimOptions, ClaimResult, Claimer } from '../claim/claimer';
import type { Delivery } from '../ports/delivery';
import { isRetriable } from '../util/errors';
import { type BackoffPolicy, retryAfter as retryFailedCall } from '../util/retry';
import type { PreparedClaim } from '../ports/source';
import type { ConsumerTtls, DeliveryView } from '../config/ttl-policy';

/** What the claim step reads of the consumer's options. */
export interface ClaimStepOptions {
  readonly claimer: Claimer;
  /** The lease and done TTLs of each delivery (the consumer's own, or its message type's). */
  readonly ttls: ConsumerTtls;
  /** Local retries while the store is unavailable. */
  readonly claimRetries: number;
  readonly claimBackoff: BackoffPolicy;
}

export class ClaimStep {
  /** @param shutdown aborts the wait between local retries (the claim then rejects with its reason) */
  constructor(
    private readonly options: ClaimStepOptions,
    private readonly shutdown: AbortSignal,
  ) {}

  /**
   * The options of one claim: the lease and done TTLs of the delivery (its message type's, per
   * `typeTtls`, else the consumer's), and the payload fingerprint when there is one. The one place
   * claim options are made (batch claims too).
   */
  optionsFor(delivery: DeliveryView, fingerprint: string | undefined): ClaimOptions {
    const ttls = this.options.ttls.claimOptions(delivery);
    return fingerprint === undefined ? ttls : { ...ttls, fingerprint };
  }

  /**
   * Claims `key`, or takes the claim prepared by {@link ClaimStep.claimBatch}. Transient store
   * errors are retried `claimRetries` times with `claimBackoff`: {@link ClaimStep.first}, then
   * {@link ClaimStep.retryAfter} when it rejects.
   * @throws the claimer's error once retries are spent or when it is not retriable; ShutdownError
   *   when shutdown interrupts a backoff
   */
  claim(key: string, delivery: DeliveryView, fingerprint: string | undefined, preclaimed: PreparedClaim | undefined): Promise<ClaimResult> {
    return this.first(key, delivery, fingerprint, preclaimed).catch((error: unknown) => this.retryAfter(error, key, delivery, fingerprint));
  }

  /**
   * The first attempt of {@link ClaimStep.claim}, without the retries: the prepared claim, or one
   * call to the claimer (a prepared claim that failed transiently is claimed again). The
   * claimer's own promise, so the per-message path waits on nothing else.
   * @throws (rejects with) the claimer's error, or a prepared claim's error that is not retriable
   */
  first(key: string, delivery: DeliveryView, fingerprint: string | undefined, preclaimed: PreparedClaim | undefined): Promise<ClaimResult> {
    if (preclaimed?.kind === 'claimed') return Promise.resolve(preclaimed.result);
    if (preclaimed?.kind === 'failed' && !isRetriable(preclaimed.error)) return Promise.reject(preclaimed.error);
    try {
      return this.options.claimer.claim(key, this.optionsFor(delivery, fingerprint));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * The retries of {@link ClaimStep.claim} after its first attempt failed with `error`.
   * @throws `error` when it is not retriable or `claimRetries` is 0; the last error once retries
   *   are spent; ShutdownError when shutdown interrupts a backoff
   */
  retryAfter(error: unknown, key: string, delivery: DeliveryView, fingerprint: string | undefined): Promise<ClaimResult> {
    let options: ClaimOptions | undefined;
    return retryFailedCall(
      error,
      () => {
        options ??= this.optionsFor(delivery, fingerprint);
        return this.options.claimer.claim(key, options);
      },
      // A delivery in claim backoff is work in flight that its caller awaits: its pause keeps the
      // process alive (a source with no socket of its own, as the in-process broker, has nothing else).
      { backoff: this.options.claimBackoff, retries: this.options.claimRetries, signal: this.shutdown, keepProcessAlive: true },
    );
  }

  /**
   * Claims the keys of a batch in one store round trip when the claimer has `claimMany`
   * (otherwise one claim each, concurrently). A delivery whose key cannot be derived is left
   * `skipped`: dispatch derives it again and dead-letters it with the reason. Never rejects.
   */
  async claimBatch(deliveries: readonly Delivery[], deriveKey: (delivery: Delivery) => string): Promise<PreparedClaim[]> {
    const prepared: PreparedClaim[] = deliveries.map(() => ({ kind: 'skipped' }));
    const requests: { index: number; key: string; options: ClaimOptions }[] = [];
    deliveries.forEach((delivery, index) => {
      try {
        requests.push({ index, key: deriveKey(delivery), options: this.optionsFor(delivery, undefined) });
      } catch {
        // left 'skipped'
      }
    });
    if (requests.length === 0) return prepared;
    const claimer = this.options.claimer;
    try {
      if (claimer.claimMany) {
        const entries = await claimer.claimMany(requests.map((r) => ({ key: r.key, options: r.options })));
        entries.forEach((entry, i) => {
          const { index, key } = requests[i]!;
          prepared[index] = entry.ok ? { kind: 'claimed', key, result: entry.result } : { kind: 'failed', key, error: entry.error };
        });
      } else {
        await Promise.all(
          requests.map(async ({ index, key, options }) => {
            try {
              prepared[index] = { kind: 'claimed', key, result: await claimer.claim(key, options) };
            } catch (error) {
              prepared[index] = { kind: 'failed', key, error: error as Error };
            }
          }),
        );
      }
    } catch (error) {
      for (const { index, key } of requests) prepared[index] = { kind: 'failed', key, error: error as Error };
    }
    return prepared;
  }
}
