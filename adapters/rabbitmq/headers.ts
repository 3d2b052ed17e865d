/**
 * The message headers the adapter reads and writes, and pure functions that turn a delivered
 * message into the properties of its republished copy (delay path, dead-letter path, replay).
 * Nothing here mutates its input.
 */
import type { MessageProperties, Options } from 'amqplib';
import { IDEMPOTENCY_KEY_HEADER, InvalidMessageError, messageKeyOf, type RejectInfo } from '../../src';

/**
 * Header names. Application headers carry no `x-` prefix: RabbitMQ reserves `x-` for headers it
 * sets itself (`x-death`, `x-delivery-count`, …).
 */
export const HEADERS = {
  /** Failed handler attempts so far (integer). Raised only by requeues with cause `retry`. */
  attempts: 'twophase-attempts',
  /** Exchange the message was first published to, kept across delay hops; set on dead-letter. */
  originalExchange: 'twophase-original-exchange',
  /** Routing key the message was first published with, kept across delay hops. */
  originalRoutingKey: 'twophase-original-routing-key',
  /** The work queue the message was consumed from when it was dead-lettered. */
  originalQueue: 'twophase-original-queue',
  /** Why the last requeue happened (`busy`, `retry`, `claimer_unavailable`, `shutdown`, `lease_lost`). */
  requeueCause: 'twophase-requeue-cause',
  /** Dead-letter reason code (`retry_exhausted`, `permanent_error`, `missing_key`, …). */
  reason: 'twophase-reason',
  /** The error's message, at most 1024 characters, when an error caused the dead-letter. */
  errorMessage: 'twophase-error-message',
  /** The error's class name, when an error caused the dead-letter. */
  errorType: 'twophase-error-type',
  /** When the message was dead-lettered, Unix ms. */
  rejectedAt: 'twophase-rejected-at',
  /**
   * Per-publish correlation id that earlier versions added to every publish to match a
   * `basic.return`; no longer sent, and removed from copies and deliveries where it is found.
   */
  publishId: 'twophase-publish-id',
  /**
   * Per-republish id that earlier versions of the DLQ replay tool added to every replayed copy;
   * no longer sent, and removed from replayed copies where it is found.
   */
  replayId: 'twophase-replay-id',
  /** How many times the DLQ replay tool republished this message. */
  replayCount: 'twophase-replay-count',
  /** When the DLQ replay tool last republished this message, Unix ms. */
  replayedAt: 'twophase-replayed-at',
} as const;

/**
 * Set by quorum queues on redelivered messages: how many times the message was returned to the
 * queue (RabbitMQ docs, "Quorum Queues", section "Poison Message Handling").
 */
export const DELIVERY_COUNT_HEADER = 'x-delivery-count';

/** Headers RabbitMQ writes when it dead-letters a message ("Dead Letter Exchanges" docs). */
export const BROKER_DEATH_HEADERS = ['x-death', 'x-first-death-exchange', 'x-first-death-queue', 'x-first-death-reason', 'x-last-death-exchange', 'x-last-death-queue', 'x-last-death-reason'] as const;

/** Headers that describe a dead-letter and are dropped when a message is replayed. */
const DEAD_LETTER_HEADERS = [HEADERS.reason, HEADERS.errorMessage, HEADERS.errorType, HEADERS.rejectedAt, HEADERS.originalQueue] as const;

type Headers = Record<string, unknown>;

/** Reads a non-negative integer header that may arrive as a number, a string or a Buffer. */
export function readCount(headers: Readonly<Record<string, unknown>> | undefined, name: string): number | undefined {
  const raw = headers?.[name];
  if (raw === undefined || raw === null) return undefined;
  const value = typeof raw === 'number' ? raw : Number(Buffer.isBuffer(raw) ? raw.toString('utf8') : String(raw));
  return Number.isInteger(value) && value >= 0 ? value : undefined;
}

/** Reads a string header that may arrive as a string or a Buffer. */
export function readString(headers: Readonly<Record<string, unknown>> | undefined, name: string): string | undefined {
  const raw = headers?.[name];
  if (typeof raw === 'string') return raw;
  if (Buffer.isBuffer(raw)) return raw.toString('utf8');
  return undefined;
}

/** Where the attempt counters of a delivery are trusted: the work queue and its type. */
export interface AttemptContext {
  /** The work queue the delivery came from. */
  readonly queue: string;
  /** Its type: the broker sets `x-delivery-count` itself only on quorum queues. */
  readonly queueType: 'classic' | 'quorum';
}

/** The delivery fields the trust checks read. */
export interface DeliveryRoute {
  readonly exchange: string;
  readonly routingKey: string;
}

/**
 * Largest `twophase-attempts` value taken from a header: the largest `maxAttempts` a consumer
 * accepts. A larger count cannot have been written by twophase and is treated as absent.
 */
export const MAX_RECORDED_ATTEMPTS = 1000;

/** The newest entry of the broker's dead-letter history (the broker puts it first, "Dead Letter Exchanges" docs). */
function newestDeath(headers: Readonly<Record<string, unknown>> | undefined): Record<string, unknown> | undefined {
  const deaths = headers?.['x-death'];
  if (!Array.isArray(deaths) || deaths.length === 0) return undefined;
  const entry: unknown = deaths[0];
  return entry !== null && typeof entry === 'object' ? (entry as Record<string, unknown>) : undefined;
}

/** True when `name` is one of `queue`'s delay queues (`<queue>.delay.<ms>ms`). */
function isDelayQueueOf(name: string, queue: string): boolean {
  const prefix = `${queue}.delay.`;
  return name.startsWith(prefix) && /^\d+ms$/.test(name.slice(prefix.length));
}

/**
 * True when the delivery came back through one of `queue`'s delay queues (`<queue>.delay.<ms>ms`),
 * the only way twophase's copies carrying `twophase-attempts` reach the work queue. Both must hold:
 * - the delivery arrived through the default exchange with `queue` as routing key, which is how a
 *   delay queue dead-letters its expired messages (its `x-dead-letter-exchange` is `""`). A
 *   producer allowed to publish to the work exchange only cannot produce such a delivery: writing
 *   to the default exchange needs write permission on `amq.default` (RabbitMQ "Access Control" docs);
 * - the newest `x-death` entry (the broker puts the newest first, "Dead Letter Exchanges" docs)
 *   names one of those delay queues with reason `expired`.
 * The `x-death` history alone proves nothing: RabbitMQ 3.x delivers a client-written `x-death` as sent.
 * Without `fields` (a caller that has only the headers) the answer is false.
 */
export function cameBackThroughDelayTier(headers: Readonly<Record<string, unknown>> | undefined, queue: string, fields?: DeliveryRoute): boolean {
  if (fields === undefined || fields.exchange !== '' || fields.routingKey !== queue) return false;
  const death = newestDeath(headers);
  if (!death) return false;
  const name = readString(death, 'queue');
  return readString(death, 'reason') === 'expired' && name !== undefined && isDelayQueueOf(name, queue);
}

/**
 * Attempts already made on a message: the `twophase-attempts` header (retries counted by this
 * adapter) plus, on a quorum queue, the broker's `x-delivery-count` (returns to the queue since
 * the last republish: crashes, lost connections, consumer timeouts). Undefined when neither is
 * present or trusted. Used for attempt accounting only, never for deduplication.
 *
 * Bookkeeping headers are not taken from producers: `twophase-attempts` counts only when the
 * message came back through one of the queue's delay queues ({@link cameBackThroughDelayTier})
 * and is at most {@link MAX_RECORDED_ATTEMPTS}, and `x-delivery-count` only on a quorum queue,
 * where the broker overwrites any value a producer set (on a classic queue a producer's value is
 * delivered as is). A fresh message that carries these headers starts at attempt 1.
 */
export function priorAttempts(headers: Readonly<Record<string, unknown>> | undefined, context: AttemptContext, fields?: DeliveryRoute): number | undefined {
  const recorded = cameBackThroughDelayTier(headers, context.queue, fields) ? readCount(headers, HEADERS.attempts) : undefined;
  const counted = recorded !== undefined && recorded <= MAX_RECORDED_ATTEMPTS ? recorded : undefined;
  const returned = context.queueType === 'quorum' ? readCount(headers, DELIVERY_COUNT_HEADER) : undefined;
  if (counted === undefined && returned === undefined) return undefined;
  return (counted ?? 0) + (returned ?? 0);
}

/**
 * Where a message was first published: the adapter's headers, else the delivery's own fields.
 * With `queue`, the headers count only when the message came back through one of that queue's
 * delay queues ({@link cameBackThroughDelayTier}): a route a producer wrote on a fresh message is
 * not recorded on its copies.
 */
export function originalRoute(headers: Readonly<Record<string, unknown>> | undefined, fields: DeliveryRoute, queue?: string): { exchange: string; routingKey: string } {
  if (queue !== undefined && !cameBackThroughDelayTier(headers, queue, fields)) return { exchange: fields.exchange, routingKey: fields.routingKey };
  return {
    exchange: readString(headers, HEADERS.originalExchange) ?? fields.exchange,
    routingKey: readString(headers, HEADERS.originalRoutingKey) ?? fields.routingKey,
  };
}

/** The delivered message as the republish functions need it. */
export interface DeliveredMessage {
  readonly fields: { readonly exchange: string; readonly routingKey: string };
  readonly properties: Partial<MessageProperties>;
}

/**
 * Copies the properties worth keeping into a new publish options object with `headers`.
 * Persistence follows the original (`deliveryMode` 2) unless `persistent` forces it.
 * Dropped: `expiration` (a per-message TTL would cut the delay short or expire the copy) and
 * `userId` (the broker checks it against the publishing user).
 */
export function copyProperties(properties: Partial<MessageProperties>, headers: Headers, persistent?: boolean): Options.Publish {
  const out: Options.Publish = { headers, persistent: persistent ?? properties.deliveryMode === 2 };
  if (properties.contentType !== undefined) out.contentType = properties.contentType;
  if (properties.contentEncoding !== undefined) out.contentEncoding = properties.contentEncoding;
  if (properties.priority !== undefined) out.priority = properties.priority;
  if (properties.correlationId !== undefined) out.correlationId = properties.correlationId;
  if (properties.replyTo !== undefined) out.replyTo = properties.replyTo;
  if (properties.messageId !== undefined) out.messageId = properties.messageId;
  if (properties.timestamp !== undefined) out.timestamp = properties.timestamp;
  if (properties.type !== undefined) out.type = properties.type;
  if (properties.appId !== undefined) out.appId = properties.appId;
  return out;
}

/**
 * Largest size, in bytes (estimated as encoded), of the headers twophase republishes. amqplib
 * encodes a publish's header table into a 64 KiB buffer and refuses one past it.
 * A message whose headers would not fit keeps its twophase headers and `idempotency-key`, and
 * loses its largest other headers (named in `twophase-headers-dropped`).
 */
export const HEADER_BUDGET_BYTES = 48 * 1024;

/** Estimated AMQP field-table size of one header value, bytes. */
function valueSize(value: unknown): number {
  if (value === null || value === undefined) return 1;
  if (typeof value === 'string') return 5 + Buffer.byteLength(value);
  if (Buffer.isBuffer(value)) return 5 + value.length;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return 9;
  if (value instanceof Date) return 9;
  if (Array.isArray(value)) return 5 + value.reduce((n: number, v) => n + valueSize(v), 0);
  if (typeof value === 'object') return 5 + Object.entries(value as object).reduce((n, [k, v]) => n + 1 + Buffer.byteLength(k) + valueSize(v), 0);
  return 5 + Buffer.byteLength(String(value));
}

/** Estimated encoded size of a header table, bytes. */
export function headersSize(headers: Readonly<Record<string, unknown>>): number {
  let n = 4;
  for (const [k, v] of Object.entries(headers)) n += 1 + Buffer.byteLength(k) + valueSize(v);
  return n;
}

function baseHeaders(message: DeliveredMessage): Headers {
  const headers: Headers = { ...(message.properties.headers ?? {}) };
  delete headers[HEADERS.publishId];
  delete headers[DELIVERY_COUNT_HEADER];
  if (headersSize(headers) > HEADER_BUDGET_BYTES - 4096) {
    // Leave room for the headers twophase adds; drop the largest foreign headers first.
    const droppable = Object.keys(headers)
      .filter((k) => !k.startsWith('twophase-') && k !== 'idempotency-key')
      .sort((a, b) => valueSize(headers[b]) - valueSize(headers[a]));
    const dropped: string[] = [];
    for (const name of droppable) {
      if (headersSize(headers) <= HEADER_BUDGET_BYTES - 4096 - 1024) break;
      delete headers[name];
      dropped.push(name);
    }
    headers['twophase-headers-dropped'] = dropped.join(',').slice(0, 1000);
  }
  return headers;
}

/**
 * Properties of the copy published to the delay path (or straight back to the work queue) by a
 * requeue: the original route is recorded once, `twophase-attempts` is set to `attempts`, the
 * quorum `x-delivery-count` is folded into it (the copy is a new message, so the broker's count
 * restarts).
 */
export function requeueProperties(message: DeliveredMessage, attempts: number, cause: string, queue: string): Options.Publish {
  const headers = baseHeaders(message);
  const route = originalRoute(message.properties.headers, message.fields, queue);
  headers[HEADERS.originalExchange] = route.exchange;
  headers[HEADERS.originalRoutingKey] = route.routingKey;
  headers[HEADERS.attempts] = attempts;
  headers[HEADERS.requeueCause] = cause;
  return copyProperties(message.properties, headers);
}

/**
 * Properties of the copy published to the dead-letter exchange by a reject: reason, attempts,
 * original exchange and routing key, the work queue, the truncated error message and type, and
 * the time. Always persistent.
 */
export function deadLetterProperties(message: DeliveredMessage, info: RejectInfo, queue: string, now: number): Options.Publish {
  return withDeadLetterHeaders(message, baseHeaders(message), originalRoute(message.properties.headers, message.fields, queue), info, queue, now);
}

/** Longest `idempotency-key` a stripped dead-letter copy keeps, bytes. */
const STRIPPED_KEY_MAX_BYTES = 1024;

/**
 * Properties of a dead-letter copy for a message whose headers cannot be republished (too large
 * for amqplib, or not encodable): only the dead-letter headers, the `idempotency-key` when it is
 * a string of at most 1024 bytes, and `twophase-headers-dropped` naming every header left out.
 */
export function strippedDeadLetterProperties(message: DeliveredMessage, info: RejectInfo, queue: string, now: number): Options.Publish {
  const original = message.properties.headers ?? {};
  const headers: Headers = {};
  const key = original[IDEMPOTENCY_KEY_HEADER];
  if (typeof key === 'string' && Buffer.byteLength(key) <= STRIPPED_KEY_MAX_BYTES) headers[IDEMPOTENCY_KEY_HEADER] = key;
  const dropped = Object.keys(original).filter((name) => !(name in headers) && name !== HEADERS.publishId && name !== DELIVERY_COUNT_HEADER);
  headers['twophase-headers-dropped'] = dropped.join(',').slice(0, 1000);
  // An original route recorded in the headers is trusted only as long as AMQP allows (255 bytes).
  const recorded = originalRoute(original, message.fields, queue);
  const route = Buffer.byteLength(recorded.exchange) <= 255 && Buffer.byteLength(recorded.routingKey) <= 255 ? recorded : { exchange: message.fields.exchange, routingKey: message.fields.routingKey };
  return withDeadLetterHeaders(message, headers, route, info, queue, now);
}

function withDeadLetterHeaders(
  message: DeliveredMessage,
  headers: Headers,
  route: { exchange: string; routingKey: string },
  info: RejectInfo,
  queue: string,
  now: number,
): Options.Publish {
  headers[HEADERS.reason] = info.reason;
  headers[HEADERS.attempts] = info.attempts;
  headers[HEADERS.originalExchange] = route.exchange;
  headers[HEADERS.originalRoutingKey] = route.routingKey;
  headers[HEADERS.originalQueue] = queue;
  headers[HEADERS.rejectedAt] = now;
  if (info.errorMessage !== undefined) headers[HEADERS.errorMessage] = info.errorMessage;
  else delete headers[HEADERS.errorMessage];
  if (info.errorType !== undefined) headers[HEADERS.errorType] = info.errorType;
  else delete headers[HEADERS.errorType];
  return copyProperties(message.properties, headers, true);
}

/**
 * The route a dead-lettered message records, and who recorded it.
 * - `broker`: the broker dead-lettered the message itself (a per-message or queue TTL, a length
 *   limit, a quorum queue's delivery limit, a `nack` without requeue). The route and queue come
 *   from the newest `x-death` entry, which the broker wrote when it dead-lettered the message;
 *   `twophase-original-*` headers on such a message were written by whoever published it and are
 *   ignored (reported in `ignored`).
 * - `twophase`: twophase published the dead-letter copy; the route is its
 *   `twophase-original-exchange` / `-routing-key` headers and the queue its `twophase-original-queue`.
 */
export interface RecordedRoute {
  readonly recordedBy: 'broker' | 'twophase';
  readonly exchange: string;
  readonly routingKey: string;
  /** The queue the message was dead-lettered from, when recorded. */
  readonly queue?: string;
  /** `twophase-original-*` route headers found on a message the broker dead-lettered, ignored. */
  readonly ignored?: { readonly exchange?: string; readonly routingKey?: string; readonly queue?: string };
}

/**
 * The route a dead-lettered message records ({@link RecordedRoute}); undefined when it records
 * none. A message counts as dead-lettered by the broker when its newest `x-death` entry names a
 * queue that is not a delay queue (`*.delay.<ms>ms`): a twophase dead-letter copy keeps the
 * `x-death` of the delivery it copied, whose newest entry, if any, is a delay queue's `expired`.
 *
 * Everything here was written by a publisher or by the broker on a publisher's behalf: it tells
 * an operator where the message came from, and is no proof of where it may be sent.
 */
export function recordedRoute(message: DeliveredMessage): RecordedRoute | undefined {
  const headers = message.properties.headers;
  const headerRoute = {
    exchange: readString(headers, HEADERS.originalExchange),
    routingKey: readString(headers, HEADERS.originalRoutingKey),
    queue: readString(headers, HEADERS.originalQueue),
  };
  const death = newestDeath(headers);
  const deathQueue = death ? readString(death, 'queue') : undefined;
  if (death && deathQueue !== undefined && readString(death, 'reason') !== undefined && !/\.delay\.\d+ms$/.test(deathQueue)) {
    const keys = death['routing-keys'];
    const rk: unknown = Array.isArray(keys) && keys.length > 0 ? keys[0] : undefined;
    const exchange = readString(death, 'exchange');
    const routingKey = typeof rk === 'string' ? rk : Buffer.isBuffer(rk) ? rk.toString('utf8') : undefined;
    const forged = headerRoute.exchange !== undefined || headerRoute.routingKey !== undefined || headerRoute.queue !== undefined;
    return {
      recordedBy: 'broker',
      exchange: exchange ?? '',
      routingKey: routingKey ?? deathQueue,
      queue: deathQueue,
      ...(forged ? { ignored: headerRoute } : {}),
    };
  }
  if (headerRoute.exchange !== undefined && headerRoute.routingKey !== undefined) {
    return { recordedBy: 'twophase', exchange: headerRoute.exchange, routingKey: headerRoute.routingKey, ...(headerRoute.queue !== undefined ? { queue: headerRoute.queue } : {}) };
  }
  return undefined;
}

/**
 * The exchange and routing key a dead-lettered message records ({@link recordedRoute}), else
 * undefined. Written by publishers: follow it only where everyone allowed to publish to the work
 * queue is trusted (`twophase dlq replay --trust-recorded-route`).
 */
export function replayRoute(message: DeliveredMessage): { exchange: string; routingKey: string } | undefined {
  const recorded = recordedRoute(message);
  return recorded ? { exchange: recorded.exchange, routingKey: recorded.routingKey } : undefined;
}

/**
 * Properties of a replayed copy: dead-letter headers, broker death headers and the attempt count
 * are dropped (the replay gets a fresh set of attempts), and so is a `twophase-replay-id` left by
 * an earlier version; `twophase-replay-count` goes up by one and `twophase-replayed-at` is set.
 * Every other header is kept as it is.
 */
export function replayProperties(message: DeliveredMessage, now: number): Options.Publish {
  const headers = baseHeaders(message);
  for (const name of [...DEAD_LETTER_HEADERS, ...BROKER_DEATH_HEADERS, HEADERS.attempts, HEADERS.requeueCause, HEADERS.replayId]) delete headers[name];
  headers[HEADERS.replayCount] = (readCount(message.properties.headers, HEADERS.replayCount) ?? 0) + 1;
  headers[HEADERS.replayedAt] = now;
  return copyProperties(message.properties, headers);
}

/**
 * The idempotency key a message carries, for logs: derived as the consumer derives it
 * (`messageKeyOf`), undefined when the consumer would dead-letter it as `missing_key` or `invalid_key`.
 */
export function idempotencyKeyOf(properties: Partial<MessageProperties>): string | undefined {
  try {
    return messageKeyOf(properties.headers, properties.messageId);
  } catch (error) {
    if (error instanceof InvalidMessageError) return undefined;
    throw error;
  }
}
