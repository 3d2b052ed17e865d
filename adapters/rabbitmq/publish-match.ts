/**
 * Recognising a message twophase published when the broker hands a copy of it back, without a
 * correlation header on the message: a `basic.return` of an unroutable mandatory publish, or the
 * copy the broker dead-letters when a queue refuses the publish (`x-overflow:
 * reject-publish-dlx`). The copy is matched to the oldest waiting publish with the same exchange,
 * routing key, message id and body; among several such publishes, the one whose headers came
 * back equal wins. Two waiting publishes that match alike are byte-for-byte the same message to
 * the same place, so either may take the copy.
 */
import { isDeepStrictEqual } from 'node:util';
import type { MessageProperties } from 'amqplib';
import { BROKER_DEATH_HEADERS, readString } from './headers';

/** A published message as far as a copy the broker hands back can be matched to it. */
export interface PublishedMessage {
  readonly exchange: string;
  readonly routingKey: string;
  readonly content: Buffer;
  readonly messageId: string | undefined;
  /** The headers as published. */
  readonly headers: Readonly<Record<string, unknown>>;
}

/** A message the broker handed back: its content and properties, and where it was published. */
export interface HandedBack {
  readonly content: Buffer;
  readonly properties: Partial<MessageProperties>;
}

/**
 * The oldest entry of `waiting` (iteration order: a `Set` or an array in publish order) for which
 * `eligible` holds and that is the same message to the same place as `seen`; among several, the
 * first whose headers are deeply equal to `seen.headers` (a typed header value such as
 * `{ '!': 'float', value }` comes back as a plain number, so headers alone cannot be the key).
 * Undefined when none matches.
 */
export function matchPublished<T extends PublishedMessage>(waiting: Iterable<T>, seen: PublishedMessage, eligible: (entry: T) => boolean = () => true): T | undefined {
  let first: T | undefined;
  for (const entry of waiting) {
    if (!eligible(entry)) continue;
    if (entry.exchange !== seen.exchange || entry.routingKey !== seen.routingKey || entry.messageId !== seen.messageId || !entry.content.equals(seen.content)) continue;
    if (isDeepStrictEqual(entry.headers, seen.headers)) return entry;
    first ??= entry;
  }
  return first;
}

/** A `basic.return` as the publish it returns: its fields carry the exchange and routing key published to. */
export function returnedMessage(message: HandedBack & { readonly fields: unknown }): PublishedMessage {
  const fields = message.fields as { exchange: string; routingKey: string };
  return {
    exchange: fields.exchange,
    routingKey: fields.routingKey,
    content: message.content,
    messageId: message.properties.messageId,
    headers: { ...(message.properties.headers ?? {}) },
  };
}

/**
 * A copy the broker dead-lettered as the publish it came from: the exchange and first routing key
 * of its newest `x-death` entry (the broker puts the newest first, "Dead Letter Exchanges" docs),
 * and its headers without the ones the broker added when dead-lettering (`x-death`,
 * `x-first-death-*`, `x-last-death-*`). Undefined when it carries no `x-death` entry (it was not
 * dead-lettered by the broker).
 */
export function deadLetteredMessage(message: HandedBack): PublishedMessage | undefined {
  const headers: Record<string, unknown> = { ...(message.properties.headers ?? {}) };
  const deaths = headers['x-death'];
  if (!Array.isArray(deaths) || deaths.length === 0 || deaths[0] === null || typeof deaths[0] !== 'object') return undefined;
  const newest = deaths[0] as Record<string, unknown>;
  const exchange = readString(newest, 'exchange');
  const keys = newest['routing-keys'];
  const routingKey = Array.isArray(keys) ? readString({ key: keys[0] }, 'key') : undefined;
  if (exchange === undefined || routingKey === undefined) return undefined;
  for (const name of BROKER_DEATH_HEADERS) delete headers[name];
  return { exchange, routingKey, content: message.content, messageId: message.properties.messageId, headers };
}
