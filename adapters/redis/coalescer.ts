/**
 * Collects operations issued close together and hands them over as one batch: at the end of the
 * current event-loop turn (`setImmediate`), after a window of `windowMs`, or as soon as
 * `maxItems` are waiting. Knows nothing about Redis; the claimer decides what a batch becomes.
 */
export class Coalescer<T> {
  private pending: T[] = [];
  private immediate: NodeJS.Immediate | undefined;
  private timer: NodeJS.Timeout | undefined;

  /**
   * @param windowMs 0 = flush when the current event-loop turn ends; > 0 = after that many ms
   * @param maxItems flush at once when this many items wait
   * @param flushFn receives each batch (never empty); must not throw
   */
  constructor(
    private readonly windowMs: number,
    private readonly maxItems: number,
    private readonly flushFn: (items: T[]) => void,
  ) {}

  /** Number of items waiting for the next flush. */
  get size(): number {
    return this.pending.length;
  }

  add(item: T): void {
    this.pending.push(item);
    if (this.pending.length >= this.maxItems) {
      this.flush();
    } else if (!this.immediate && !this.timer) {
      if (this.windowMs === 0) this.immediate = setImmediate(() => this.flush());
      else this.timer = setTimeout(() => this.flush(), this.windowMs);
    }
  }

  /** Hands the waiting items over now. */
  flush(): void {
    if (this.immediate) clearImmediate(this.immediate);
    if (this.timer) clearTimeout(this.timer);
    this.immediate = undefined;
    this.timer = undefined;
    const items = this.pending;
    if (items.length === 0) return;
    this.pending = [];
    this.flushFn(items);
  }
}
