/**
 * The retry horizon of a consumer: the longest time a message can take from its first delivery
 * to its dead-letter through retries and busy requeues. A `doneTtlMs` shorter than that lets a
 * copy of a message that is still being retried outlive the committed record of another copy,
 * and run its effect again; the consumer warns about it at construction.
 */
import type { BackoffPolicy } from '../util/retry';

/** What the horizon depends on (the consumer's resolved options). */
export interface RetryHorizonInputs {
  readonly maxAttempts: number;
  readonly retryBackoff: BackoffPolicy;
  readonly leaseTtlMs: number;
  readonly busyRequeueDelayMs: number;
  readonly handlerTimeoutMs: number | undefined;
}

/**
 * Upper bound of the time from first delivery to dead-letter, ms, before any rounding up by the
 * broker (RabbitMQ delay tiers):
 * - every retry's largest backoff (`retryBackoff` with its jitter at the top), for attempts
 *   1 … maxAttempts − 1;
 * - per attempt, the handler's run (`handlerTimeoutMs`, or `leaseTtlMs` when there is no timeout:
 *   a handler kept alive longer is not bounded at all), plus one busy wait: a lease left by a
 *   crashed owner lives up to `leaseTtlMs`, retried every `busyRequeueDelayMs`.
 * Outages of the claim store add to it without bound and are not counted.
 */
export function retryHorizonMs(o: RetryHorizonInputs): number {
  let backoff = 0;
  for (let retry = 1; retry < o.maxAttempts; retry++) {
    const base = Math.min(o.retryBackoff.maxDelayMs, o.retryBackoff.initialDelayMs * o.retryBackoff.multiplier ** (retry - 1));
    backoff += base * (1 + o.retryBackoff.jitter);
  }
  const perAttempt = (o.handlerTimeoutMs ?? o.leaseTtlMs) + o.leaseTtlMs + o.busyRequeueDelayMs;
  return Math.ceil(backoff + o.maxAttempts * perAttempt);
}
