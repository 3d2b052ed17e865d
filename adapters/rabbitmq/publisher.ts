/**
 * A publisher for twophase consumers: every message gets a message id and an `idempotency-key`
 * header, is published `mandatory`, and `publish` resolves only after the broker's confirm.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { ChannelModel, Options } from 'amqplib';
import { type AmqpConnectionManager, connect } from 'amqp-connection-manager';
import { ConfigurationError, consoleWarnLogger, IDEMPOTENCY_KEY_HEADER, type Logger } from '../../src';
import { checkInteger, checkKnownOptions, optionNames } from '../../src/adapter-kit';
import { ConfirmPublisher } from './confirm-publisher';
import { redact } from './connections';
import { BrokerUnavailableError, MessageTooLargeError } from './errors';
import { defaultMaxMessageBytes } from './wire-limits';
import { checkPeerVersion, validatePublishedKey } from '../../src/adapter-kit';
import { SUPPORTED_RANGE } from './peer';

/** Options of a {@link RabbitMqPublisher}. */
export interface RabbitMqPublisherOptions {
  /** AMQP URL(s), for example `amqp://guest:guest@127.0.0.1:5672`. */
  readonly url: string | readonly string[];
  /** Confirm deadline of one publish, ms. Default 10 000. [10, 600 000]. */
  readonly publishTimeoutMs?: number;
  /** How long `connect()` waits for the connection, ms. Default 30 000. */
  readonly connectTimeoutMs?: number;
  /** Pause before reconnecting, ms. Default 1000. */
  readonly reconnectDelayMs?: number;
  /** AMQP heartbeat, seconds. Default 5. */
  readonly heartbeatSeconds?: number;
  /** Client-provided connection name. Default `twophase:publisher`. */
  readonly connectionName?: string;
  /** pino-compatible logger. Default: the core's warn/error JSON logger. */
  readonly logger?: Logger;
  /**
   * Adds trace context to each message's headers before it is sent, for example
   * `injectTraceHeaders` from `twophase/otel`: `(headers) => headers with traceparent, baggage`.
   * Its result replaces the headers; the `idempotency-key` header is kept as built.
   */
  readonly injectContext?: (headers: Record<string, unknown>) => Record<string, unknown>;
  /**
   * Largest message body the broker accepts, bytes: a larger publish fails at once with
   * {@link MessageTooLargeError} and nothing is sent. AMQP does not tell a client the broker's
   * `max_message_size`, so the default is RabbitMQ's documented default for the connected
   * broker's version (see {@link defaultMaxMessageBytes}): 16 MiB from 4.0, 128 MiB before. Set
   * it to your broker's `max_message_size` when configured otherwise. [1, 536 870 912].
   */
  readonly maxMessageBytes?: number;
}

const PUBLISHER_OPTION_NAMES = optionNames<RabbitMqPublisherOptions>()([
  'url',
  'publishTimeoutMs',
  'connectTimeoutMs',
  'reconnectDelayMs',
  'heartbeatSeconds',
  'connectionName',
  'logger',
  'injectContext',
  'maxMessageBytes',
]);

/** Options of one publish. */
export interface PublishMessageOptions {
  /**
   * The message's idempotency key, sent as the `idempotency-key` header. Default: the message id,
   * which without `messageId` is a fresh random UUID per call: a publish retried after a timeout
   * then carries a second key, so the consumer applies its effect twice. Give a key from your own
   * data (an order id, a request id) whenever a publish may be retried; publishing twice with the
   * same key is how a producer retries safely. The publisher logs one warning, at its first
   * publish with neither `idempotencyKey` nor `messageId`.
   */
  readonly idempotencyKey?: string;
  /**
   * The AMQP `message-id` (a short string: at most 255 bytes). Default: the idempotency key when
   * given and at most 255 bytes of UTF-8; a longer key gives `sha256:<hex of the key>`; without a
   * key, a random UUID. The key itself always travels whole in the `idempotency-key` header.
   */
  readonly messageId?: string;
  /**
   * More headers. `idempotency-key` is set from `idempotencyKey`/`messageId` and wins; a header
   * named `idempotency-key` in any case without `idempotencyKey` is refused (pass the key as
   * `idempotencyKey`).
   */
  readonly headers?: Readonly<Record<string, unknown>>;
  /** Persistent (delivery mode 2). Default true. */
  readonly persistent?: boolean;
  /**
   * Content type. Default: `application/json` for an object, number, boolean or null (sent as
   * JSON) and for a string that is JSON text; `text/plain; charset=utf-8` for any other string;
   * none for a Buffer.
   */
  readonly contentType?: string;
  readonly correlationId?: string;
  readonly replyTo?: string;
  readonly type?: string;
  readonly appId?: string;
  /** Priority, 0 … 255 (queues with `x-max-priority` only). */
  readonly priority?: number;
  /** Per-message TTL, ms, as the AMQP `expiration` property. */
  readonly expirationMs?: number;
  /** Confirm deadline of this publish, ms. Default: the publisher's `publishTimeoutMs`. */
  readonly timeoutMs?: number;
}

const PUBLISH_OPTION_NAMES = optionNames<PublishMessageOptions>()([
  'idempotencyKey',
  'messageId',
  'headers',
  'persistent',
  'contentType',
  'correlationId',
  'replyTo',
  'type',
  'appId',
  'priority',
  'expirationMs',
  'timeoutMs',
]);

/**
 * A message body: a Buffer is sent as is, a string as its UTF-8 bytes (never JSON-encoded again),
 * anything else as UTF-8 JSON.
 */
export type MessageBody = Buffer | object | string | number | boolean | null;

/** What a confirmed publish reports. */
export interface PublishReceipt {
  readonly messageId: string;
  readonly idempotencyKey: string;
}

/**
 * Confirmed, mandatory publishing with idempotency keys.
 *
 * ```ts
 * const publisher = new RabbitMqPublisher({ url: 'amqp://guest:guest@127.0.0.1:5672' });
 * await publisher.connect();
 * await publisher.publish('payments', 'payment.requested', { paymentId: 'p-1', amountCents: 500 }, { idempotencyKey: 'p-1' });
 * await publisher.close();
 * ```
 */
export class RabbitMqPublisher {
  private readonly urls: string[];
  private readonly publishTimeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly reconnectDelayMs: number;
  private readonly heartbeatSeconds: number;
  private readonly connectionName: string;
  private readonly logger: Logger;
  /** The warning about a publish without a key was logged (once per publisher). */
  private warnedRandomKey = false;
  private readonly injectContext: ((headers: Record<string, unknown>) => Record<string, unknown>) | undefined;
  private readonly maxMessageBytesOption: number | undefined;
  private manager: AmqpConnectionManager | undefined;
  private publisher: ConfirmPublisher | undefined;
  /** Set by close(): a publish after it says so (connect() again to reuse the publisher). */
  private closed = false;
  private connecting: Promise<void> | undefined;

  /** @throws ConfigurationError for an invalid option */
  constructor(options: RabbitMqPublisherOptions) {
    checkKnownOptions('RabbitMqPublisher options', options, PUBLISHER_OPTION_NAMES);
    const urls = typeof options?.url === 'string' ? [options.url] : Array.isArray(options?.url) ? [...options.url] : [];
    if (urls.length === 0 || urls.some((u) => typeof u !== 'string' || !/^amqps?:\/\//.test(u))) {
      throw new ConfigurationError(`url must be an amqp:// or amqps:// URL (or a non-empty list of them), got ${JSON.stringify(options?.url)}`);
    }
    this.urls = urls;
    this.publishTimeoutMs = checkInteger('publishTimeoutMs', options.publishTimeoutMs ?? 10_000, 10, 600_000);
    this.connectTimeoutMs = checkInteger('connectTimeoutMs', options.connectTimeoutMs ?? 30_000, 100, 3_600_000);
    this.reconnectDelayMs = checkInteger('reconnectDelayMs', options.reconnectDelayMs ?? 1000, 10, 600_000);
    this.heartbeatSeconds = checkInteger('heartbeatSeconds', options.heartbeatSeconds ?? 5, 0, 600);
    this.connectionName = options.connectionName ?? 'twophase:publisher';
    this.logger = options.logger ?? consoleWarnLogger;
    checkPeerVersion('amqplib', SUPPORTED_RANGE, this.logger);
    if (options.injectContext !== undefined && typeof options.injectContext !== 'function') throw new ConfigurationError('injectContext must be a function');
    this.injectContext = options.injectContext;
    this.maxMessageBytesOption = options.maxMessageBytes === undefined ? undefined : checkInteger('maxMessageBytes', options.maxMessageBytes, 1, 536_870_912);
  }

  /**
   * The largest body a publish may carry, bytes: the `maxMessageBytes` option, else the
   * documented default of the connected broker's version; undefined before `connect()`.
   */
  get maxMessageBytes(): number | undefined {
    if (this.maxMessageBytesOption !== undefined) return this.maxMessageBytesOption;
    if (!this.manager) return undefined;
    const server = (this.manager.connection as unknown as { connection?: { serverProperties?: { version?: unknown } } } | undefined)?.connection?.serverProperties;
    return defaultMaxMessageBytes(typeof server?.version === 'string' ? server.version : undefined);
  }

  /**
   * Connects and opens the confirm channel. Safe to repeat and to call concurrently.
   * @throws BrokerUnavailableError when no connection opens within `connectTimeoutMs`
   */
  connect(): Promise<void> {
    this.connecting ??= this.connectNow().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async connectNow(): Promise<void> {
    if (this.publisher) return;
    this.closed = false;
    const manager = connect(this.urls, {
      heartbeatIntervalInSeconds: this.heartbeatSeconds,
      reconnectTimeInSeconds: this.reconnectDelayMs / 1000,
      connectionOptions: { clientProperties: { connection_name: this.connectionName } },
    });
    let lastFailure: Error | undefined;
    manager.on('connectFailed', ({ err, url }: { err: Error; url?: unknown }) => {
      lastFailure = err;
      this.logger.warn({ err, url: redact(url ?? this.urls[0]) }, `RabbitMQ connect to ${redact(url ?? this.urls[0])} failed; retrying`);
    });
    try {
      await manager.connect({ timeout: this.connectTimeoutMs });
      const publisher = new ConfirmPublisher(manager, { name: `${this.connectionName}:publish`, timeoutMs: this.publishTimeoutMs, recoveryDelayMs: this.reconnectDelayMs, logger: this.logger });
      await publisher.start(this.connectTimeoutMs);
      this.manager = manager;
      this.publisher = publisher;
    } catch (error) {
      await manager.close().catch(() => undefined);
      // Names where it tried (the password hidden) and the last refusal: the timeout alone says neither.
      const last = lastFailure ? ` (last failure: ${lastFailure.message})` : '';
      throw new BrokerUnavailableError(`could not connect to RabbitMQ at ${this.urls.map(redact).join(', ')} within ${this.connectTimeoutMs} ms${last}`, { cause: error });
    }
  }

  /**
   * Publishes `body` to `exchange` with `routingKey` and waits for the broker's confirm. A Buffer
   * is sent as is, a string as its UTF-8 bytes, anything else as UTF-8 JSON (see
   * {@link PublishMessageOptions.contentType}). A consumer's default `decode` parses the body as
   * UTF-8 JSON whatever its content type.
   * @returns the message id and idempotency key used
   * @throws ConfigurationError when not connected, or for an invalid option
   * @throws UnroutableError when no queue is bound for the routing key (the message was returned)
   * @throws PublishError when the broker nacked the message or no confirm arrived in time; the
   *   message may have been routed, so publish again with the same idempotency key
   * @throws MessageTooLargeError when the body is over {@link RabbitMqPublisher.maxMessageBytes},
   *   or the headers encode to more than 65 536 bytes (amqplib's limit for a header table); nothing
   *   was sent and other publishes are unaffected
   * @throws InvalidKeyError when the idempotency key (or the message id used as the key) is one
   *   every consumer dead-letters as `invalid_key` ({@link validatePublishedKey}); nothing was sent
   * @throws ConfigurationError also when amqplib cannot encode the message otherwise: a header
   *   value with no AMQP type (a symbol, a function, a bigint), a message id, routing key or other
   *   short string over 255 bytes; nothing was sent
   */
  async publish(exchange: string, routingKey: string, body: MessageBody, options: PublishMessageOptions = {}): Promise<PublishReceipt> {
    if (!this.publisher) throw new ConfigurationError(`RabbitMqPublisher.publish() called ${this.closed ? 'after close()' : 'before connect()'}`);
    const built = buildPublish(body, options);
    const { content, receipt } = built;
    if (options.idempotencyKey === undefined && options.messageId === undefined && !this.warnedRandomKey) {
      this.warnedRandomKey = true;
      this.logger.warn(
        { exchange, routingKey },
        'RabbitMqPublisher: a publish without idempotencyKey gets a random key per call, so a retry of such a publish is not deduplicated (the consumer applies it twice); pass idempotencyKey (said once per publisher)',
      );
    }
    const limit = this.maxMessageBytes;
    if (limit !== undefined && content.length > limit) {
      throw new MessageTooLargeError(
        `publish to exchange "${exchange}" with routing key "${routingKey}" was not sent: its body is ${content.length} bytes, more than the broker's max_message_size of ${limit} bytes` +
          `${this.maxMessageBytesOption === undefined ? " (RabbitMQ's documented default for this broker version; set maxMessageBytes if your broker is configured otherwise)" : ' (maxMessageBytes)'}`,
      );
    }
    let { properties } = built;
    if (this.injectContext) {
      const headers = properties.headers ?? {};
      properties = { ...properties, headers: { ...this.injectContext({ ...headers }), [IDEMPOTENCY_KEY_HEADER]: headers[IDEMPOTENCY_KEY_HEADER] } };
    }
    await this.publisher.publish(exchange, routingKey, content, properties, options.timeoutMs ?? this.publishTimeoutMs);
    return receipt;
  }

  /**
   * Whether `exchange` exists, asked on a channel of its own that is closed after: a check of a
   * missing exchange (a passive `exchange.declare`) is answered with 404 NOT_FOUND and the broker
   * closes the channel it ran on (AMQP 0-9-1, `exchange.declare`, passive bit), and so would a
   * publish to it close the confirm channel and fail every publish in flight there. The default
   * exchange (`''`) always exists.
   * @throws BrokerUnavailableError when not connected or the check fails otherwise
   */
  async exchangeExists(exchange: string): Promise<boolean> {
    if (exchange === '') return true;
    const model = this.manager?.connection as ChannelModel | undefined;
    if (!model) throw new BrokerUnavailableError(`could not check exchange "${exchange}": not connected to RabbitMQ`);
    try {
      const channel = await model.createChannel();
      // The broker closes the channel on 404; the close is expected here.
      channel.on('error', () => undefined);
      try {
        await channel.checkExchange(exchange);
        return true;
      } finally {
        await channel.close().catch(() => undefined);
      }
    } catch (error) {
      if ((error as { code?: unknown })?.code === 404) return false;
      throw new BrokerUnavailableError(`could not check exchange "${exchange}"`, { cause: error });
    }
  }

  /** Publishes straight to `queue` through the default exchange. See {@link RabbitMqPublisher.publish}. */
  sendToQueue(queue: string, body: MessageBody, options: PublishMessageOptions = {}): Promise<PublishReceipt> {
    return this.publish('', queue, body, options);
  }

  /** Closes the channel and the connection. Safe to repeat. */
  async close(): Promise<void> {
    this.closed = true;
    const publisher = this.publisher;
    const manager = this.manager;
    this.publisher = undefined;
    this.manager = undefined;
    await publisher?.close();
    await manager?.close().catch(() => undefined);
  }
}

/** AMQP's limit on a short string such as `message-id` (AMQP 0-9-1 §4.2.5.3). */
const MAX_MESSAGE_ID_BYTES = 255;

/** The default message id of a keyed publish: the key, or its SHA-256 when the key is too long for one. */
function messageIdForKey(key: string): string {
  if (Buffer.byteLength(key, 'utf8') <= MAX_MESSAGE_ID_BYTES) return key;
  return `sha256:${createHash('sha256').update(key, 'utf8').digest('hex')}`;
}

/**
 * Turns a body and options into the wire content and publish properties. Pure; exported for tests.
 * @throws ConfigurationError for an unknown option name (a misspelled `idempotencyKey` would
 *   silently give every publish a new random key), an empty message id, or a header named
 *   `idempotency-key` in any case when no `idempotencyKey` is given (the message would get a
 *   random key and could never be deduplicated)
 * @throws InvalidKeyError for a key consumers refuse ({@link validatePublishedKey})
 */
export function buildPublish(body: MessageBody, options: PublishMessageOptions): { content: Buffer; properties: Options.Publish; receipt: PublishReceipt } {
  checkKnownOptions('publish options', options, PUBLISH_OPTION_NAMES);
  if (options.idempotencyKey !== undefined) validatePublishedKey(options.idempotencyKey, 'text');
  if (options.messageId !== undefined && (typeof options.messageId !== 'string' || options.messageId.length === 0)) {
    throw new ConfigurationError(`messageId must be a non-empty string, got ${JSON.stringify(options.messageId)}`);
  }
  if (options.idempotencyKey === undefined) {
    const headers = options.headers ?? {};
    const named = Object.keys(headers).find((name) => name.toLowerCase() === IDEMPOTENCY_KEY_HEADER);
    if (named !== undefined) {
      throw new ConfigurationError(
        `publish options: headers hold "${named}" but no idempotencyKey was given; the "${IDEMPOTENCY_KEY_HEADER}" header is set from idempotencyKey (else a message id), ` +
          `so this message would carry another key and could never be deduplicated. Pass { idempotencyKey: ${JSON.stringify(headers[named])} } instead of the header`,
      );
    }
    if (options.messageId !== undefined) validatePublishedKey(options.messageId, 'text');
  }
  const messageId = options.messageId ?? (options.idempotencyKey === undefined ? randomUUID() : messageIdForKey(options.idempotencyKey));
  const idempotencyKey = options.idempotencyKey ?? messageId;
  const { content, defaultContentType } = encodeBody(body);
  const properties: Options.Publish = {
    messageId,
    persistent: options.persistent ?? true,
    headers: { ...(options.headers ?? {}), [IDEMPOTENCY_KEY_HEADER]: idempotencyKey },
    timestamp: Math.floor(Date.now() / 1000),
  };
  const contentType = options.contentType ?? defaultContentType;
  if (contentType !== undefined) properties.contentType = contentType;
  if (options.correlationId !== undefined) properties.correlationId = options.correlationId;
  if (options.replyTo !== undefined) properties.replyTo = options.replyTo;
  if (options.type !== undefined) properties.type = options.type;
  if (options.appId !== undefined) properties.appId = options.appId;
  if (options.priority !== undefined) properties.priority = checkInteger('priority', options.priority, 0, 255);
  if (options.expirationMs !== undefined) properties.expiration = String(checkInteger('expirationMs', options.expirationMs, 0, 2 ** 31 - 1));
  return { content, properties, receipt: { messageId, idempotencyKey } };
}

/** The bytes of a body and the content type that names them (see {@link MessageBody}). */
function encodeBody(body: MessageBody): { content: Buffer; defaultContentType: string | undefined } {
  if (Buffer.isBuffer(body)) return { content: body, defaultContentType: undefined };
  if (typeof body === 'string') return { content: Buffer.from(body, 'utf8'), defaultContentType: isJsonText(body) ? 'application/json' : 'text/plain; charset=utf-8' };
  let json: string | undefined;
  try {
    json = JSON.stringify(body);
  } catch (error) {
    // A BigInt, a cycle, or a toJSON that throws.
    throw new ConfigurationError(`body must be a Buffer, a string or a JSON-serialisable value: ${(error as Error).message}`, { cause: error });
  }
  if (json === undefined) throw new ConfigurationError('body must be a Buffer, a string or a JSON-serialisable value');
  return { content: Buffer.from(json, 'utf8'), defaultContentType: 'application/json' };
}

function isJsonText(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}


