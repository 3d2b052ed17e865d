/**
 * The part of the adapter fuzz tests that does not depend on the broker: a consumer that records
 * what it handled and how each delivery ended (by the `fuzz-id` header), and the check of a
 * batch's fates against the oracle.
 */
import {
  ack,
  ConsumerBase,
  type ConsumerObserver,
  type DeliveryResult,
  type Disposition,
  type HandlerContext,
  type Message,
} from '../../../src';
import { expectedFate, type FuzzMessage, type Transport } from './bad-input';

export const TRACKING_HEADER = 'fuzz-id';

/** A dead letter as read back from the broker's DLQ. */
export interface ReadDeadLetter {
  readonly trackingId: string;
  readonly reason: string | undefined;
  readonly errorType: string | undefined;
  /** Where the record was, when the broker says (Kafka: `partition@offset` from the `twophase-original-*` headers). */
  readonly origin?: string;
}

/**
 * Explains more than one dead letter of one record by a redelivery the broker's log shows, or
 * says why it cannot (the returned message fails the batch).
 */
export type RepeatedDeadLetterCheck = (trackingId: string, copies: readonly ReadDeadLetter[]) => string | undefined;

/** Reads a tracking header that may arrive as a string or a Buffer (Kafka). */
export function trackingIdOf(headers: Readonly<Record<string, unknown>>): string | undefined {
  const raw = headers[TRACKING_HEADER];
  if (typeof raw === 'string') return raw;
  if (Buffer.isBuffer(raw)) return raw.toString('utf8');
  return undefined;
}

/** Records each handled key and each delivery's end, by tracking id. */
export class FuzzRecorder {
  /** Tracking id → keys the handler ran for. */
  readonly handled = new Map<string, string[]>();
  /** Tracking id → final actions (ack or reject) of its deliveries. */
  readonly finals = new Map<string, DeliveryResult[]>();
  /**
   * Tracking id → dead letters its deliveries wrote: rejects whose settle did not fail. A reject
   * whose dead letter was not written (Kafka: the partition was revoked first) ends with
   * `ack_failed`; the record's next owner gets it again.
   */
  readonly written = new Map<string, number>();

  readonly observer: ConsumerObserver = {
    onDelivery: (info) => {
      const id = trackingIdOf(info.headers);
      let settleFailed = false;
      return {
        event: (event) => {
          if (event.type === 'ack_failed') settleFailed = true;
        },
        end: (result) => {
          if (id === undefined || (result.action !== 'ack' && result.action !== 'reject')) return;
          this.finals.set(id, [...(this.finals.get(id) ?? []), result]);
          if (result.action === 'reject' && !settleFailed) this.written.set(id, (this.written.get(id) ?? 0) + 1);
        },
      };
    },
  };

  /** True when each id ended in an ack or in a dead letter written (not a reject whose write was cut short). */
  settled(ids: readonly string[]): boolean {
    return ids.every((id) => (this.written.get(id) ?? 0) > 0 || (this.finals.get(id) ?? []).some((r) => r.action === 'ack'));
  }
}

/** A consumer that only records: the effect of a fuzzed message is "the handler ran". */
export class RecordingConsumer extends ConsumerBase<unknown> {
  constructor(
    options: ConstructorParameters<typeof ConsumerBase>[0],
    private readonly recorder: FuzzRecorder,
  ) {
    super(options);
  }
  async handle(message: Message<unknown>, _context: HandlerContext): Promise<Disposition> {
    const id = trackingIdOf(message.headers) ?? '?';
    this.recorder.handled.set(id, [...(this.recorder.handled.get(id) ?? []), message.key]);
    return ack();
  }
}

/**
 * Checks one batch: each message expected dead is in the DLQ with its reason and
 * `InvalidMessageError`, and was never handled; each good key was handled exactly once across
 * the batch (repeats are done duplicates), and never dead-lettered; every message ended in an ack
 * or a reject. A dead message is in the DLQ exactly once, unless `repeated` is given: then more
 * copies must be explained by it (a redelivery the broker's log shows).
 * @throws Error describing the first mismatch
 */
export function checkBatch(
  messages: readonly FuzzMessage[],
  ids: readonly string[],
  namespace: string,
  transport: Transport,
  recorder: FuzzRecorder,
  deadLetters: ReadonlyMap<string, readonly ReadDeadLetter[]>,
  repeated?: RepeatedDeadLetterCheck,
): void {
  const handledKeys: string[] = [];
  const expectedKeys = new Set<string>();
  // Records handled under a broker-made key (one each): compared by count, not by key.
  let brokerKeyed = 0;
  let brokerKeyedHandled = 0;
  messages.forEach((m, i) => {
    const id = ids[i]!;
    const fate = expectedFate(m, namespace, transport);
    const dead = deadLetters.get(id) ?? [];
    const handled = recorder.handled.get(id) ?? [];
    handledKeys.push(...handled);
    if (!recorder.finals.has(id)) throw new Error(`${m.label} (${id}): never settled`);
    if (fate.kind === 'dead') {
      if (handled.length > 0) throw new Error(`${m.label} (${id}): the handler ran for a message that must be dead-lettered as ${fate.reason}`);
      if (dead.length === 0 || dead.some((d) => d.reason !== fate.reason || d.errorType !== 'InvalidMessageError')) {
        throw new Error(`${m.label} (${id}): expected one dead letter ${fate.reason} / InvalidMessageError, got ${JSON.stringify(dead)}`);
      }
      if (dead.length > 1) {
        const unexplained = repeated ? repeated(id, dead) : 'no redelivery is possible here';
        if (unexplained !== undefined) throw new Error(`${m.label} (${id}): dead-lettered ${dead.length} times: ${unexplained}; ${JSON.stringify(dead)}`);
      }
    } else {
      if (dead.length > 0) throw new Error(`${m.label} (${id}): expected to be handled, was dead-lettered ${JSON.stringify(dead)}`);
      if (fate.key === undefined) {
        brokerKeyed++;
        brokerKeyedHandled += handled.length;
        handledKeys.splice(handledKeys.length - handled.length, handled.length);
        if (handled.length !== 1) throw new Error(`${m.label} (${id}): expected one handler run under the broker's record id, got ${handled.length}`);
      } else expectedKeys.add(fate.key);
    }
  });
  if (brokerKeyed !== brokerKeyedHandled) throw new Error(`broker-keyed records: ${brokerKeyed} expected, ${brokerKeyedHandled} handled`);
  const sorted = [...handledKeys].sort();
  const expected = [...expectedKeys].sort();
  if (JSON.stringify(sorted) !== JSON.stringify(expected)) {
    throw new Error(`handled keys differ from the good keys:\nhandled  ${JSON.stringify(sorted).slice(0, 2000)}\nexpected ${JSON.stringify(expected).slice(0, 2000)}`);
  }
}
