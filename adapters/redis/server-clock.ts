/**
 * An estimate of the Redis server's clock, used for one thing only: telling a script the latest
 * server time at which it may still act (its `notAfter`), so an operation that reaches Redis after
 * its caller gave up — held by `CLIENT PAUSE`, or resent by ioredis after a reconnect — writes
 * nothing. Lease expiry is never judged here: the scripts read `TIME` themselves.
 *
 * Every script reply carries the server time `S` at which it ran. Read at local monotonic time
 * `L` (later than `S` by the reply's transit), `S − L` is a lower bound of the true offset
 * between the two clocks, so the estimate errs on the strict side by the transit time (well under
 * a millisecond on a healthy link). The highest recent sample is kept; a lower one replaces it
 * only after {@link SAMPLE_TRUST_MS}, so a stalled event loop (a low sample) costs nothing, and a
 * server clock stepped backwards is trusted again within seconds. Clock *offsets* between client
 * and server cancel out (S24); only the two clocks' rates matter.
 */
import type { Clock } from '../../src';

/** How long the highest offset sample is trusted before a lower one may replace it, ms. */
export const SAMPLE_TRUST_MS = 5000;

export class ServerClock {
  private offsetMs: number | undefined;
  private sampledAt = 0;

  constructor(private readonly clock: Clock) {}

  /** Records that the server clock read `serverNowMs` (Unix ms) just before now. */
  sample(serverNowMs: number): void {
    const localNow = this.clock.now();
    const offset = serverNowMs - localNow;
    if (this.offsetMs === undefined || offset >= this.offsetMs || localNow - this.sampledAt > SAMPLE_TRUST_MS) {
      this.offsetMs = offset;
      this.sampledAt = localNow;
    }
  }

  /**
   * The server time (Unix ms) matching local time `localMs`, rounded up; 0 (meaning "no
   * deadline at the server") until the first sample.
   */
  toServerMs(localMs: number): number {
    return this.offsetMs === undefined ? 0 : Math.ceil(localMs + this.offsetMs);
  }
}
