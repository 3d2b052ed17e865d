/**
 * An OpenTelemetry SDK set up in memory for the otel tests: a tracer provider exporting to an
 * InMemorySpanExporter, a meter provider read on demand, the async-hooks context manager and the
 * W3C trace-context + baggage propagators, registered as the globals (as an application would).
 */
import { context, metrics, propagation, type Span, type SpanContext, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { type DataPoint, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import {
  AlwaysOnSampler,
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  type Sampler,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import {
  type ConsumerEvent,
  type ConsumerObserver,
  type DeliveryResult,
} from '../../../src';

/** A reader the test collects from on demand. */
export class TestMetricReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

export interface OtelHarness {
  readonly exporter: InMemorySpanExporter;
  readonly tracerProvider: BasicTracerProvider;
  readonly meterProvider: MeterProvider;
  readonly reader: TestMetricReader;
  shutdown(): Promise<void>;
}

/** Registers a fresh SDK as the global providers. Call `shutdown()` in afterAll. */
export function installOtel(options: { sampler?: Sampler } = {}): OtelHarness {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    sampler: options.sampler ?? new AlwaysOnSampler(),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const reader = new TestMetricReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }));
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
  return {
    exporter,
    tracerProvider,
    meterProvider,
    reader,
    async shutdown() {
      await tracerProvider.shutdown();
      await meterProvider.shutdown();
      trace.disable();
      metrics.disable();
      propagation.disable();
      context.disable();
    },
  };
}

/** Finished spans named like `name`. */
export function spansNamed(exporter: InMemorySpanExporter, name: string): ReadableSpan[] {
  return exporter.getFinishedSpans().filter((s) => s.name === name);
}

/** The one finished span named `name`; fails when there is not exactly one. */
export function onlySpan(exporter: InMemorySpanExporter, name: string): ReadableSpan {
  const found = spansNamed(exporter, name);
  if (found.length !== 1) throw new Error(`expected one span "${name}", found ${found.length}: ${exporter.getFinishedSpans().map((s) => s.name).join(', ')}`);
  return found[0]!;
}

/** Finished spans whose parent is `parent`. */
export function childrenOf(exporter: InMemorySpanExporter, parent: ReadableSpan | Span | SpanContext): ReadableSpan[] {
  const id = 'spanId' in parent ? parent.spanId : parent.spanContext().spanId;
  return exporter.getFinishedSpans().filter((s) => s.parentSpanContext?.spanId === id);
}

/** Data points of metric `name` from one collection. */
export async function dataPoints(reader: MetricReader, name: string): Promise<DataPoint<unknown>[]> {
  const { resourceMetrics } = await reader.collect();
  const points: DataPoint<unknown>[] = [];
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) if (metric.descriptor.name === name) points.push(...(metric.dataPoints as DataPoint<unknown>[]));
  }
  return points;
}

/** Sum of counter `name` per value of attribute `by` (only points matching `where`). */
export async function counterBy(reader: MetricReader, name: string, by: string, where: Record<string, unknown> = {}): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const point of await dataPoints(reader, name)) {
    if (!Object.entries(where).every(([k, v]) => point.attributes[k] === v)) continue;
    const label = String(point.attributes[by]);
    out[label] = (out[label] ?? 0) + (point.value as number);
  }
  return out;
}

/** Count of histogram `name` per value of attribute `by` (only points matching `where`). */
export async function histogramCountBy(reader: MetricReader, name: string, by: string, where: Record<string, unknown> = {}): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const point of await dataPoints(reader, name)) {
    if (!Object.entries(where).every(([k, v]) => point.attributes[k] === v)) continue;
    const label = String(point.attributes[by]);
    out[label] = (out[label] ?? 0) + (point.value as { count: number }).count;
  }
  return out;
}

/**
 * An observer that records every event and delivery result, and lets a test wait for the n-th
 * result instead of sleeping.
 */
export class RecordingObserver implements ConsumerObserver {
  readonly events: ConsumerEvent[] = [];
  readonly results: DeliveryResult[] = [];
  private waiters: { n: number; resolve: () => void }[] = [];

  onEvent(event: ConsumerEvent): void {
    this.events.push(event);
  }

  onDelivery() {
    return {
      end: (result: DeliveryResult) => {
        this.results.push(result);
        this.waiters = this.waiters.filter((w) => {
          if (this.results.length < w.n) return true;
          w.resolve();
          return false;
        });
      },
    };
  }

  /** Resolves once `n` deliveries have ended. */
  waitForResults(n: number): Promise<void> {
    if (this.results.length >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }

  countBy<T extends string>(items: readonly T[]): Record<string, number> {
    const out: Record<string, number> = {};
    for (const item of items) out[item] = (out[item] ?? 0) + 1;
    return out;
  }
}
