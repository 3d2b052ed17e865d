/**
 * `twophase/otel`: OpenTelemetry spans and metrics for twophase consumers, per the messaging
 * semantic conventions, and trace context through message headers. Depends on
 * `@opentelemetry/api` only; the SDK is the application's choice. See docs/otel.md.
 *
 * @module twophase/otel
 */
// First: a missing @opentelemetry/api is named before any module that needs it loads.
import './peer';
export { createOtelObserver, type OtelObserverFlag, type OtelObserverOptions, OTEL_OBSERVER_DEFAULTS } from './otel-observer';
export { createOutboxRelayTracer, type OutboxRelayTracerOptions } from './outbox-tracer';
export {
  injectTraceHeaders,
  extractContext,
  linksFromHeaders,
  headerGetter,
  headerSetter,
  type MessageHeaders,
  type PropagationOptions,
  type InjectOptions,
} from './headers';
export {
  dropInstrumentationProcessSpans,
  isInstrumentationProcessSpan,
  type DropProcessSpansOptions,
  type SamplerLike,
  type SamplingResultLike,
} from './sampler';
export { INSTRUMENTATION_NAME, INSTRUMENTATION_VERSION } from './version';
