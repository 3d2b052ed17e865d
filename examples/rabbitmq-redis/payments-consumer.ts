/**
 * A payments consumer: each `payment.requested` message charges an account once, even when the
 * message is delivered twice (producer retries, redeliveries after a crash or a lost ack).
 */
import { randomUUID } from 'node:crypto';
import {
  ack,
  ConsumerBase,
  type ConsumerOptions,
  type Disposition,
  type HandlerContext,
  InvalidMessageError,
  type JsonValue,
  type Message,
  PermanentError,
  reject,
} from '../../src';
import type { Ledger } from './ledger';

/** The message body. */
export interface PaymentRequested {
  readonly paymentId: string;
  readonly account: string;
  readonly amountCents: number;
  readonly currency: string;
}

/** Currencies this service can charge. */
const SUPPORTED_CURRENCIES = new Set(['EUR', 'USD', 'GBP']);

export class PaymentsConsumer extends ConsumerBase<PaymentRequested> {
  constructor(
    options: ConsumerOptions,
    private readonly ledger: Ledger,
    private readonly log: (line: string) => void = (line) => process.stdout.write(`${line}\n`),
  ) {
    super(options);
  }

  /** Rejects undecodable or malformed bodies before any claim (dead-lettered as `invalid_body`). */
  protected override decode(raw: Buffer): PaymentRequested {
    const body = JSON.parse(raw.toString('utf8')) as Partial<PaymentRequested>;
    if (typeof body.paymentId !== 'string' || typeof body.account !== 'string' || !Number.isInteger(body.amountCents) || typeof body.currency !== 'string') {
      throw new InvalidMessageError('invalid_body', 'paymentId, account, amountCents (integer) and currency are required');
    }
    return body as PaymentRequested;
  }

  async handle(message: Message<PaymentRequested>, context: HandlerContext): Promise<Disposition> {
    const payment = message.body;
    if (payment.amountCents <= 0) throw new PermanentError(`amount must be positive, got ${payment.amountCents}`);
    if (!SUPPORTED_CURRENCIES.has(payment.currency)) return reject('unsupported_currency');
    // The effect. A real service would call its payment provider here, passing the fencing
    // token (or the idempotency key) along so the provider can refuse a stale or repeated call.
    const chargeId = `ch_${randomUUID().slice(0, 12)}`;
    const written = await this.ledger.charge(payment.paymentId, { chargeId, amountCents: payment.amountCents, account: payment.account }, context.fencingToken);
    if (!written) throw new PermanentError('a newer owner already charged this payment (fenced)');
    this.log(`charged ${payment.account} ${payment.amountCents} ${payment.currency} for ${payment.paymentId} (${chargeId}, attempt ${context.attempt}, fence ${context.fencingToken})`);
    // Stored with the commit; a duplicate delivery gets it in onDuplicate.
    return ack({ chargeId });
  }

  protected override onDuplicate(message: Message<PaymentRequested>, result: JsonValue | undefined): void {
    const chargeId = result && typeof result === 'object' && !Array.isArray(result) ? result.chargeId : undefined;
    this.log(`duplicate ${message.body.paymentId}: already charged (${String(chargeId)}), acked without charging again`);
  }
}
