import type { DeliveryMetadata, HandlerContext } from '../ports/delivery';
import type { OutboxWriter } from '../outbox/ports';
import { type Outbox, ScopedOutbox, UnavailableOutbox } from '../outbox/staging-outbox';

/**
 * A lazily created AbortSignal: most handlers never read their signal, so the AbortController
 * is only made when the handler reads it (or when it must already be aborted).
 */
export class LazyAbort {
  private controller: AbortController | undefined;
  private abortedWith: { reason: unknown } | undefined;

  /** The signal, created on first read; already aborted if `abort` came first. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortedWith) this.controller.abort(this.abortedWith.reason);
    }
    return this.controller.signal;
  }

  get aborted(): boolean {
    return this.abortedWith !== undefined;
  }

  get reason(): unknown {
    return this.abortedWith?.reason;
  }

  /** Aborts with `reason`; the first reason wins. */
  abort(reason: unknown): void {
    if (this.abortedWith) return;
    this.abortedWith = { reason };
    this.controller?.abort(reason);
  }
}

/** The handler context; its signal is created only if the handler reads it. */
export class LazyContext<TTransaction = undefined> implements HandlerContext<TTransaction> {
  constructor(
    private readonly abort: LazyAbort,
    readonly fencingToken: number,
    readonly attempt: number,
    readonly metadata: DeliveryMetadata,
    private readonly claimTransaction: TTransaction,
    private readonly outboxWriter: OutboxWriter | undefined,
    private readonly outboxScope: string,
  ) {}

  private stagingOutbox: Outbox | undefined;

  /** True once the handler read `transaction` while there was none (a misconfiguration, see TransactionUnavailableError). */
  readAbsentTransaction = false;

  get transaction(): TTransaction {
    if (this.claimTransaction === undefined) this.readAbsentTransaction = true;
    return this.claimTransaction;
  }

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** Created on first read, like the signal: most handlers stage nothing. */
  get outbox(): Outbox {
    this.stagingOutbox ??= this.outboxWriter
      ? new ScopedOutbox(this.outboxWriter, this.outboxScope)
      : new UnavailableOutbox('the claimer has no transaction (only the PostgreSQL claimer in transactional mode has one), or the run has no claim (failOpen)');
    return this.stagingOutbox;
  }
}
