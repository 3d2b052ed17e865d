/**
 * The demo's payment consumer: a ConsumerBase subclass whose effect is recorded in the ledger,
 * with crashes injected at every step of the pipeline.
 */
import {
  ack,
  ConsumerBase,
  type ConsumerOptions,
  defaultMessageKey,
  type Delivery,
  type Disposition,
  IDEMPOTENCY_KEY_HEADER,
  InvalidMessageError,
  type HandlerContext,
  type Message,
  PermanentError,
  ShutdownError,
} from '../../src';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EffectLedger } from './ledger';
import type { Rng } from './rng';

export interface Payment {
  readonly account: string;
  readonly amountCents: number;
  readonly poison?: boolean;
}

/** Where a worker may be made to crash. */
export type CrashPoint = 'before_effect' | 'after_effect_before_commit' | 'after_commit_before_ack';

export interface CrashPlan {
  /** Chance, per delivery, of a crash at each point. */
  readonly rate: Readonly<Record<CrashPoint, number>>;
  /** Max handler think time, ms. */
  readonly maxWorkMs: number;
}

/** Thrown inside a crashed worker to unwind its stack; nothing it does after reaches anyone. */
export class SimulatedCrash extends ShutdownError {
  constructor() {
    super('simulated crash');
  }
}

/** Writes an effect row through the claim's transaction (the transactional inbox). */
export type RecordEffect = (transaction: unknown, key: string, worker: number, fencingToken: number) => Promise<void>;

export class PaymentConsumer extends ConsumerBase<Payment, unknown> {
  crashed = false;
  /** Bodies whose ack must be dropped by a crash right after the commit. */
  readonly crashOnAck = new WeakSet<Buffer>();

  constructor(
    options: ConsumerOptions,
    readonly worker: number,
    private readonly ledger: EffectLedger,
    private readonly rng: Rng,
    private readonly plan: CrashPlan,
    private readonly onCrash: (point: CrashPoint) => void,
    /** With the inbox: the effect is a row written in the claim's transaction, not a ledger call. */
    private readonly recordEffect?: RecordEffect,
  ) {
    super(options);
  }

  /**
   * A payment must carry its idempotency key: without the header it is dead-lettered as
   * `missing_key`, on every broker (the default would fall back to the broker's message id, which
   * on Kafka is `topic:partition:offset` and so never matches a producer's retry).
   */
  protected override messageKey(delivery: Delivery): string {
    const key = delivery.headers[IDEMPOTENCY_KEY_HEADER];
    if (key === undefined || key === null) throw new InvalidMessageError('missing_key', `no "${IDEMPOTENCY_KEY_HEADER}" header`);
    return defaultMessageKey(delivery);
  }

  async handle(message: Message<Payment>, context: HandlerContext<unknown>): Promise<Disposition> {
    if (message.body.poison) throw new PermanentError(`account ${message.body.account} is closed`);
    const roll = this.rng.next();
    const { rate } = this.plan;
    await sleep(Math.floor(this.rng.next() * this.plan.maxWorkMs));
    if (this.crashed) throw new SimulatedCrash(); // a dead process applies nothing more
    if (roll < rate.before_effect) return this.crash('before_effect');
    if (this.recordEffect) await this.recordEffect(context.transaction, message.key, this.worker, context.fencingToken);
    else this.ledger.apply(message.key, this.worker, context.fencingToken);
    if (this.crashed) throw new SimulatedCrash();
    if (roll < rate.before_effect + rate.after_effect_before_commit) return this.crash('after_effect_before_commit');
    if (roll < rate.before_effect + rate.after_effect_before_commit + rate.after_commit_before_ack) this.crashOnAck.add(message.raw);
    return ack({ appliedBy: this.worker });
  }

  /** Marks this worker dead and unwinds; the demo kills its source and claimer view. */
  crash(point: CrashPoint): never {
    if (!this.crashed) {
      this.crashed = true;
      this.onCrash(point);
    }
    throw new SimulatedCrash();
  }
}
