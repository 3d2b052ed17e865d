/**
 * Keeps one process span per delivery when broker-client auto-instrumentations are installed
 * beside twophase: a sampler wrapper that drops (does not record) the process spans that
 * `@opentelemetry/instrumentation-amqplib` and `@opentelemetry/instrumentation-kafkajs` start for
 * each consumed message, so twophase's process span is the only one. Their publish, receive and
 * connection spans pass through to the wrapped sampler unchanged.
 *
 * Why twophase's span wins: it is the only one that covers the whole delivery (claim, handler,
 * commit and settle; instrumentation-amqplib ends its span at the ack), knows the outcome
 * (duplicate, busy, dead-lettered, fenced), carries the producer's baggage in both parent and link
 * modes, and uses the current attribute names. See docs/otel.md, "Auto-instrumentations".
 *
 * Typed structurally so the runtime dependency stays `@opentelemetry/api`: the result is a
 * `Sampler` of `@opentelemetry/sdk-trace-base`.
 */
import { type Attributes, type Context, type Link, SpanKind } from '@opentelemetry/api';
import { ConfigurationError } from '../../src';
import {
  ATTR_MESSAGING_DESTINATION_NAME,
  ATTR_MESSAGING_OPERATION_LEGACY,
  ATTR_MESSAGING_OPERATION_TYPE,
  ATTR_TWOPHASE_CONSUMER_NAME,
  MESSAGING_OPERATION_TYPE_VALUE_PROCESS,
} from './semconv';

/** The part of the SDK's `SamplingResult` this wrapper relies on. */
export interface SamplingResultLike {
  /** The SDK's `SamplingDecision`: 0 NOT_RECORD, 1 RECORD, 2 RECORD_AND_SAMPLED. */
  readonly decision: number;
}

/** The SDK's `Sampler` interface, structurally. */
export interface SamplerLike<TResult extends SamplingResultLike = SamplingResultLike> {
  shouldSample(context: Context, traceId: string, spanName: string, spanKind: SpanKind, attributes: Attributes, links: Link[]): TResult;
  toString(): string;
}

/** Options of {@link dropInstrumentationProcessSpans}. */
export interface DropProcessSpansOptions {
  /**
   * Drop only the process spans of these queues or topics (the ones twophase consumes), keeping
   * those of other consumers in the same process. Default: drop every instrumentation process span.
   */
  readonly destinations?: readonly string[];
}

/** `SamplingDecision.NOT_RECORD` of the SDK (the specification's "Drop"). */
const NOT_RECORD = 0;

/**
 * Wraps `delegate` (for example `new ParentBasedSampler({ root: new AlwaysOnSampler() })`) so the
 * per-message process spans of broker-client instrumentations are not recorded. Pass the result
 * as the SDK's `sampler`.
 *
 * @throws ConfigurationError when `delegate` is not a sampler or `destinations` is not an array of strings
 */
export function dropInstrumentationProcessSpans<TResult extends SamplingResultLike>(
  delegate: SamplerLike<TResult>,
  options?: DropProcessSpansOptions,
): SamplerLike<TResult> {
  if (!delegate || typeof delegate.shouldSample !== 'function') throw new ConfigurationError('dropInstrumentationProcessSpans needs a sampler to wrap (with shouldSample)');
  const list = options?.destinations;
  if (list !== undefined && (!Array.isArray(list) || list.some((d) => typeof d !== 'string'))) {
    throw new ConfigurationError(`destinations must be an array of strings, got ${JSON.stringify(list)}`);
  }
  const destinations = list ? new Set(list) : undefined;
  return {
    shouldSample(context, traceId, spanName, spanKind, attributes, links) {
      if (isInstrumentationProcessSpan(spanName, spanKind, attributes, destinations)) return { decision: NOT_RECORD } as TResult;
      return delegate.shouldSample(context, traceId, spanName, spanKind, attributes, links);
    },
    toString() {
      return `DropInstrumentationProcessSpans{${delegate.toString()}}`;
    },
  };
}

/**
 * True for a CONSUMER span that another instrumentation starts to process one message: its
 * creation attributes say `messaging.operation.type` (or, before semconv 1.26,
 * `messaging.operation`) `process`, and it is not twophase's own (which carries
 * `twophase.consumer.name` from its start). With `destinations`, only when the span's destination
 * (attribute or name: `<queue> process`, `process <topic>`) is one of them.
 */
export function isInstrumentationProcessSpan(spanName: string, spanKind: SpanKind, attributes: Attributes, destinations?: ReadonlySet<string>): boolean {
  if (spanKind !== SpanKind.CONSUMER) return false;
  if (attributes[ATTR_TWOPHASE_CONSUMER_NAME] !== undefined) return false;
  const operation = attributes[ATTR_MESSAGING_OPERATION_TYPE] ?? attributes[ATTR_MESSAGING_OPERATION_LEGACY];
  if (operation !== MESSAGING_OPERATION_TYPE_VALUE_PROCESS) return false;
  if (!destinations) return true;
  return destinationCandidates(spanName, attributes).some((d) => destinations.has(d));
}

function destinationCandidates(spanName: string, attributes: Attributes): string[] {
  const out: string[] = [];
  const named = attributes[ATTR_MESSAGING_DESTINATION_NAME];
  if (typeof named === 'string') out.push(named);
  const suffix = ` ${MESSAGING_OPERATION_TYPE_VALUE_PROCESS}`;
  const prefix = `${MESSAGING_OPERATION_TYPE_VALUE_PROCESS} `;
  if (spanName.endsWith(suffix)) out.push(spanName.slice(0, -suffix.length)); // instrumentation-amqplib: `<queue> process`
  if (spanName.startsWith(prefix)) out.push(spanName.slice(prefix.length)); // instrumentation-kafkajs: `process <topic>`
  return out;
}
