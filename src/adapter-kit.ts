/**
 * twophase/adapter-kit: the helpers for writing a claimer or a message source of your own, the
 * ones the bundled adapters (`twophase/redis`, `twophase/postgres`, `twophase/rabbitmq`,
 * `twophase/kafka`, `twophase/memory`, `twophase/otel`) are built on.
 *
 * An application needs none of this: it uses `twophase` and an adapter's entry point. The kit
 * follows the adapters' needs and carries a weaker promise than the application API: a minor
 * release may change it, listed in the CHANGELOG (docs/stability.md).
 *
 * @module twophase/adapter-kit
 */
export { checkKnownOptions, optionNames, closestName, describeType } from './known-options';
export { checkInteger, checkBoolean, checkFraction } from './option-checks';
export { validateClaimOptions, checkTtl } from './keys';
export { encodeResult, decodeResult } from './result-codec';
export { commitEach } from './commit-many';
export { LeaseReceipt, NonAcquiredReceipt, type LeaseOperations, type LeaseIdentity, type LeaseOutcome } from './receipt';
export { backoffDelay, sleep, withDeadline, retryWithin, retry, retryAfter, type RetryOptions } from './retry';
export { LeaseKeeper, type KeptLease, type KeptLeaseCallbacks } from './keep-alive';
export { type DeliverySink, type PreparedClaim, type SourceStartOptions, type Submission, settledSubmission } from './source';
export { type ResolvedConsumerOptions, resolveConsumerOptions } from './consumer-options';
export type { ConsumerTtls } from './ttl-policy';
export { truncateErrorMessage, errorType } from './settlement';
export { attemptsAfterRequeue, requeueInPlace, type InPlaceStep, UNSETTLED_RETRY_MS } from './settlement-table';
export { Semaphore } from './semaphore';
export { LogLimiter, LOG_BURST, LOG_WINDOW_MS } from './log-limiter';
export { type AdapterSurface, AdapterEvents } from './adapter-surface';
export { requirePeer, checkPeerVersion, installedVersion, satisfiesRange } from './peer-check';
// Moved from `twophase` (still re-exported there, deprecated, through 0.2.x).
export type { ClaimRequest, ClaimManyEntry, CommitRequest, CommitManyEntry, SharedTransaction, KeyPeek } from './claimer';
export { validateKey } from './keys';
export { monotonicClock } from './clock';
export { keyFromHeaderValue, validatePublishedKey } from './message-key';
export {
  type OutboxStore,
  type OutboxPublisher,
  type OutboxPublishTracer,
  type OutboxNotifier,
  type OutboxSubscription,
  type OutboxRecord,
  type OutboxLease,
  type OutboxClaim,
  type OutboxClaimRequest,
  type OutboxFailure,
  type DeadKeyPolicy,
  type PublishFailureClass,
  type OutboxEnvelope,
  toOutboxEnvelope,
} from './outbox';
