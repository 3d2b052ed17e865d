/**
 * The outbox message: what a producer stages (`OutboxMessage`), the row it becomes
 * (`OutboxEnvelope`, broker- and store-neutral), and the validation between the two.
 */
import { InvalidOutboxMessageError } from '../util/errors';
import { describeType } from '../util/known-options';
import { IDEMPOTENCY_KEY_HEADER } from '../util/idempotency-header';

/** A RabbitMQ destination: the exchange (`''` = the default exchange) and the routing key. */
export interface RabbitMqOutboxDestination {
  readonly exchange: string;
  readonly routingKey: string;
}

/**
 * A Kafka destination: the topic, the record key (partitioning: the producer's partitioner hashes
 * it; `null` or absent = no key) and an optional fixed partition.
 */
export interface KafkaOutboxDestination {
  readonly topic: string;
  readonly key?: string | null;
  readonly partition?: number;
}

/** Where a message goes. The field names decide the broker: `exchange` → RabbitMQ, `topic` → Kafka. */
export type OutboxDestination = RabbitMqOutboxDestination | KafkaOutboxDestination;

/** The broker of a destination, as stored in the outbox row. */
export type OutboxSystem = 'rabbitmq' | 'kafka';

/** AMQP basic properties an outbox message may carry (RabbitMQ only; a Kafka message with any is refused). */
export interface OutboxProperties {
  /** Default `application/json` when the body was given as a JSON value; none for bytes or a string. */
  readonly contentType?: string;
  readonly contentEncoding?: string;
  readonly correlationId?: string;
  readonly replyTo?: string;
  readonly type?: string;
  readonly appId?: string;
  /** 0 … 255 (queues with `x-max-priority` only). */
  readonly priority?: number;
  /** Per-message TTL, ms (the AMQP `expiration` property). */
  readonly expirationMs?: number;
  /** Delivery mode 2. Default true. */
  readonly persistent?: boolean;
}

/** A message to stage. */
export interface OutboxMessage {
  /** Where it is published. */
  readonly to: OutboxDestination;
  /**
   * The payload. A Buffer or Uint8Array is sent byte for byte; a string as its UTF-8 bytes; any
   * other value as its JSON text (and `contentType` defaults to `application/json`). A JSON value
   * holding NaN, Infinity or -Infinity is refused (JSON would send null in its place).
   */
  readonly body: Buffer | Uint8Array | string | number | boolean | null | readonly unknown[] | { readonly [k: string]: unknown };
  /**
   * Headers, string values only (both brokers carry strings unchanged). `idempotency-key` is
   * reserved: the relay sets it to the message's outbox id.
   */
  readonly headers?: Readonly<Record<string, string>>;
  readonly properties?: OutboxProperties;
  /**
   * Messages of one ordering key (per broker) are published in the order their transactions
   * committed, one after the other; messages of different keys in parallel. Default: the Kafka
   * record key when it is a string; none for RabbitMQ (no order between messages). `null` = none.
   * At most 512 bytes.
   */
  readonly orderingKey?: string | null;
}

/** A validated message with its id: one outbox row, as the staging functions write it. */
export interface OutboxEnvelope {
  /** The outbox id (UUID form, see `outboxMessageId`): the `idempotency-key` header and the broker message id. */
  readonly id: string;
  readonly system: OutboxSystem;
  readonly destination: OutboxDestination;
  readonly body: Buffer;
  readonly headers: Readonly<Record<string, string>>;
  readonly properties: OutboxProperties;
  readonly orderingKey: string | null;
}

const MAX_ORDERING_KEY_BYTES = 512;
const MAX_NAME_BYTES = 255;
const PROPERTY_NAMES: readonly (keyof OutboxProperties)[] = ['contentType', 'contentEncoding', 'correlationId', 'replyTo', 'type', 'appId', 'priority', 'expirationMs', 'persistent'];
const MESSAGE_FIELDS = ['to', 'body', 'headers', 'properties', 'orderingKey'];

/**
 * Validates `message` and gives its row under `id`. Does not mutate its input; the body's bytes
 * are copied.
 * @throws InvalidOutboxMessageError naming the field: an unknown field, a destination that is
 *   neither `{ exchange, routingKey }` nor `{ topic }`, a header value that is not a string, the
 *   reserved `idempotency-key` header, properties on a Kafka message, an ordering key over 512 bytes,
 *   a body JSON cannot serialise (a bigint, a cycle) or would change (NaN, Infinity or -Infinity,
 *   which JSON writes as null: the error names the path, `body.items[2].price`)
 */
export function toOutboxEnvelope(id: string, message: OutboxMessage): OutboxEnvelope {
  if (!message || typeof message !== 'object') throw new InvalidOutboxMessageError(`an outbox message must be an object { to, body, headers?, properties?, orderingKey? }, got ${describeType(message)}`);
  for (const name of Object.keys(message)) {
    if (!MESSAGE_FIELDS.includes(name)) throw new InvalidOutboxMessageError(`outbox message has an unknown field "${name}" (known: ${MESSAGE_FIELDS.join(', ')})`);
  }
  const { system, destination } = destinationOf(message.to);
  const headers = headersOf(message.headers);
  const properties = propertiesOf(system, message.properties);
  const [body, json] = bodyOf(message.body);
  if (json && properties.contentType === undefined && system === 'rabbitmq') properties.contentType = 'application/json';
  const orderingKey = orderingKeyOf(message.orderingKey, destination);
  return { id, system, destination, body, headers, properties, orderingKey };
}

function destinationOf(to: unknown): { system: OutboxSystem; destination: OutboxDestination } {
  if (!to || typeof to !== 'object') throw new InvalidOutboxMessageError(`outbox message "to" must be { exchange, routingKey } (RabbitMQ) or { topic, key?, partition? } (Kafka), got ${describeType(to)}`);
  const d = to as Record<string, unknown>;
  if ('exchange' in d) {
    checkFields('to', d, ['exchange', 'routingKey']);
    if (typeof d.exchange !== 'string' || Buffer.byteLength(d.exchange) > MAX_NAME_BYTES) throw new InvalidOutboxMessageError(`to.exchange must be a string of at most 255 bytes ('' = the default exchange), got ${describeType(d.exchange)}`);
    if (typeof d.routingKey !== 'string' || Buffer.byteLength(d.routingKey) > MAX_NAME_BYTES) throw new InvalidOutboxMessageError(`to.routingKey must be a string of at most 255 bytes, got ${describeType(d.routingKey)}`);
    return { system: 'rabbitmq', destination: { exchange: d.exchange, routingKey: d.routingKey } };
  }
  if ('topic' in d) {
    checkFields('to', d, ['topic', 'key', 'partition']);
    if (typeof d.topic !== 'string' || d.topic.length === 0 || d.topic.length > 249) throw new InvalidOutboxMessageError(`to.topic must be a non-empty string of at most 249 characters, got ${describeType(d.topic)}`);
    if (d.key !== undefined && d.key !== null && typeof d.key !== 'string') throw new InvalidOutboxMessageError(`to.key must be a string or null, got ${describeType(d.key)}`);
    if (d.partition !== undefined && (!Number.isInteger(d.partition) || (d.partition as number) < 0)) throw new InvalidOutboxMessageError(`to.partition must be an integer ≥ 0, got ${describeType(d.partition)}`);
    const destination: KafkaOutboxDestination = { topic: d.topic, key: (d.key as string | null | undefined) ?? null, ...(d.partition === undefined ? {} : { partition: d.partition as number }) };
    return { system: 'kafka', destination };
  }
  throw new InvalidOutboxMessageError('outbox message "to" must have "exchange" and "routingKey" (RabbitMQ) or "topic" (Kafka)');
}

function checkFields(where: string, value: Record<string, unknown>, known: readonly string[]): void {
  for (const name of Object.keys(value)) {
    if (!known.includes(name)) throw new InvalidOutboxMessageError(`${where} has an unknown field "${name}" (known: ${known.join(', ')})`);
  }
}

function headersOf(headers: unknown): Record<string, string> {
  if (headers === undefined) return {};
  if (!headers || typeof headers !== 'object' || Array.isArray(headers)) throw new InvalidOutboxMessageError(`outbox message headers must be an object of strings, got ${describeType(headers)}`);
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers as Record<string, unknown>)) {
    if (name.toLowerCase() === IDEMPOTENCY_KEY_HEADER) throw new InvalidOutboxMessageError(`the "${IDEMPOTENCY_KEY_HEADER}" header is reserved: the relay sets it to the message's outbox id`);
    if (typeof value !== 'string') throw new InvalidOutboxMessageError(`outbox header "${name}" must be a string, got ${describeType(value)}`);
    out[name] = value;
  }
  return out;
}

function propertiesOf(system: OutboxSystem, properties: unknown): { -readonly [K in keyof OutboxProperties]: OutboxProperties[K] } {
  if (properties === undefined) return {};
  if (!properties || typeof properties !== 'object') throw new InvalidOutboxMessageError(`outbox message properties must be an object, got ${describeType(properties)}`);
  if (system === 'kafka') throw new InvalidOutboxMessageError('outbox message properties are AMQP properties: a Kafka message carries headers only');
  checkFields('properties', properties as Record<string, unknown>, PROPERTY_NAMES);
  const p = properties as OutboxProperties;
  for (const name of ['contentType', 'contentEncoding', 'correlationId', 'replyTo', 'type', 'appId'] as const) {
    if (p[name] !== undefined && typeof p[name] !== 'string') throw new InvalidOutboxMessageError(`properties.${name} must be a string, got ${describeType(p[name])}`);
  }
  if (p.priority !== undefined && (!Number.isInteger(p.priority) || p.priority < 0 || p.priority > 255)) throw new InvalidOutboxMessageError(`properties.priority must be an integer in [0, 255], got ${describeType(p.priority)}`);
  if (p.expirationMs !== undefined && (!Number.isInteger(p.expirationMs) || p.expirationMs < 0)) throw new InvalidOutboxMessageError(`properties.expirationMs must be an integer ≥ 0 (ms), got ${describeType(p.expirationMs)}`);
  if (p.persistent !== undefined && typeof p.persistent !== 'boolean') throw new InvalidOutboxMessageError(`properties.persistent must be a boolean, got ${describeType(p.persistent)}`);
  return { ...p };
}

function bodyOf(body: unknown): [Buffer, boolean] {
  if (Buffer.isBuffer(body)) return [Buffer.from(body), false];
  if (body instanceof Uint8Array) return [Buffer.from(body), false];
  if (typeof body === 'string') return [Buffer.from(body, 'utf8'), false];
  if (body === undefined || typeof body === 'function' || typeof body === 'symbol' || typeof body === 'bigint') {
    throw new InvalidOutboxMessageError(`outbox message body must be bytes, a string or a JSON value, got ${describeType(body)}`);
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(body);
  } catch (error) {
    // A bigint inside, a circular reference, a toJSON that throws.
    throw new InvalidOutboxMessageError(`outbox message body cannot be serialised as JSON (${error instanceof Error ? error.message : String(error)}); pass bytes, a string or a JSON value`);
  }
  if (json === undefined) throw new InvalidOutboxMessageError('outbox message body cannot be serialised as JSON (its toJSON() returned nothing); pass bytes, a string or a JSON value');
  // JSON.stringify writes NaN, Infinity and -Infinity as null: the data would change silently.
  // Only a text holding `null` can hide one, so other bodies skip the second walk.
  if (json.includes('null')) {
    const bad = nonFiniteNumber(body);
    if (bad) {
      throw new InvalidOutboxMessageError(
        `outbox message body holds ${String(bad.value)} at ${bad.path}, which JSON cannot hold (it would be sent as null); pass a finite number, null, or the value as a string`,
      );
    }
  }
  return [Buffer.from(json, 'utf8'), true];
}

/**
 * The first NaN, Infinity or -Infinity (also inside a Number object) that `JSON.stringify(body)`
 * meets, with its path (`body.items[2].price`), or undefined. Walks the body as JSON.stringify
 * does, so a value's `toJSON()` result is what is checked and skipped properties are skipped.
 */
function nonFiniteNumber(body: unknown): { path: string; value: number } | undefined {
  const paths = new Map<object, string>();
  let found: { path: string; value: number } | undefined;
  JSON.stringify(body, function (this: object, key: string, value: unknown) {
    if (found) return undefined;
    const holder = paths.get(this);
    const path = holder === undefined ? 'body' : Array.isArray(this) ? `${holder}[${key}]` : `${holder}${propertyStep(key)}`;
    const primitive = value instanceof Number ? value.valueOf() : value;
    if (typeof primitive === 'number' && !Number.isFinite(primitive)) {
      found = { path, value: primitive };
      return undefined;
    }
    // Set at each visit: an object met twice (not a cycle) has its children visited right after.
    if (value !== null && typeof value === 'object') paths.set(value, path);
    return value;
  });
  return found;
}

/** `.name`, or `["odd name"]` for a key that is not an identifier. */
function propertyStep(key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

function orderingKeyOf(orderingKey: unknown, destination: OutboxDestination): string | null {
  if (orderingKey === null) return null;
  if (orderingKey === undefined) {
    const key = 'topic' in destination ? destination.key : null;
    if (typeof key !== 'string' || key.length === 0) return null;
    if (Buffer.byteLength(key) > MAX_ORDERING_KEY_BYTES) throw new InvalidOutboxMessageError(`the Kafka record key is over ${MAX_ORDERING_KEY_BYTES} bytes, so it cannot be the ordering key: pass orderingKey (a shorter string, or null for no order)`);
    return key;
  }
  if (typeof orderingKey !== 'string' || orderingKey.length === 0 || Buffer.byteLength(orderingKey) > MAX_ORDERING_KEY_BYTES) {
    throw new InvalidOutboxMessageError(`orderingKey must be a non-empty string of at most ${MAX_ORDERING_KEY_BYTES} bytes, or null, got ${describeType(orderingKey)}`);
  }
  return orderingKey;
}
