/**
 * Trace context and baggage through message headers: the getter and setter the propagators use,
 * extraction for a consumed message (parent) or a batch (links), and injection for publishers.
 *
 * Header values keep their broker's types. AMQP (amqplib) gives strings, numbers or Buffers;
 * kafkajs gives `Buffer | string | (Buffer | string)[]`. The getter decodes each as UTF-8 and
 * returns an array for a repeated header, which the W3C propagators read as the spec asks
 * (`traceparent`: the first value; `baggage`: the values joined with commas).
 */
import {
  type Context,
  diag,
  isSpanContextValid,
  type Link,
  propagation,
  ROOT_CONTEXT,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
  trace,
  context as otelContext,
} from '@opentelemetry/api';

/** Message headers as a broker client hands them over. */
export type MessageHeaders = Readonly<Record<string, unknown>>;

/** Where context is read from or written to: the given propagator, else the global one. */
export interface PropagationOptions {
  /**
   * Default: the global propagator (`propagation` of `@opentelemetry/api`), which the Node SDK
   * sets to W3C trace-context + baggage unless configured otherwise.
   */
  readonly propagator?: TextMapPropagator;
}

function decode(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf8');
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  return undefined;
}

function lookup(carrier: MessageHeaders, key: string): unknown {
  if (Object.prototype.hasOwnProperty.call(carrier, key)) return carrier[key];
  const lower = key.toLowerCase();
  for (const name of Object.keys(carrier)) if (name.toLowerCase() === lower) return carrier[name];
  return undefined;
}

/**
 * Reads header `key` as text: a string, a UTF-8 Buffer or Uint8Array, a number, or an array of
 * those (Kafka's repeated headers) as an array of strings. Exact name first, then any case.
 * Anything else (AMQP tables, null) reads as absent. Never throws.
 */
export const headerGetter: TextMapGetter<MessageHeaders> = {
  keys(carrier) {
    return carrier ? Object.keys(carrier) : [];
  },
  get(carrier, key) {
    if (!carrier) return undefined;
    const raw = lookup(carrier, key);
    if (raw === undefined || raw === null) return undefined;
    if (Array.isArray(raw)) {
      const values = raw.map(decode).filter((v): v is string => v !== undefined);
      return values.length > 0 ? values : undefined;
    }
    return decode(raw);
  },
};

/** Writes string header values, which both amqplib and kafkajs accept. */
export const headerSetter: TextMapSetter<Record<string, unknown>> = {
  set(carrier, key, value) {
    carrier[key] = value;
  },
};

function propagatorOf(options: PropagationOptions | undefined): TextMapPropagator {
  return options?.propagator ?? propagation;
}

/**
 * The context a message carries: its producer's span context (remote) and its baggage, on top of
 * the root context (never the active one: a consumer callback's active context belongs to
 * whatever ran before it). A missing or malformed `traceparent` gives a context without a span,
 * so the consumer starts a new trace. Never throws: a throwing propagator is reported through
 * `diag` and yields the root context.
 */
export function extractContext(headers: MessageHeaders | undefined, options?: PropagationOptions): Context {
  if (!headers) return ROOT_CONTEXT;
  try {
    return propagatorOf(options).extract(ROOT_CONTEXT, headers, headerGetter);
  } catch (error) {
    diag.warn('twophase/otel: extracting context from message headers failed; starting a new trace', error);
    return ROOT_CONTEXT;
  }
}

/** Options of {@link injectTraceHeaders}. */
export interface InjectOptions extends PropagationOptions {
  /** The context to inject. Default: the active context (`context.active()`). */
  readonly context?: Context;
}

/**
 * Returns a copy of `headers` with the trace context and baggage of the active context (or
 * `options.context`) added as string headers (`traceparent`, `tracestate`, `baggage` with the
 * W3C propagators). The input is not modified. When the context holds no span, no `traceparent`
 * is written and any the headers already carry is kept (a republished copy keeps its origin).
 * Call it once per message, inside the span that should be the consumer's parent. Header values
 * keep their type: string headers in, string headers out (an outbox message's `headers`).
 */
export function injectTraceHeaders<V = unknown>(headers?: Readonly<Record<string, V>>, options?: InjectOptions): Record<string, V | string> {
  const out: Record<string, V | string> = { ...(headers ?? {}) };
  try {
    propagatorOf(options).inject(options?.context ?? otelContext.active(), out, headerSetter);
  } catch (error) {
    diag.warn('twophase/otel: injecting context into message headers failed; publishing without it', error);
  }
  return out;
}

/**
 * One link per distinct valid producer span context found in `headersList`, in order, for a span
 * that covers a batch of messages (a Kafka `eachBatch`, a receive span). Messages without a
 * (valid) `traceparent` are skipped; repeated span contexts are linked once.
 */
export function linksFromHeaders(headersList: Iterable<MessageHeaders | undefined>, options?: PropagationOptions): Link[] {
  const links: Link[] = [];
  const seen = new Set<string>();
  for (const headers of headersList) {
    const spanContext = trace.getSpanContext(extractContext(headers, options));
    if (!spanContext || !isSpanContextValid(spanContext)) continue;
    const id = `${spanContext.traceId}-${spanContext.spanId}`;
    if (seen.has(id)) continue;
    seen.add(id);
    links.push({ context: spanContext });
  }
  return links;
}
