/**
 * The steps of the pipeline that call the consumer's hooks on a delivery before and while it is
 * handled: deriving its key, decoding its body, and calling `handle()`.
 */
import type { JsonValue } from '../claim/claimer';
import type { Delivery, HandlerContext, Message } from '../ports/delivery';
import type { Disposition } from '../ports/disposition';
import { InvalidKeyError, InvalidMessageError } from '../util/errors';
import { validateKey } from '../claim/keys';
import { truncateErrorMessage } from '../claim/settlement';

/** The consumer's overridable steps (ConsumerBase's `handle` and protected hooks). */
export interface PipelineHooks<TBody, TTransaction> {
  handle(message: Message<TBody>, context: HandlerContext<TTransaction>): Disposition | Promise<Disposition>;
  decode(raw: Buffer, delivery: Delivery): TBody;
  messageKey(delivery: Delivery): string;
  fingerprint(message: Message<TBody>): string | undefined;
  onDuplicate(message: Message<TBody>, result: JsonValue | undefined): void | Promise<void>;
  isPermanent(error: unknown): boolean;
}

/**
 * Runs `handle()` and always returns a promise: a synchronous return value is wrapped, and a
 * synchronous throw becomes a rejection (so both are judged like an `async` handler's).
 */
export function callHandle<TBody, TTransaction>(hooks: PipelineHooks<TBody, TTransaction>, message: Message<TBody>, context: HandlerContext<TTransaction>): Promise<Disposition> {
  try {
    return Promise.resolve(hooks.handle(message, context));
  } catch (error) {
    return Promise.reject(error);
  }
}

/** The body as the consumer's `decode` gives it. @throws InvalidMessageError `invalid_body` for any failure */
export function decodeBody<TBody>(hooks: Pick<PipelineHooks<TBody, unknown>, 'decode'>, delivery: Delivery): TBody {
  try {
    return hooks.decode(delivery.body, delivery);
  } catch (error) {
    if (error instanceof InvalidMessageError) throw error;
    throw new InvalidMessageError('invalid_body', `body could not be decoded: ${truncateErrorMessage(error, 200)}`, { cause: error });
  }
}

/**
 * The delivery's key: the consumer's `messageKey`, after `keyPrefix` (the escaped consumer name and `:`).
 * @throws InvalidMessageError `invalid_key` for a key that is not a valid key
 */
export function deriveKey(hooks: Pick<PipelineHooks<unknown, unknown>, 'messageKey'>, keyPrefix: string, delivery: Delivery): string {
  const raw = hooks.messageKey(delivery);
  try {
    if (typeof raw !== 'string' || raw.length === 0) validateKey(raw);
    const key = keyPrefix + raw;
    validateKey(key);
    return key;
  } catch (error) {
    if (error instanceof InvalidKeyError) throw new InvalidMessageError('invalid_key', error.message, { cause: error });
    throw error;
  }
}
