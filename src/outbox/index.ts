/**
 * The transactional outbox's core: the message shape, the id scheme, the ports a store and a
 * broker implement, and `ctx.outbox`. Broker- and store-neutral. The relay is in ../relay/.
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
