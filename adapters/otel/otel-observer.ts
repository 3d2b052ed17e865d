/**
 * The OpenTelemetry observer: one CONSUMER process span per delivery with child spans for the
 * claim, commit, release and settle steps, the handler run inside the process span's context, and
 * the metrics, all from the core's single observer interface.
 */
import { performance } from 'node:perf_hooks';
import {
  type Attributes,
  type Context,
  context as otelContext,
  diag,
  type HrTime,
  isSpanContextValid,
  type Link,
  type MeterProvider,
  metrics,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapPropagator,
  trace,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';
import {
  type ClaimResult,
  ConfigurationError,
  type ConsumerEvent,
  type ConsumerObserver,
  type DeliveryInfo,
  type DeliveryObservation,
  type DeliveryResult,
  type Outcome,
  OUTCOMES,
  type PipelineStep,
} from '../../src';
import {
  checkKnownOptions,
  optionNames,
  errorType,
  truncateErrorMessage,
} from '../../src/adapter-kit';
import { deliveryFailure, destinationAttributes, OTHER_ERROR_TYPE, processSpanAttributes, spanName } from './attributes';
import { extractContext } from './headers';
import { TwophaseInstruments } from './metrics';
import {
  ATTR_ERROR_TYPE,
  ATTR_MESSAGING_OPERATION_NAME,
  ATTR_MESSAGING_OPERATION_TYPE,
  ATTR_TWOPHASE_ATTEMPT,
  ATTR_TWOPHASE_CLAIM_STATE,
  ATTR_TWOPHASE_FENCING_TOKEN,
  ATTR_TWOPHASE_HANDLED,
  ATTR_TWOPHASE_KEY,
  ATTR_TWOPHASE_OUTCOME,
  ATTR_TWOPHASE_REASON,
  ATTR_TWOPHASE_REQUEUE_DELAY_MS,
  ATTR_TWOPHASE_SETTLE_ACTION,
  ATTR_TWOPHASE_STEP,
  EVENT_PREFIX,
  MESSAGING_OPERATION_TYPE_VALUE_PROCESS,
  MESSAGING_OPERATION_TYPE_VALUE_SETTLE,
} from './semconv';
import { INSTRUMENTATION_NAME, INSTRUMENTATION_VERSION } from './version';

/** Options of {@link createOtelObserver}. */
export interface OtelObserverOptions {
  /** Where spans go. Default: the global tracer provider (`trace.getTracerProvider()`), resolved lazily by the API's proxy. */
  readonly tracerProvider?: TracerProvider;
  /**
   * Where metrics go. Default: the global meter provider (`metrics.getMeterProvider()`), looked
   * up at the first delivery, so start the SDK before the consumers.
   */
  readonly meterProvider?: MeterProvider;
  /** Reads trace context and baggage from message headers. Default: the global propagator. */
  readonly propagator?: TextMapPropagator;
  /**
   * false (default): the process span continues the producer's trace (its parent is the span
   * context in the headers). true: the process span starts a new trace and links to the
   * producer's span context. Baggage from the headers reaches the handler either way.
   */
  readonly useLinks?: boolean;
  /** Record the namespaced idempotency key as `twophase.key` on spans (never on metrics). Default true. */
  readonly recordKey?: boolean;
  /** Emit spans and run the handler inside the process span's context. Default true. */
  readonly traces?: boolean;
  /** Record the metrics. Default true. */
  readonly metrics?: boolean;
}

/** The on/off options of {@link OtelObserverOptions}, each with a default in {@link OTEL_OBSERVER_DEFAULTS}. */
export type OtelObserverFlag = 'useLinks' | 'recordKey' | 'traces' | 'metrics';

/** Defaults of the flag options of {@link OtelObserverOptions}. */
export const OTEL_OBSERVER_DEFAULTS: Readonly<Required<Pick<OtelObserverOptions, OtelObserverFlag>>> = {
  useLinks: false,
  recordKey: true,
  traces: true,
  metrics: true,
};

type ResolvedOptions = Required<Pick<OtelObserverOptions, OtelObserverFlag>> & Pick<OtelObserverOptions, 'tracerProvider' | 'meterProvider' | 'propagator'>;

const OTEL_OPTION_NAMES = optionNames<OtelObserverOptions>()(['tracerProvider', 'meterProvider', 'propagator', 'useLinks', 'recordKey', 'traces', 'metrics']);

function resolveOptions(options: OtelObserverOptions | undefined): ResolvedOptions {
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new ConfigurationError(`OpenTelemetry observer options must be an object, got ${String(options)}`);
  }
  checkKnownOptions('OpenTelemetry observer options', options, OTEL_OPTION_NAMES);
  const resolved: ResolvedOptions = { ...OTEL_OBSERVER_DEFAULTS, ...stripUndefined(options ?? {}) };
  for (const flag of Object.keys(OTEL_OBSERVER_DEFAULTS) as OtelObserverFlag[]) {
    if (typeof resolved[flag] !== 'boolean') throw new ConfigurationError(`${flag} must be a boolean, got ${JSON.stringify(resolved[flag])}`);
  }
  if (resolved.tracerProvider !== undefined && typeof resolved.tracerProvider.getTracer !== 'function') {
    throw new ConfigurationError('tracerProvider must be an OpenTelemetry TracerProvider (with getTracer)');
  }
  if (resolved.meterProvider !== undefined && typeof resolved.meterProvider.getMeter !== 'function') {
    throw new ConfigurationError('meterProvider must be an OpenTelemetry MeterProvider (with getMeter)');
  }
  if (resolved.propagator !== undefined && (typeof resolved.propagator.extract !== 'function' || typeof resolved.propagator.inject !== 'function')) {
    throw new ConfigurationError('propagator must be an OpenTelemetry TextMapPropagator (with extract and inject)');
  }
  return resolved;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * Creates the observer to pass in `ConsumerOptions.observers`. One observer may serve many
 * consumers. Spans, metrics and the spans' attributes are listed in docs/otel.md.
 *
 * @throws ConfigurationError for an invalid option
 */
export function createOtelObserver(options?: OtelObserverOptions): ConsumerObserver {
  return new OtelObserver(resolveOptions(options));
}

class OtelObserver implements ConsumerObserver {
  private readonly tracer: Tracer | undefined;
  private instruments: TwophaseInstruments | undefined;
  /** Process spans this observer started, so a leaked context never passes one off as another instrumentation's. */
  private readonly ownSpans = new WeakSet<Span>();
  private warnedForeignSpan = false;

  constructor(private readonly options: ResolvedOptions) {
    this.tracer = options.traces ? (options.tracerProvider ?? trace.getTracerProvider()).getTracer(INSTRUMENTATION_NAME, INSTRUMENTATION_VERSION) : undefined;
    if (options.metrics && options.meterProvider) this.instruments = new TwophaseInstruments(options.meterProvider.getMeter(INSTRUMENTATION_NAME, INSTRUMENTATION_VERSION));
  }

  onDelivery(info: DeliveryInfo): DeliveryObservation | undefined {
    if (!this.tracer && !this.options.metrics) return undefined;
    if (this.tracer) this.checkForeignConsumerSpan(info);
    return new ProcessObservation(info, this.tracer, this.meterInstruments(), this.options, (span) => this.ownSpans.add(span));
  }

  private meterInstruments(): TwophaseInstruments | undefined {
    if (!this.options.metrics) return undefined;
    this.instruments ??= new TwophaseInstruments(metrics.getMeterProvider().getMeter(INSTRUMENTATION_NAME, INSTRUMENTATION_VERSION));
    return this.instruments;
  }

  /**
   * A recording CONSUMER span that is active as the delivery enters the pipeline was started by
   * a broker-client instrumentation (instrumentation-amqplib, instrumentation-kafkajs
   * `eachMessage`): two process spans would be recorded. Warns once; the fix is the sampler
   * wrapper `dropInstrumentationProcessSpans` (docs/otel.md, "Auto-instrumentations").
   */
  private checkForeignConsumerSpan(info: DeliveryInfo): void {
    if (this.warnedForeignSpan) return;
    const active = trace.getSpan(otelContext.active());
    if (!active || this.ownSpans.has(active) || !active.isRecording()) return;
    if ((active as unknown as { kind?: unknown }).kind !== SpanKind.CONSUMER) return;
    this.warnedForeignSpan = true;
    diag.warn(
      `twophase/otel: a delivery from ${info.metadata.destination} arrived inside another instrumentation's recording CONSUMER span; ` +
        'two process spans will be recorded per message. Wrap the SDK sampler with dropInstrumentationProcessSpans() from twophase/otel (docs/otel.md).',
    );
  }
}

/** A settle span whose name waits for the delivery's action (known at `end`). */
interface PendingSettle {
  readonly span: Span;
  readonly endTime: HrTime;
}

/** The observation of one delivery. */
class ProcessObservation implements DeliveryObservation {
  private readonly span: Span | undefined;
  /** The producer's context (baggage included) with the process span set: handler and steps run in it. */
  private readonly spanContext: Context | undefined;
  private readonly common: Attributes;
  private readonly pendingSettles: PendingSettle[] = [];
  private claimState: string | undefined;
  private settleError: unknown;
  private ended = false;

  constructor(
    private readonly info: DeliveryInfo,
    private readonly tracer: Tracer | undefined,
    private readonly instruments: TwophaseInstruments | undefined,
    private readonly options: ResolvedOptions,
    own: (span: Span) => void,
  ) {
    this.common = destinationAttributes(info.metadata, info.consumer);
    if (!tracer) return;
    const extracted = extractContext(info.headers, { propagator: options.propagator });
    const producer = trace.getSpanContext(extracted);
    const useLink = options.useLinks && producer !== undefined && isSpanContextValid(producer);
    const links: Link[] | undefined = useLink ? [{ context: producer }] : undefined;
    // Link mode: the span context goes into a link, the baggage stays in the context.
    const parent = options.useLinks ? trace.deleteSpan(extracted) : extracted;
    this.span = tracer.startSpan(
      spanName(MESSAGING_OPERATION_TYPE_VALUE_PROCESS, info.metadata.destination),
      { kind: SpanKind.CONSUMER, attributes: processSpanAttributes(info), links },
      parent,
    );
    own(this.span);
    this.spanContext = trace.setSpan(extracted, this.span);
  }

  async step<T>(step: PipelineStep, fn: () => Promise<T>): Promise<T> {
    if (step === 'handle') return this.spanContext ? otelContext.with(this.spanContext, fn) : fn();
    const started = performance.now();
    const span = this.startStepSpan(step);
    try {
      const value = await (span && this.spanContext ? otelContext.with(trace.setSpan(this.spanContext, span), fn) : fn());
      this.afterStep(step, span, value, performance.now() - started);
      return value;
    } catch (error) {
      this.stepFailed(step, span, error, performance.now() - started);
      throw error;
    } finally {
      // A settle span is ended by `end`, at this time, once its name (the action) is known.
      if (span && step === 'settle') this.pendingSettles.push({ span, endTime: hrNow() });
      else span?.end();
    }
  }

  event(event: ConsumerEvent): void {
    if (this.instruments) {
      if (event.type === 'lease_extended') this.instruments.leaseExtensions.add(1, this.common);
      else if (event.type !== 'acquired' && isOutcome(event.type)) this.instruments.outcomes.add(1, { ...this.common, [ATTR_TWOPHASE_OUTCOME]: event.type });
    }
    if (this.span?.isRecording()) this.span.addEvent(`${EVENT_PREFIX}${event.type}`, eventAttributes(event));
  }

  end(result: DeliveryResult): void {
    if (this.ended) return;
    this.ended = true;
    const failure = deliveryFailure(result, this.settleError);
    this.instruments?.processDuration.record(result.durationMs / 1000, {
      ...this.common,
      [ATTR_MESSAGING_OPERATION_NAME]: MESSAGING_OPERATION_TYPE_VALUE_PROCESS,
      [ATTR_TWOPHASE_OUTCOME]: result.outcome,
      ...(failure ? { [ATTR_ERROR_TYPE]: failure.type } : {}),
    });
    for (const pending of this.pendingSettles.splice(0)) this.endSettle(pending, result);
    const span = this.span;
    if (!span) return;
    try {
      span.setAttributes(this.resultAttributes(result));
      if (failure) {
        span.setAttribute(ATTR_ERROR_TYPE, failure.type);
        span.setStatus({ code: SpanStatusCode.ERROR, message: failure.message });
      }
    } finally {
      span.end();
    }
  }

  private startStepSpan(step: Exclude<PipelineStep, 'handle'>): Span | undefined {
    if (!this.tracer || !this.spanContext) return undefined;
    const { destination } = this.info.metadata;
    const attributes: Attributes = { ...this.common, [ATTR_TWOPHASE_STEP]: step };
    if (step === 'settle') attributes[ATTR_MESSAGING_OPERATION_TYPE] = MESSAGING_OPERATION_TYPE_VALUE_SETTLE;
    return this.tracer.startSpan(
      spanName(step, destination),
      { kind: step === 'settle' ? SpanKind.CLIENT : SpanKind.INTERNAL, attributes },
      this.spanContext,
    );
  }

  private afterStep(step: PipelineStep, span: Span | undefined, value: unknown, elapsedMs: number): void {
    if (step === 'claim') {
      const claim = claimFacts(value);
      this.claimState = claim?.state ?? 'unknown';
      this.recordClaim(this.claimState, elapsedMs, undefined);
      if (span && claim) {
        span.setAttribute(ATTR_TWOPHASE_CLAIM_STATE, claim.state);
        if (claim.attempt !== undefined) span.setAttribute(ATTR_TWOPHASE_ATTEMPT, claim.attempt);
        if (claim.fencingToken !== undefined) span.setAttribute(ATTR_TWOPHASE_FENCING_TOKEN, claim.fencingToken);
      }
      return;
    }
    if (!span) return;
    if (step === 'commit') {
      const commit = commitFacts(value);
      if (!commit) return;
      span.setAttribute(ATTR_TWOPHASE_OUTCOME, commit.outcome);
      if (commit.outcome !== 'committed') markError(span, errorType(commit.error) ?? commit.outcome, `${commit.outcome}${suffix(commit.error)}`);
    } else if (step === 'release' && value === false) {
      markError(span, OTHER_ERROR_TYPE, 'release failed; the lease ends at its TTL');
    }
  }

  private stepFailed(step: PipelineStep, span: Span | undefined, error: unknown, elapsedMs: number): void {
    if (step === 'claim') {
      this.claimState = 'failed';
      this.recordClaim('failed', elapsedMs, errorType(error));
    }
    if (step === 'settle') this.settleError = error;
    if (span) markError(span, errorType(error) ?? OTHER_ERROR_TYPE, `${step} failed${suffix(error)}`);
  }

  private recordClaim(state: string, elapsedMs: number, errorClass: string | undefined): void {
    if (!this.instruments) return;
    const attributes: Attributes = { ...this.common, [ATTR_TWOPHASE_CLAIM_STATE]: state };
    if (errorClass) attributes[ATTR_ERROR_TYPE] = errorClass;
    this.instruments.claims.add(1, attributes);
    this.instruments.claimDuration.record(elapsedMs / 1000, attributes);
  }

  /** Names a settle span after the broker action (`ack orders`, `requeue orders`, `reject orders`) and ends it at the time the step ended. */
  private endSettle(pending: PendingSettle, result: DeliveryResult): void {
    const { span } = pending;
    try {
      span.updateName(spanName(result.action, this.info.metadata.destination));
      span.setAttribute(ATTR_MESSAGING_OPERATION_NAME, result.action);
      span.setAttribute(ATTR_TWOPHASE_SETTLE_ACTION, result.action);
      if (result.action === 'reject' && result.reason) span.setAttribute(ATTR_TWOPHASE_REASON, result.reason);
    } finally {
      span.end(pending.endTime);
    }
  }

  private resultAttributes(result: DeliveryResult): Attributes {
    const out: Attributes = {
      [ATTR_TWOPHASE_OUTCOME]: result.outcome,
      [ATTR_TWOPHASE_SETTLE_ACTION]: result.action,
      [ATTR_TWOPHASE_HANDLED]: result.handled,
    };
    const claimState = result.claimState ?? this.claimState;
    if (claimState) out[ATTR_TWOPHASE_CLAIM_STATE] = claimState;
    if (result.attempt !== undefined) out[ATTR_TWOPHASE_ATTEMPT] = result.attempt;
    if (result.fencingToken !== undefined) out[ATTR_TWOPHASE_FENCING_TOKEN] = result.fencingToken;
    if (result.reason !== undefined) out[ATTR_TWOPHASE_REASON] = result.reason;
    if (result.action === 'requeue' && result.delayMs !== undefined) out[ATTR_TWOPHASE_REQUEUE_DELAY_MS] = result.delayMs;
    if (this.options.recordKey && result.key !== undefined) out[ATTR_TWOPHASE_KEY] = result.key;
    return out;
  }
}

const OUTCOME_SET: ReadonlySet<string> = new Set(OUTCOMES);

function isOutcome(type: string): type is Outcome {
  return OUTCOME_SET.has(type);
}

function eventAttributes(event: ConsumerEvent): Attributes {
  const out: Attributes = {};
  if (event.attempt !== undefined) out[ATTR_TWOPHASE_ATTEMPT] = event.attempt;
  if (event.fencingToken !== undefined) out[ATTR_TWOPHASE_FENCING_TOKEN] = event.fencingToken;
  if (event.reason !== undefined) out[ATTR_TWOPHASE_REASON] = event.reason;
  const type = errorType(event.error);
  if (type !== undefined) out[ATTR_ERROR_TYPE] = type;
  return out;
}

function markError(span: Span, type: string, message: string): void {
  span.setAttribute(ATTR_ERROR_TYPE, type);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

function suffix(error: unknown): string {
  const text = truncateErrorMessage(error, 256);
  return text ? `: ${text}` : '';
}

/** The claim step resolves to a {@link ClaimResult}; read defensively (the step hook is generic). */
function claimFacts(value: unknown): { state: ClaimResult['state']; attempt?: number; fencingToken?: number } | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const claim = value as Partial<ClaimResult>;
  if (claim.state === 'acquired') return { state: 'acquired', attempt: claim.attempt, fencingToken: claim.receipt?.fencingToken };
  if (claim.state === 'done' || claim.state === 'busy') return { state: claim.state };
  return undefined;
}

/** The commit step resolves to `{ outcome: 'committed' | 'commit_failed' | 'lease_lost', error? }`. */
function commitFacts(value: unknown): { outcome: string; error?: unknown } | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const commit = value as { outcome?: unknown; error?: unknown };
  return typeof commit.outcome === 'string' ? { outcome: commit.outcome, error: commit.error } : undefined;
}

/** Now, on the same clock the SDK uses for span start times (time origin + monotonic offset). */
function hrNow(): HrTime {
  const ms = performance.timeOrigin + performance.now();
  const seconds = Math.floor(ms / 1000);
  const nanos = Math.min(999_999_999, Math.round((ms - seconds * 1000) * 1e6));
  return [seconds, nanos];
}

