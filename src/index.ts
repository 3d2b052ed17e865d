/**
 * twophase core: the claim contract, receipts, the in-memory claimer and the consumer pipeline.
 * Knows no broker, store or telemetry SDK. The helpers for writing a claimer or a source of your
 * own are in `twophase/adapter-kit` (src/adapter-kit.ts).
 *
 * @module twophase
 */
export * from './errors';
export * from './claimer';
export * from './limits';
export { validateKey, namespaceKey, digestKey } from './keys';
export { type Clock, monotonicClock, type TimerClock, type TimerHandle, systemClock } from './clock';
export { InMemoryClaimer, type InMemoryClaimerOptions } from './in-memory-claimer';
export type { Delivery, DeliveryMetadata, Message, HandlerContext } from './delivery';
export type { Settler, AckInfo, RequeueInfo, RejectInfo, RejectReason, RequeueCause } from './settler';
export { type Disposition, ack, requeue, reject, isDisposition } from './disposition';
export { type Logger, consoleWarnLogger, consoleInfoLogger, silentLogger } from './logger';
export {
  OUTCOMES,
  type Outcome,
  type AuxiliaryEvent,
  type ConsumerEvent,
  type ConsumerObserver,
  type DeliveryObservation,
  type DeliveryInfo,
  type DeliveryResult,
  type PipelineStep,
  type SettleAction,
} from './observer';
export type { BackoffPolicy } from './retry';
export { IDEMPOTENCY_KEY_HEADER, BINARY_KEY_PREFIX, defaultMessageKey, messageKeyOf, keyFromHeaderValue, validatePublishedKey } from './message-key';
export type { MessageSource } from './source';
export { validateDeployment, type DeploymentDeclaration, REPLICAS_ENV } from './startup-validation';
export {
  type ConsumerOptions,
  CONSUMER_DEFAULTS,
  DEFAULT_RETRY_BACKOFF,
  DEFAULT_CLAIM_BACKOFF,
} from './consumer-options';
export { ConsumerBase, type ConsumerDescription, type ConsumerHealth, type ConsumerState } from './consumer-base';
export { TtlPolicy, type TtlPolicyOptions, type TypeTtl, type TypeTtls, type DeliveryView, type EffectiveTtl } from './ttl-policy';
export { runConsumers, EXIT_MARGIN_MS, type Runner, type RunnerHealth, type RunnerOptions, type RunnableConsumer, type ShutdownStep } from './runner';
export { runOnce, type RunOnceContext, type RunOnceResult } from './run-once';
export { type RunOnceOptions, type FailurePolicy, RUN_ONCE_DEFAULTS } from './run-once-options';
export { runOnceKey, RUN_ONCE_KEY_PREFIX, type RunOnceScope } from './run-once-key';
export * from './outbox';
