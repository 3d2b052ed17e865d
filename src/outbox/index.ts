/**
 * The transactional outbox's core: the message shape, the id scheme, the ports a store and a
 * broker implement, `ctx.outbox`, and the relay. Broker- and store-neutral.
 */
export {
  type OutboxMessage,
  type OutboxDestination,
  type RabbitMqOutboxDestination,
  type KafkaOutboxDestination,
  type OutboxProperties,
  type OutboxSystem,
  type OutboxEnvelope,
  toOutboxEnvelope,
} from './outbox-message';
export { outboxMessageId, randomOutboxMessageId, OUTBOX_ID_DOMAIN } from './outbox-id';
export type {
  OutboxStore,
  OutboxPublisher,
  OutboxPublishTracer,
  OutboxNotifier,
  OutboxSubscription,
  OutboxWriter,
  OutboxRecord,
  OutboxLease,
  OutboxClaim,
  OutboxClaimRequest,
  OutboxFailure,
  OutboxStats,
  DeadKeyPolicy,
  PublishFailureClass,
} from './ports';
export { type Outbox, ScopedOutbox } from './staging-outbox';
export { OutboxRelay, type OutboxRelayDependencies, type OutboxRelayHealth, type OutboxRelayEvent, type OutboxRelayObserver, type RelayCycle } from './outbox-relay';
export { type OutboxRelayOptions, type ResolvedOutboxRelayOptions, OUTBOX_RELAY_DEFAULTS } from './relay-options';
