/**
 * Rate limit of repeated log lines, by reason: per window, the first few lines of each reason are
 * logged as they come; the rest are only counted, and one summary line (count by reason) follows
 * at the end of the window. A flood (10 000 keyless messages a second, every lease extension
 * failing while the store is down) thus yields a handful of lines and one summary per window,
 * never a line per message.
 *
 * Cheap on the per-message path: {@link LogLimiter.admit} is a map lookup and a counter
 * increment; the caller builds its log fields only when admitted.
 */
import type { Logger } from './logger';

/** Window of the limiter, ms: at most {@link LOG_BURST} lines per reason, then one summary. */
export const LOG_WINDOW_MS = 10_000;
/** Lines logged individually per reason and window. */
export const LOG_BURST = 5;
/** Distinct reasons tracked per window; further ones share the reason `other`. */
const MAX_REASONS = 100;

interface ReasonCount {
  logged: number;
  suppressed: number;
}

export class LogLimiter {
  private readonly counts = new Map<string, ReasonCount>();
  private windowStart: number;
  private timer: NodeJS.Timeout | undefined;

  /**
   * @param logger - where the summary goes (at warn)
   * @param context - fields added to the summary line (for example `{ consumer }`)
   * @param now - clock in ms (tests inject one)
   */
  constructor(
    private readonly logger: Logger,
    private readonly context: object,
    private readonly windowMs = LOG_WINDOW_MS,
    private readonly burst = LOG_BURST,
    private readonly now: () => number = Date.now,
  ) {
    this.windowStart = now();
  }

  /** True when a line for `reason` may be logged now; otherwise counts it for the summary. */
  admit(reason: string): boolean {
    if (this.now() - this.windowStart >= this.windowMs) this.flush();
    let count = this.counts.get(reason);
    if (count === undefined) {
      if (this.counts.size >= MAX_REASONS) return this.admit('other');
      count = { logged: 0, suppressed: 0 };
      this.counts.set(reason, count);
    }
    if (count.logged < this.burst) {
      count.logged++;
      return true;
    }
    if (count.suppressed++ === 0 && this.timer === undefined) {
      // One summary at the end of the window even if nothing else happens; never keeps the process alive.
      this.timer = setTimeout(() => this.flush(), Math.max(0, this.windowStart + this.windowMs - this.now()));
      this.timer.unref();
    }
    return false;
  }

  /** Logs the summary of lines not logged in the current window (if any) and starts a new window. Safe to repeat. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    let suppressed: Record<string, number> | undefined;
    let total = 0;
    for (const [reason, count] of this.counts) {
      if (count.suppressed > 0) {
        (suppressed ??= {})[reason] = count.suppressed;
        total += count.suppressed;
      }
    }
    this.counts.clear();
    const windowMs = Math.round(this.now() - this.windowStart);
    this.windowStart = this.now();
    if (suppressed) {
      this.logger.warn({ ...this.context, suppressed, total, windowMs }, `twophase: ${total} more failures not logged one by one in the last ${windowMs} ms (count by reason)`);
    }
  }

  /**
   * A logger whose warn and error lines go through this limiter under `reason`; debug and info
   * pass. For code that logs per message without knowing the limiter (the lease keep-alive).
   */
  limited(logger: Logger, reason: string): Logger {
    return {
      debug: (obj, msg) => logger.debug(obj, msg),
      info: (obj, msg) => logger.info(obj, msg),
      warn: (obj, msg) => {
        if (this.admit(reason)) logger.warn(obj, msg);
      },
      error: (obj, msg) => {
        if (this.admit(reason)) logger.error(obj, msg);
      },
    };
  }
}
