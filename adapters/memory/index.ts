/**
 * `twophase/memory`: the embedded in-process broker and the in-memory claimer, for the demo,
 * unit tests and single-replica use. Never proof that a real broker adapter works.
 *
 * @module twophase/memory
 */
export { MemoryBroker, UnknownDeliveryError, type MemoryMessageInput, type StoredMessage, type MemoryDelivery, type DeadLetter, type MemoryBrokerStats } from './memory-broker';
export { MemorySource, type MemorySourceOptions, type MemorySourceStats, type MemorySourceEvent, type MemorySettleAction } from './memory-source';
export { InMemoryClaimer, type InMemoryClaimerOptions } from '../../src';
export { CrashableClaimer } from './crashable-claimer';
