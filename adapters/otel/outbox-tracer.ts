/**
 * Tracing of the outbox relay: one PRODUCER `publish <destination>` span per relayed message,
 * linked to the trace context staged in the message's headers, whose own context is sent in the
 * published headers so that the downstream consumer's process span continues it.
 */
import {
  type Attributes,
  context as otelContext,
  diag,
  isSpanContextValid,
  type Link,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapPropagator,
  trace,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';
import { ConfigurationError, type KafkaOutboxDestination, type RabbitMqOutboxDestination } from '../../src';
import { checkKnownOptions, errorType, optionNames, truncateErrorMessage, type OutboxPublishTracer, type OutboxRecord } from '../../src/adapter-kit';
import { OTHER_ERROR_TYPE, spanName } from './attributes';
import { extractContext, injectTraceHeaders } from './headers';
import {
  ATTR_ERROR_TYPE,
  ATTR_MESSAGING_DESTINATION_NAME,
  ATTR_MESSAGING_DESTINATION_PARTITION_ID,
  ATTR_MESSAGING_KAFKA_MESSAGE_KEY,
  ATTR_MESSAGING_MESSAGE_ID,
  ATTR_MESSAGING_OPERATION_NAME,
  ATTR_MESSAGING_OPERATION_TYPE,
  ATTR_MESSAGING_RABBITMQ_DESTINATION_ROUTING_KEY,
  ATTR_MESSAGING_SYSTEM,
  ATTR_TWOPHASE_ATTEMPT,
  MESSAGING_OPERATION_TYPE_VALUE_SEND,
} from './semconv';
import { INSTRUMENTATION_NAME, INSTRUMENTATION_VERSION } from './version';

/** `messaging.operation.name` of the publish span: a system-specific name in the conventions, not a registry value. */
const OPERATION_NAME_PUBLISH = 'publish';

/** Options of {@link createOutboxRelayTracer}. */
export interface OutboxRelayTracerOptions {
  /** Where spans go. Default: the global tracer provider (`trace.getTracerProvider()`). */
  readonly tracerProvider?: TracerProvider;
  /** Reads the staged trace context and writes the publish span's. Default: the global propagator. */
  readonly propagator?: TextMapPropagator;
}

const OPTION_NAMES = optionNames<OutboxRelayTracerOptions>()(['tracerProvider', 'propagator']);

/** Trace-context headers replaced together, so a staged `tracestate` never rides with another trace's `traceparent`. */
const TRACE_CONTEXT_HEADERS = new Set(['traceparent', 'tracestate']);

/**
 * Creates the tracer to pass as `OutboxRelay`'s `tracer`. For each message the relay publishes it
 * starts a PRODUCER span named `publish <destination>` (the exchange or the topic), with a link
 * to the span context found in the staged headers (stage the message with
 * `headers: injectTraceHeaders()` inside the transaction's span to record it). Once the span
 * exists, the published headers carry its `traceparent` (and `tracestate`) in place of the staged
 * ones; other headers, baggage included, go as staged. The span ends at the broker's confirm, with
 * status ERROR and `error.type` when the publish failed. The publish runs in the span's context.
 * Without an OpenTelemetry SDK (no valid
 * span context) the headers go exactly as staged.
 *
 * @throws ConfigurationError for an unknown option or a tracerProvider / propagator of the wrong shape
 */
export function createOutboxRelayTracer(options: OutboxRelayTracerOptions = {}): OutboxPublishTracer {
  if (!options || typeof options !== 'object') throw new ConfigurationError('outbox relay tracer options must be an object');
  checkKnownOptions('outbox relay tracer options', options, OPTION_NAMES);
  if (options.tracerProvider !== undefined && typeof options.tracerProvider?.getTracer !== 'function') {
    throw new ConfigurationError('tracerProvider must be an OpenTelemetry TracerProvider (with getTracer)');
  }
  if (options.propagator !== undefined && (typeof options.propagator?.extract !== 'function' || typeof options.propagator.inject !== 'function')) {
    throw new ConfigurationError('propagator must be an OpenTelemetry TextMapPropagator (with extract and inject)');
  }
  const tracer = (options.tracerProvider ?? trace.getTracerProvider()).getTracer(INSTRUMENTATION_NAME, INSTRUMENTATION_VERSION);
  return new OutboxRelayTracer(tracer, options.propagator);
}

class OutboxRelayTracer implements OutboxPublishTracer {
  constructor(
    private readonly tracer: Tracer,
    private readonly propagator: TextMapPropagator | undefined,
  ) {}

  async tracePublish(record: OutboxRecord, publish: (record: OutboxRecord) => Promise<void>): Promise<void> {
    let span: Span;
    let traced: OutboxRecord;
    try {
      span = this.startSpan(record);
      traced = this.withSpanContext(record, span);
    } catch (error) {
      diag.warn('twophase/otel: tracing an outbox publish failed; publishing without a span', error);
      return publish(record);
    }
    try {
      // Run inside the span's context: spans the broker client opens (an auto-instrumentation) are its children.
      await otelContext.with(trace.setSpan(otelContext.active(), span), () => publish(traced));
    } catch (error) {
      span.setAttribute(ATTR_ERROR_TYPE, errorType(error) ?? OTHER_ERROR_TYPE);
      span.setStatus({ code: SpanStatusCode.ERROR, message: truncateErrorMessage(error) });
      if (error instanceof Error) span.recordException(error);
      throw error;
    } finally {
      span.end();
    }
  }

  private startSpan(record: OutboxRecord): Span {
    const { name, attributes } = publishSpanFacts(record);
    const staged = trace.getSpanContext(extractContext(record.headers, { propagator: this.propagator }));
    const links: Link[] = staged && isSpanContextValid(staged) ? [{ context: staged }] : [];
    return this.tracer.startSpan(name, { kind: SpanKind.PRODUCER, attributes, links }, otelContext.active());
  }

  /** `record` with the span's trace context in place of the staged one; `record` itself when the span has no valid context. */
  private withSpanContext(record: OutboxRecord, span: Span): OutboxRecord {
    if (!isSpanContextValid(span.spanContext())) return record;
    const kept = Object.fromEntries(Object.entries(record.headers).filter(([name]) => !TRACE_CONTEXT_HEADERS.has(name.toLowerCase())));
    const headers = injectTraceHeaders(kept, { context: trace.setSpan(otelContext.active(), span), propagator: this.propagator });
    return { ...record, headers };
  }
}

/** The span name and start attributes of a publish. */
function publishSpanFacts(record: OutboxRecord): { name: string; attributes: Attributes } {
  const attributes: Attributes = {
    [ATTR_MESSAGING_SYSTEM]: record.system,
    [ATTR_MESSAGING_OPERATION_NAME]: OPERATION_NAME_PUBLISH,
    [ATTR_MESSAGING_OPERATION_TYPE]: MESSAGING_OPERATION_TYPE_VALUE_SEND,
    [ATTR_MESSAGING_MESSAGE_ID]: record.id,
    [ATTR_TWOPHASE_ATTEMPT]: record.attempts + 1,
  };
  let destination: string;
  if (record.system === 'kafka') {
    const to = record.destination as KafkaOutboxDestination;
    destination = to.topic;
    if (to.partition !== undefined) attributes[ATTR_MESSAGING_DESTINATION_PARTITION_ID] = String(to.partition);
    if (typeof to.key === 'string') attributes[ATTR_MESSAGING_KAFKA_MESSAGE_KEY] = to.key;
  } else {
    const to = record.destination as RabbitMqOutboxDestination;
    destination = to.exchange;
    attributes[ATTR_MESSAGING_RABBITMQ_DESTINATION_ROUTING_KEY] = to.routingKey;
  }
  attributes[ATTR_MESSAGING_DESTINATION_NAME] = destination;
  return { name: spanName(OPERATION_NAME_PUBLISH, destination), attributes };
}
