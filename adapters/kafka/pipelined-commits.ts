/**
 * The commits a partition has in flight while its later records run (the records whose `handled`
 * moment came before they settled), counted, with a way to wait for the next one to end or for
 * all of them.
 */

/** Records per partition whose commit is in flight while later records run. */
export const MAX_PIPELINED = 256;

/** The in-flight commits of one partition worker. */
export class PipelinedCommits {
  private count = 0;
  private waiters: Array<() => void> = [];

  /** Commits in flight now. */
  get inFlight(): number {
    return this.count;
  }

  /** True when no more may start before one ended. */
  get full(): boolean {
    return this.count >= MAX_PIPELINED;
  }

  started(): void {
    this.count++;
  }

  /** One ended: wakes whoever waits. */
  ended(): void {
    this.count--;
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  /** Resolves when the next commit in flight ended. */
  nextEnd(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Resolves once none is in flight. */
  async drained(): Promise<void> {
    while (this.count > 0) await this.nextEnd();
  }
}
