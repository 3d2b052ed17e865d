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
export { checkKnownOptions, optionNames, closestName, describeType, withoutPasswords } from './util/known-options';
export { checkClaimer } from './util/wiring-checks';
export { checkInteger, checkBoolean, checkFraction } from './util/option-checks';
export { validateClaimOptions, checkTtl } from './claim/keys';
export { encodeResult, decodeResult } from './claim/result-codec';
export { commitEach } from './claim/commit-many';
export { LeaseReceipt, NonAcquiredReceipt, type LeaseOperations, type LeaseIdentity, type LeaseOutcome } from './claim/receipt';
export { backoffDelay, sleep, type SleepOptions, withDeadline, retryWithin, retry, retryAfter, type RetryOptions } from './util/retry';
export { LeaseKeeper, type KeptLease, type KeptLeaseCallbacks } from './claim/keep-alive';
export { type DeliverySink, type PreparedClaim, type SourceStartOptions, type Submission, settledSubmission } from './ports/source';
export { type IntendedRedelivery, isIntendedRedelivery } from './ports/settler';
export { type ResolvedConsumerOptions, resolveConsumerOptions } from './config/consumer-options';
export type { ConsumerTtls } from './config/ttl-policy';
export { truncateErrorMessage, errorType } from './claim/settlement';
export { attemptsAfterRequeue, requeueInPlace, type InPlaceStep, UNSETTLED_RETRY_MS } from './pipeline/settlement-table';
export { Semaphore } from './util/semaphore';
export { LogLimiter, LOG_BURST, LOG_WINDOW_MS } from './util/log-limiter';
export { type AdapterSurface, AdapterEvents } from './util/adapter-surface';
export { requirePeer, checkPeerVersion, installedVersion, satisfiesRange } from './util/peer-check';
// Moved from `twophase` (still re-exported there, deprecated, through 0.2.x).
export type { ClaimRequest, ClaimManyEntry, CommitRequest, CommitManyEntry, SharedTransaction, KeyPeek } from './claim/claimer';
export { validateKey } from './claim/keys';
export { monotonicClock } from './util/clock';
export { keyFromHeaderValue, validatePublishedKey } from './ports/message-key';
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
