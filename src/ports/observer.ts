/**
 * The one observation interface of the consumer: logging, metrics and tracing all hang here.
 * An observer that throws never breaks settlement: every call is guarded.
 */
import type { ClaimState } from '../claim/claimer';
import type { DeliveryMetadata } from './delivery';
import { ConfigurationError } from '../util/errors';
import type { Logger } from '../util/logger';

/** The outcomes of the pipeline, one event each. */
export const OUTCOMES = [
  'acquired',
  'done_duplicate',
  'busy',
  'claim_failed',
  'key_conflict',
  'committed',
  'commit_failed',
  'lease_lost',
  'released',
  'retry_exhausted',
  'rejected',
  'ack_failed',
] as const;

export type Outcome = (typeof OUTCOMES)[number];

/** Events that are not outcomes but are worth counting. */
export type AuxiliaryEvent = 'lease_extended' | 'fail_open';

/** One event of one delivery. */
export interface ConsumerEvent {
  readonly type: Outcome | AuxiliaryEvent;
  /** Consumer name (the key namespace). */
  readonly consumer: string;
  /** Namespaced idempotency key, when one was derived. */
  readonly key?: string;
  readonly attempt?: number;
  readonly fencingToken?: number;
  /** Reject reason, for `rejected`. */
  readonly reason?: string;
  readonly error?: unknown;
  readonly metadata: DeliveryMetadata;
}

/** Steps of the pipeline an observer may wrap (for spans and context). */
export type PipelineStep = 'claim' | 'handle' | 'commit' | 'release' | 'settle';

/** The broker action taken for a delivery. */
export type SettleAction = 'ack' | 'requeue' | 'reject' | 'none';

/** How a delivery ended. */
export interface DeliveryResult {
  readonly action: SettleAction;
  /** The last outcome reached (`committed`, `done_duplicate`, `busy`, `rejected`, …). */
  readonly outcome: Outcome;
  readonly key?: string;
  readonly claimState?: ClaimState;
  readonly attempt?: number;
  readonly fencingToken?: number;
  /** Reject reason, or requeue cause. */
  readonly reason?: string;
  /** Requeue delay asked of the broker, ms. */
  readonly delayMs?: number;
  readonly error?: unknown;
  /** True when the handler ran for this delivery. */
  readonly handled: boolean;
  /** Wall time in the pipeline, ms. */
  readonly durationMs: number;
}

/** What the pipeline tells an observer about a delivery as it starts. */
export interface DeliveryInfo {
  readonly consumer: string;
  readonly headers: Readonly<Record<string, unknown>>;
  readonly messageId?: string;
  readonly metadata: DeliveryMetadata;
}

/** Per-delivery hooks returned by {@link ConsumerObserver.onDelivery}. */
export interface DeliveryObservation {
  /**
   * Wraps one pipeline step, for example in a span made active. Must call `fn` once and return
   * (or throw) what it returns.
   */
  step?<T>(step: PipelineStep, fn: () => Promise<T>): Promise<T>;
  /** Each event of this delivery. */
  event?(event: ConsumerEvent): void;
  /** The delivery's end. */
  end?(result: DeliveryResult): void;
}

/** Observer of a consumer. All members optional. */
export interface ConsumerObserver {
  /** Called as each delivery enters the pipeline; may return per-delivery hooks. */
  onDelivery?(info: DeliveryInfo): DeliveryObservation | void;
  /** Every event of every delivery (for logs and counters). */
  onEvent?(event: ConsumerEvent): void;
}

/**
 * Fans one delivery's observation out to many observers, each call guarded so a throwing
 * observer is logged and ignored.
 */
export class ObservationFanout {
  constructor(
    private readonly observers: readonly ConsumerObserver[],
    private readonly logger: Logger,
  ) {}

  /** True when at least one observer is registered. */
  get active(): boolean {
    return this.observers.length > 0;
  }

  /** Starts observing a delivery. Free when there is no observer (a shared inert trace). */
  start(info: DeliveryInfo): DeliveryTrace {
    if (this.observers.length === 0) return INERT_TRACE;
    let hooks: DeliveryObservation[] | undefined;
    for (const observer of this.observers) {
      if (!observer.onDelivery) continue;
      const h = this.guard(() => observer.onDelivery!(info), 'onDelivery');
      if (h) (hooks ??= []).push(h);
    }
    return new DeliveryTrace(this.observers, hooks ?? [], this.logger);
  }

  private guard<T>(fn: () => T, where: string): T | undefined {
    try {
      return fn();
    } catch (error) {
      this.logger.warn({ err: error, where }, 'twophase observer threw; ignored');
      return undefined;
    }
  }
}

/** One delivery's observation handle, used by the pipeline. */
export class DeliveryTrace {
  /** False for the inert trace: callers skip building events. */
  readonly observed: boolean;

  constructor(
    private readonly observers: readonly ConsumerObserver[],
    private readonly hooks: readonly DeliveryObservation[],
    private readonly logger: Logger,
  ) {
    this.observed = observers.length > 0;
    this.wrapsSteps = hooks.some((h) => h.step !== undefined);
  }

  /** True when some observer wraps pipeline steps (callers may skip building the step closure otherwise). */
  readonly wrapsSteps: boolean;

  emit(event: ConsumerEvent): void {
    for (const o of this.observers) if (o.onEvent) this.guard(() => o.onEvent!(event), 'onEvent');
    for (const h of this.hooks) if (h.event) this.guard(() => h.event!(event), 'event');
  }

  end(result: DeliveryResult): void {
    for (const h of this.hooks) if (h.end) this.guard(() => h.end!(result), 'end');
  }

  /**
   * Runs `fn` inside every observer's wrapper for `step`; a throwing wrapper cannot skip or repeat
   * `fn`. The pipeline's one observer fast path: without a wrapper, `fn()` directly.
   */
  step<T>(step: PipelineStep, fn: () => Promise<T>): Promise<T> {
    if (!this.wrapsSteps) return fn();
    let run = fn;
    for (const h of this.hooks) {
      if (!h.step) continue;
      const inner = run;
      run = () => guardedStep(h, step, inner, this.logger);
    }
    return run();
  }

  private guard(fn: () => void, where: string): void {
    try {
      fn();
    } catch (error) {
      this.logger.warn({ err: error, where }, 'twophase observer threw; ignored');
    }
  }
}

async function guardedStep<T>(hook: DeliveryObservation, step: PipelineStep, fn: () => Promise<T>, logger: Logger): Promise<T> {
  let called = false;
  let settled: { ok: true; value: T } | { ok: false; error: unknown } | undefined;
  const once = async () => {
    if (called) throw new ConfigurationError('observer called a pipeline step twice');
    called = true;
    try {
      const value = await fn();
      settled = { ok: true, value };
      return value;
    } catch (error) {
      settled = { ok: false, error };
      throw error;
    }
  };
  try {
    return await hook.step!(step, once);
  } catch (error) {
    if (settled === undefined && !called) {
      logger.warn({ err: error, step }, 'twophase observer step wrapper threw before running the step; running it unwrapped');
      return fn();
    }
    if (settled && settled.ok) {
      logger.warn({ err: error, step }, 'twophase observer step wrapper threw after the step; ignored');
      return settled.value;
    }
    throw settled && !settled.ok ? settled.error : error;
  }
}

const silent: Logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
/** The trace of a consumer without observers: every call is a no-op. */
/** The trace of a delivery nobody observes (shared; internal). */
export const INERT_TRACE = new DeliveryTrace([], [], silent);
