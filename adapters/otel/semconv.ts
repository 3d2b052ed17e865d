/**
 * The OpenTelemetry semantic-convention names twophase emits, and only those.
 *
 * Copied rather than imported from `@opentelemetry/semantic-conventions`: the messaging names are
 * still in development there (they move between minor releases), and the runtime dependency of
 * `twophase/otel` stays `@opentelemetry/api` alone.
 *
 * Names follow the current semantic-conventions registry (1.45): `messaging.system.name`,
 * `kafka.offset`, `kafka.message.key`, `rabbitmq.destination.routing_key`,
 * `rabbitmq.message.delivery_tag`. No deprecated name is emitted (neither the pre-1.26 ones such as
 * `messaging.operation`, nor `messaging.system` or `messaging.kafka.*`, deprecated since).
 * See docs/otel.md, "Attribute names".
 */

// ---- messaging (https://opentelemetry.io/docs/specs/semconv/messaging/messaging-spans/)
export const ATTR_MESSAGING_SYSTEM = 'messaging.system.name';
export const ATTR_MESSAGING_OPERATION_NAME = 'messaging.operation.name';
export const ATTR_MESSAGING_OPERATION_TYPE = 'messaging.operation.type';
export const ATTR_MESSAGING_DESTINATION_NAME = 'messaging.destination.name';
export const ATTR_MESSAGING_DESTINATION_PARTITION_ID = 'messaging.destination.partition.id';
export const ATTR_MESSAGING_CONSUMER_GROUP_NAME = 'messaging.consumer.group.name';
export const ATTR_MESSAGING_MESSAGE_ID = 'messaging.message.id';
export const ATTR_MESSAGING_KAFKA_OFFSET = 'kafka.offset';
export const ATTR_MESSAGING_KAFKA_MESSAGE_KEY = 'kafka.message.key';
export const ATTR_MESSAGING_RABBITMQ_DESTINATION_ROUTING_KEY = 'rabbitmq.destination.routing_key';
export const ATTR_MESSAGING_RABBITMQ_MESSAGE_DELIVERY_TAG = 'rabbitmq.message.delivery_tag';
/** Pre-1.26 name of `messaging.operation.type`: read (never written) to recognise other instrumentations' spans. */
export const ATTR_MESSAGING_OPERATION_LEGACY = 'messaging.operation';

export const MESSAGING_OPERATION_TYPE_VALUE_PROCESS = 'process';
export const MESSAGING_OPERATION_TYPE_VALUE_SETTLE = 'settle';
export const MESSAGING_OPERATION_TYPE_VALUE_SEND = 'send';

// ---- error (https://opentelemetry.io/docs/specs/semconv/attributes-registry/error/)
export const ATTR_ERROR_TYPE = 'error.type';

// ---- metrics (https://opentelemetry.io/docs/specs/semconv/messaging/messaging-metrics/)
/** Histogram, seconds. */
export const METRIC_MESSAGING_PROCESS_DURATION = 'messaging.process.duration';
/** Bucket boundaries the messaging metric conventions advise for durations, seconds. */
export const MESSAGING_DURATION_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];

// ---- twophase's own namespace
export const ATTR_TWOPHASE_CONSUMER_NAME = 'twophase.consumer.name';
export const ATTR_TWOPHASE_KEY = 'twophase.key';
export const ATTR_TWOPHASE_CLAIM_STATE = 'twophase.claim.state';
export const ATTR_TWOPHASE_OUTCOME = 'twophase.outcome';
export const ATTR_TWOPHASE_ATTEMPT = 'twophase.attempt';
export const ATTR_TWOPHASE_FENCING_TOKEN = 'twophase.fencing_token';
export const ATTR_TWOPHASE_SETTLE_ACTION = 'twophase.settle.action';
export const ATTR_TWOPHASE_REASON = 'twophase.reason';
export const ATTR_TWOPHASE_REQUEUE_DELAY_MS = 'twophase.requeue.delay_ms';
export const ATTR_TWOPHASE_HANDLED = 'twophase.handled';
export const ATTR_TWOPHASE_REDELIVERED = 'twophase.redelivered';
export const ATTR_TWOPHASE_STEP = 'twophase.step';

/** Prefix of the span events twophase records on the process span, one per core event. */
export const EVENT_PREFIX = 'twophase.';

export const METRIC_TWOPHASE_CLAIMS = 'twophase.claims';
export const METRIC_TWOPHASE_CLAIM_DURATION = 'twophase.claim.duration';
export const METRIC_TWOPHASE_OUTCOMES = 'twophase.outcomes';
export const METRIC_TWOPHASE_LEASE_EXTENSIONS = 'twophase.lease.extensions';
