/**
 * twophase core: the claim contract, receipts, the in-memory claimer and the consumer pipeline.
 * Knows no broker, store or telemetry SDK.
 */
export * from './errors';
export * from './claimer';
export * from './limits';
export { validateKey, namespaceKey, digestKey, validateClaimOptions, checkTtl } from './keys';
export { encodeResult, decodeResult } from './result-codec';
export { type Clock, monotonicClock } from './clock';
export { LeaseReceipt, NonAcquiredReceipt, type LeaseOperations, type LeaseIdentity, type LeaseOutcome } from './receipt';
export { InMemoryClaimer, type InMemoryClaimerOptions } from './in-memory-claimer';
