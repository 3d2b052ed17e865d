/** A counting semaphore bounding work in flight. */
export class Semaphore {
  private available: number;
  private readonly waiters: (() => void)[] = [];

  constructor(permits: number) {
    this.available = permits;
  }

  /** Takes a permit at once if one is free; true when taken. */
  tryAcquire(): boolean {
    if (this.available > 0) {
      this.available--;
      return true;
    }
    return false;
  }

  /** Resolves when a permit is held; call `release` once when done. */
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
