/**
 * What the demo needs of a broker + claimer combination.
 */
import type { Claimer, MessageSource } from '../../src';

/** One message the demo publishes. */
export interface DemoMessage {
  /** Idempotency key (undefined for a message without one). */
  readonly key: string | undefined;
  readonly body: Buffer;
}

/** A source the demo can "kill": its unsettled deliveries go back to the broker. */
export interface CrashableSource extends MessageSource {
  /** Drops the consumer as a dying process would (no settle reaches the broker). */
  crash(): unknown;
  /**
   * True when the source itself ignores the settles of a crashed consumer and needs them to wind
   * down (KafkaSource: a partition waits for its in-flight records before the member can leave).
   * Otherwise the demo drops those settles before they reach the source.
   */
  readonly forwardSettlesAfterCrash?: boolean;
}

/** An effect row the store committed (the transactional inbox). */
export interface EffectRow {
  readonly key: string;
  readonly worker: number;
  readonly fencingToken: number;
}

/** A claimer of one worker's own, with its own connections (the PostgreSQL inbox). */
export interface WorkerClaimer {
  readonly claimer: Claimer;
  /** Ends the worker's store sessions as a killed process's would: open transactions roll back. */
  crash(): Promise<void>;
}

export interface DemoStack {
  /** Shown in the report, e.g. "memory broker + memory claimer". */
  readonly label: string;
  /** The claimer every worker shares (each wraps it to simulate its own crash); none with `inbox`. */
  readonly claimer: Claimer | undefined;
  /**
   * The transactional inbox: each worker gets a claimer of its own (instead of `claimer`), its
   * handler writes the effect through `ctx.transaction` with `recordEffect`, and the effects
   * counted are the rows the store committed (`effects()`), not the handler's calls.
   */
  readonly inbox?: {
    workerClaimer(worker: number): WorkerClaimer;
    recordEffect(transaction: unknown, key: string, worker: number, fencingToken: number): Promise<void>;
    effects(): Promise<EffectRow[]>;
  };
  /** Declared replicas: 1 for the in-process claimer (all workers live in this process). */
  readonly replicas: number;
  makeSource(worker: number): CrashableSource;
  publish(messages: readonly DemoMessage[]): Promise<void>;
  /** Messages waiting in the work queue and its retry path (not counting deliveries in flight). */
  waiting(): Promise<number>;
  /** Messages in the dead-letter queue with their reason. */
  deadLetters(): Promise<{ key: string | undefined; reason: string }[]>;
  close(): Promise<void>;
}
