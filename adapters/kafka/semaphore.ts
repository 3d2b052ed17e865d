/** A counting semaphore: bounds how many partitions dispatch at once. */
export class Semaphore {
  private available: number;
  private readonly waiters: Array<() => void> = [];

  constructor(permits: number) {
    this.available = permits;
  }

  /** Takes a permit if one is free at once (no promise); call {@link Semaphore.release} once afterwards. */
  tryAcquire(): boolean {
    if (this.available > 0 && this.waiters.length === 0) {
      this.available--;
      return true;
    }
    return false;
  }

  /** Resolves when a permit is held; call {@link Semaphore.release} once afterwards. */
  acquire(): Promise<void> {
    if (this.available > 0) {
      this.available--;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.available++;
  }
}
