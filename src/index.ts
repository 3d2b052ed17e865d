/**
 * twophase core: the claim contract, receipts, the in-memory claimer and the consumer pipeline.
 * Knows no broker, store or telemetry SDK. The helpers for writing a claimer or a source of your
 * own are in `twophase/adapter-kit` (src/adapter-kit.ts).
 *
 * @module twophase
 */
export * from './util/errors';
export {
  type JsonValue,
  type ClaimerKind,
  type ClaimOptions,
  type ClaimState,
  type ClaimResult,
  type AcquiredClaim,
  type DoneClaim,
  type BusyClaim,
  type Receipt,
  type ReleaseOptions,
  type Claimer,
} from './claim/claimer';
// For claimer and source authors: twophase/adapter-kit. Kept here, deprecated, through 0.2.x.
export {
  /** @deprecated Import `ClaimRequest` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type ClaimRequest,
  /** @deprecated Import `ClaimManyEntry` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type ClaimManyEntry,
  /** @deprecated Import `CommitRequest` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type CommitRequest,
  /** @deprecated Import `CommitManyEntry` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type CommitManyEntry,
  /** @deprecated Import `SharedTransaction` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type SharedTransaction,
  /** @deprecated Import `KeyPeek` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type KeyPeek,
} from './claim/claimer';
export * from './util/limits';
export { namespaceKey, digestKey } from './claim/keys';
export {
  /** @deprecated Import `validateKey` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  validateKey,
} from './claim/keys';
export { type Clock, type TimerClock, type TimerHandle, systemClock } from './util/clock';
export {
  /** @deprecated Import `monotonicClock` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  monotonicClock,
} from './util/clock';
export { InMemoryClaimer, type InMemoryClaimerOptions } from './claim/in-memory-claimer';
export type { Delivery, DeliveryMetadata, Message, HandlerContext } from './ports/delivery';
export type { Settler, AckInfo, RequeueInfo, RejectInfo, RejectReason, RequeueCause } from './ports/settler';
export { type Disposition, ack, requeue, reject, isDisposition } from './ports/disposition';
export { type Logger, consoleWarnLogger, consoleInfoLogger, silentLogger } from './util/logger';
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
} from './ports/observer';
export type { BackoffPolicy } from './util/retry';
export { IDEMPOTENCY_KEY_HEADER, BINARY_KEY_PREFIX, defaultMessageKey, messageKeyOf } from './ports/message-key';
export {
  /** @deprecated Import `keyFromHeaderValue` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  keyFromHeaderValue,
  /** @deprecated Import `validatePublishedKey` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  validatePublishedKey,
} from './ports/message-key';
export type { MessageSource } from './ports/source';
export { validateDeployment, type DeploymentDeclaration, REPLICAS_ENV } from './config/startup-validation';
export {
  type ConsumerOptions,
  CONSUMER_DEFAULTS,
  DEFAULT_RETRY_BACKOFF,
  DEFAULT_CLAIM_BACKOFF,
} from './config/consumer-options';
export { ConsumerBase, type ConsumerDescription, type ConsumerHealth, type ConsumerState } from './consumer/consumer-base';
export { TtlPolicy, type TtlPolicyOptions, type TypeTtl, type TypeTtls, type DeliveryView, type EffectiveTtl } from './config/ttl-policy';
export { runConsumers, EXIT_MARGIN_MS, type Runner, type RunnerHealth, type RunnerOptions, type RunnableConsumer, type ShutdownStep } from './consumer/runner';
export { runOnce, type RunOnceContext, type RunOnceResult } from './run-once/run-once';
export { type RunOnceOptions, type FailurePolicy, RUN_ONCE_DEFAULTS } from './run-once/run-once-options';
export { runOnceKey, RUN_ONCE_KEY_PREFIX, type RunOnceScope } from './run-once/run-once-key';
export * from './outbox';
export { OutboxRelay, type OutboxRelayDependencies, type OutboxRelayHealth, type OutboxRelayEvent, type OutboxRelayObserver, type RelayCycle } from './relay/outbox-relay';
export { type OutboxRelayOptions, type ResolvedOutboxRelayOptions, OUTBOX_RELAY_DEFAULTS } from './relay/relay-options';
// The outbox's store and broker ports: twophase/adapter-kit. Kept here, deprecated, through 0.2.x.
export {
  /** @deprecated Import `OutboxStore` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type OutboxStore,
  /** @deprecated Import `OutboxPublisher` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type OutboxPublisher,
  /** @deprecated Import `OutboxPublishTracer` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type OutboxPublishTracer,
  /** @deprecated Import `OutboxNotifier` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type OutboxNotifier,
  /** @deprecated Import `OutboxSubscription` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type OutboxSubscription,
  /** @deprecated Import `OutboxRecord` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type OutboxRecord,
  /** @deprecated Import `OutboxLease` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type OutboxLease,
  /** @deprecated Import `OutboxClaim` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type OutboxClaim,
  /** @deprecated Import `OutboxClaimRequest` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type OutboxClaimRequest,
  /** @deprecated Import `OutboxFailure` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type OutboxFailure,
  /** @deprecated Import `DeadKeyPolicy` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type DeadKeyPolicy,
  /** @deprecated Import `PublishFailureClass` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type PublishFailureClass,
  /** @deprecated Import `OutboxEnvelope` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  type OutboxEnvelope,
  /** @deprecated Import `toOutboxEnvelope` from `twophase/adapter-kit`; removed from `twophase` in 0.3.0. */
  toOutboxEnvelope,
} from './outbox';
