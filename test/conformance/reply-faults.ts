/**
 * Lost replies for the claimer conformance suite: a claimer's store boundary calls `after(op)`
 * once the store acted; when a drop of `op` is armed, that call throws a retriable error instead
 * of returning, as a connection reset after the store applied the operation would.
 */
import { ClaimerUnavailableError } from '../../src';

export type ReplyOperation = 'commit' | 'release';

export class ReplyFaults {
  private readonly armed = new Map<ReplyOperation, number>();

  /** Loses the reply of the next `operation` that reaches the store. */
  dropNext(operation: ReplyOperation): void {
    this.armed.set(operation, (this.armed.get(operation) ?? 0) + 1);
  }

  /** True (and disarms one) when the reply of this `operation` is to be lost. */
  take(operation: ReplyOperation): boolean {
    const count = this.armed.get(operation) ?? 0;
    if (count === 0) return false;
    this.armed.set(operation, count - 1);
    return true;
  }

  /** Throws the lost-reply error when armed for `operation`; call it after the store acted. */
  after(operation: ReplyOperation): void {
    if (this.take(operation)) throw new ClaimerUnavailableError(`injected: the ${operation} reached the store, its reply was lost`);
  }
}
