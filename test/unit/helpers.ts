import {
  type Claimer,
  ClaimerUnavailableError,
  ConsumerBase,
  type ConsumerOptions,
  type Delivery,
  type Disposition,
  type HandlerContext,
  type JsonValue,
  type Message,
  type MessageSource,
  type RejectInfo,
  type Receipt,
  type RequeueInfo,
  silentLogger,
} from '../../src';
import { type DeliverySink } from '../../src/adapter-kit';

/** A source that delivers nothing by itself; tests call `consumer.dispatch` directly. */
export class ManualSource implements MessageSource {
  readonly system = 'test';
  sink: DeliverySink | undefined;
  started = false;
  intakeStopped = false;
  closed = false;
  async start(sink: DeliverySink): Promise<void> {
    this.sink = sink;
    this.started = true;
  }
  async stopIntake(): Promise<void> {
    this.intakeStopped = true;
  }
  async close(): Promise<void> {
    this.closed = true;
  }
}

export type SettleCall =
  | { op: 'ack'; duplicate: boolean }
  | { op: 'requeue'; delayMs: number; info: RequeueInfo }
  | { op: 'reject'; info: RejectInfo };

/** A settler that records each call; `failWith` makes the broker call reject. */
export function recordingDelivery(
  input: { body?: unknown; key?: string | null; headers?: Record<string, unknown>; messageId?: string; priorAttempts?: number; raw?: Buffer } = {},
  hooks: { failWith?: Error; onSettle?: (call: SettleCall) => void; handled?: () => void } = {},
): Delivery & { calls: SettleCall[] } {
  const calls: SettleCall[] = [];
  const record = async (call: SettleCall) => {
    calls.push(call);
    hooks.onSettle?.(call);
    if (hooks.failWith) throw hooks.failWith;
  };
  const headers: Record<string, unknown> = { ...(input.headers ?? {}) };
  if (input.key !== null && input.key !== undefined) headers['idempotency-key'] = input.key;
  return {
    calls,
    body: input.raw ?? Buffer.from(JSON.stringify(input.body ?? { n: 1 })),
    headers,
    messageId: input.messageId,
    metadata: { system: 'test', destination: 'q', redelivered: false, priorAttempts: input.priorAttempts },
    settler: {
      ack: (info) => record({ op: 'ack', duplicate: info.duplicate }),
      requeue: (delayMs, info) => record({ op: 'requeue', delayMs, info }),
      reject: (info) => record({ op: 'reject', info }),
      ...(hooks.handled ? { handled: hooks.handled } : {}),
    },
  };
}

/**
 * A claimer that passes every claim through to `inner` and lets a subclass wrap each acquired
 * receipt (`wrap` gets a copy of the inner receipt to override operations on).
 */
export abstract class WrappingClaimer implements Claimer {
  constructor(readonly inner: Claimer) {}
  get kind() {
    return this.inner.kind;
  }
  async claim(key: string, options: Parameters<Claimer['claim']>[1]) {
    const result = await this.inner.claim(key, options);
    if (result.state !== 'acquired') return result;
    const inner = result.receipt;
    const copy: Receipt = {
      key: inner.key,
      acquired: true,
      ownerToken: inner.ownerToken,
      fencingToken: inner.fencingToken,
      commit: (value) => inner.commit(value),
      release: (releaseOptions) => inner.release(releaseOptions),
      extend: (ttlMs) => inner.extend(ttlMs),
    };
    return { ...result, receipt: this.wrap(copy) };
  }
  protected abstract wrap(receipt: Receipt): Receipt;
}

/**
 * Wraps a claimer so that each acquired receipt's commit waits until the test opens it
 * (`open(key)`); `waiting` lists the keys whose commit was issued and is held.
 */
export class GatedCommitClaimer extends WrappingClaimer {
  readonly waiting: string[] = [];
  private readonly gates = new Map<string, () => void>();
  private readonly opened = new Set<string>();
  protected wrap(receipt: Receipt): Receipt {
    const commit = async (value?: JsonValue) => {
      if (!this.opened.has(receipt.key)) {
        this.waiting.push(receipt.key);
        await new Promise<void>((resolve) => this.gates.set(receipt.key, resolve));
      }
      return receipt.commit(value);
    };
    return { ...receipt, commit };
  }
  /** Lets the commit of `key` (held now or issued later) go through. */
  open(key: string): void {
    this.opened.add(key);
    const index = this.waiting.indexOf(key);
    if (index >= 0) this.waiting.splice(index, 1);
    this.gates.get(key)?.();
    this.gates.delete(key);
  }
}

export type Handler = (message: Message<unknown>, context: HandlerContext) => Promise<Disposition>;

/** A consumer whose handler is a function given by the test. */
export class FnConsumer extends ConsumerBase<unknown> {
  handler: Handler;
  duplicates: { key: string; result: unknown }[] = [];
  constructor(options: Omit<ConsumerOptions, 'source'> & { source?: MessageSource }, handler: Handler) {
    super({ logger: silentLogger, source: options.source ?? new ManualSource(), ...options });
    this.handler = handler;
  }
  handle(message: Message<unknown>, context: HandlerContext): Promise<Disposition> {
    return this.handler(message, context);
  }
  protected override onDuplicate(message: Message<unknown>, result: unknown): void {
    this.duplicates.push({ key: message.key, result });
  }
}

/** Wraps a claimer so tests can make calls fail or count them. */
export class FlakyClaimer extends WrappingClaimer {
  claimCalls = 0;
  failClaims = 0;
  /** Commits that fail with ClaimerUnavailableError before they reach the store. */
  failCommits = 0;
  /** Releases that fail with ClaimerUnavailableError before they reach the store. */
  failReleases = 0;
  commitCalls = 0;
  releaseCalls = 0;
  override async claim(key: string, options: Parameters<Claimer['claim']>[1]) {
    this.claimCalls++;
    if (this.failClaims > 0) {
      this.failClaims--;
      throw new ClaimerUnavailableError('injected outage');
    }
    return super.claim(key, options);
  }
  protected wrap(receipt: Receipt): Receipt {
    return {
      ...receipt,
      commit: async (value) => {
        this.commitCalls++;
        if (this.failCommits > 0) {
          this.failCommits--;
          throw new ClaimerUnavailableError('injected commit outage');
        }
        return receipt.commit(value);
      },
      release: async (options) => {
        this.releaseCalls++;
        if (this.failReleases > 0) {
          this.failReleases--;
          throw new ClaimerUnavailableError('injected release outage');
        }
        return receipt.release(options);
      },
    };
  }
}

export function fastOptions(claimer: Claimer): Omit<ConsumerOptions, 'source'> {
  return {
    name: 'test',
    claimer,
    leaseTtlMs: 1000,
    doneTtlMs: 60_000,
    busyRequeueDelayMs: 10,
    unavailableRequeueDelayMs: 11,
    claimBackoff: { initialDelayMs: 1, maxDelayMs: 2, jitter: 0 },
    retryBackoff: { initialDelayMs: 100, maxDelayMs: 1000, multiplier: 2, jitter: 0 },
    commitDeadlineMs: 500,
    releaseDeadlineMs: 200,
  };
}


/** One event-loop turn (setImmediate). */
export const tick = (): Promise<unknown> => new Promise((resolve) => setImmediate(resolve));

/** Waits turn by turn (at most 200) until `check()` holds; fails naming `what`. No timers. */
export async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (check()) return;
    await tick();
  }
  throw new Error(`never saw ${what}`);
}
