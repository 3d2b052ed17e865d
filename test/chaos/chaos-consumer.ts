/**
 * The consumer every chaos worker runs, whatever the stack: its effect is an INSERT into
 * `chaos_effects` (with the PostgreSQL inbox, through `ctx.transaction`: it commits with the
 * claim or rolls back with it); a commit marker follows each successful commit; `lease_lost` and
 * `commit_failed` outcomes are recorded. Handlers take a random, sometimes long time; a small
 * share throws retryably; poison messages throw permanently.
 *
 * Faults armed by the harness fire inside the pipeline at a chosen point:
 * - `kill_before_effect`, `kill_after_effect` (before the commit), `kill_after_commit` (before the
 *   ack): the worker dies there (SIGKILL of its own process, or a simulated crash in-process);
 * - `overrun`: the next handler overruns its lease (its event loop blocks, or its keep-alive is
 *   cut off) for longer than the lease TTL.
 *
 * In a strict run a kill fires only when no other handler of the worker is between its effect
 * and its commit, so the run's only faults stay crashes before the effect or after the commit.
 */
import {
  ack,
  ConsumerBase,
  type ConsumerEvent,
  type ConsumerOptions,
  type Delivery,
  type Disposition,
  type HandlerContext,
  type Message,
  type MessageSource,
  PermanentError,
  ShutdownError,
} from '../../src';
import { type DeliverySink, sleep } from '../../src/adapter-kit';
import type { LedgerWriter } from './ledger';
import type { Rng } from './rng';

/** Faults armed in a worker, fired at a point of its next eligible handler. */
export type ArmedFault = 'kill_before_effect' | 'kill_after_effect' | 'kill_after_commit' | 'overrun';

/** What a published message carries. */
export interface ChaosBody {
  /** The key (also the idempotency key). */
  readonly k: string;
  /** Poison: the handler always fails permanently; the message must be dead-lettered. */
  readonly p?: 1;
}

/** How a worker dies and overruns: a real process, or a simulated crash in-process. */
export interface WorkerControl {
  readonly id: string;
  /** Ends the worker at once. In a process, never returns. */
  kill(fault: ArmedFault, key: string): Promise<void>;
  /** True once the worker is dead (a simulated crash); a dead worker applies nothing more. */
  readonly dead: boolean;
  /** Makes the handler of `key` overrun its lease for `ms` (block the loop, or cut keep-alive). */
  overrun(key: string, ms: number): Promise<void>;
}

export interface HandlerProfile {
  /** Share of handler runs that take 20–200 ms instead of 0–10 ms. */
  readonly slowShare: number;
  /** Share of handler runs that take 1–4 s (below the lease with keep-alive). */
  readonly longShare: number;
  /** Share of handler runs that throw a retryable error before the effect. */
  readonly retryableShare: number;
}

/** Thrown inside a dead worker to unwind what is still running. */
export class WorkerDead extends ShutdownError {
  constructor() {
    super('worker is dead');
  }
}

export const CHAOS_NAMESPACE = 'chaos';
const PREFIX = `${CHAOS_NAMESPACE}:`;
/** The raw key of a namespaced one. */
export const rawKey = (key: string): string => (key.startsWith(PREFIX) ? key.slice(PREFIX.length) : key);

export interface ChaosWorkerOptions {
  readonly control: WorkerControl;
  readonly ledger: LedgerWriter;
  readonly rng: Rng;
  readonly handler: HandlerProfile;
  /** Lease TTL, ms; an overrun lasts 1.75 times this. */
  readonly leaseTtlMs: number;
  /** Kills wait until no other handler is between its effect and its commit. */
  readonly strict: boolean;
  /**
   * The effect INSERT goes through `ctx.transaction` (a `pg` client inside the claim's
   * transaction: PostgresClaimer in transactional mode) instead of the ledger's own pool.
   */
  readonly effectInTransaction?: boolean;
  /** Unix ms when the run started, for the fault log. */
  readonly runStartedAt: number;
}

/** The consumer options every chaos worker shares (short timeouts so faults resolve quickly). */
export function chaosConsumerOptions(base: Pick<ConsumerOptions, 'claimer' | 'source' | 'concurrency' | 'deployment' | 'logger'>, leaseTtlMs: number): ConsumerOptions {
  return {
    name: CHAOS_NAMESPACE,
    ...base,
    leaseTtlMs,
    doneTtlMs: 24 * 60 * 60 * 1000,
    maxAttempts: 8,
    busyRequeueDelayMs: 300,
    retryBackoff: { initialDelayMs: 100, maxDelayMs: 1000 },
    claimRetries: 2,
    claimBackoff: { initialDelayMs: 50, maxDelayMs: 200 },
    unavailableRequeueDelayMs: 500,
    commitDeadlineMs: 3000,
    releaseDeadlineMs: 1000,
    shutdownTimeoutMs: 5000,
  };
}

/** What the effect needs of `ctx.transaction`: a `pg` client's `query`. */
interface Queryable {
  query(text: string, values: unknown[]): Promise<unknown>;
}

export class ChaosConsumer extends ConsumerBase<ChaosBody, Queryable | undefined> {
  private readonly armed = new Set<ArmedFault>();
  /** Handlers between their effect and their commit outcome, by `key fence`. */
  private readonly window = new Set<string>();
  /** Marker inserts in flight, by key, so a kill after commit waits for its marker. */
  private readonly markers = new Map<string, Promise<void>>();
  /** Bodies (by identity) of deliveries whose ack the armed `kill_after_commit` precedes, with their key. */
  private readonly killAtAck = new WeakMap<Buffer, string>();
  /** Set when an armed kill fired: the worker dies as soon as the fault is logged. */
  private dying = false;
  handled = 0;

  constructor(
    options: ConsumerOptions,
    private readonly w: ChaosWorkerOptions,
  ) {
    super({ ...options, observers: [...(options.observers ?? []), { onEvent: (e) => this.onEvent(e) }] });
  }

  /** Arms a fault for the next eligible handler. */
  arm(fault: ArmedFault): void {
    this.armed.add(fault);
  }

  /** Wraps a source so the ack of a delivery marked for `kill_after_commit` kills first. */
  static killableSource(inner: MessageSource, consumer: () => ChaosConsumer): MessageSource {
    const wrap = (d: Delivery): Delivery => {
      const settler: Delivery['settler'] = {
        ack: async (info) => {
          await consumer().beforeAck(d.body);
          return d.settler.ack(info);
        },
        requeue: (delayMs, info) => d.settler.requeue(delayMs, info),
        reject: (info) => d.settler.reject(info),
      };
      return { ...d, settler };
    };
    const source: MessageSource = {
      system: inner.system,
      start: (sink: DeliverySink, opts) => inner.start({ dispatch: (d, p) => sink.dispatch(wrap(d), p), submit: (d, p) => sink.submit(wrap(d), p), claimBatch: (ds) => sink.claimBatch(ds) }, opts),
      stopIntake: () => inner.stopIntake(),
      close: () => inner.close(),
    };
    if (inner.isConsuming) source.isConsuming = () => inner.isConsuming!();
    return source;
  }

  async handle(message: Message<ChaosBody>, context: HandlerContext<Queryable | undefined>): Promise<Disposition> {
    const { control, rng, handler, ledger } = this.w;
    const key = rawKey(message.key);
    this.handled++;
    if (this.armed.delete('overrun')) {
      await this.w.ledger.fault(Date.now() - this.w.runStartedAt, 'overrun', control.id, `${key} for ${Math.round(this.w.leaseTtlMs * 1.75)} ms`);
      await control.overrun(message.key, Math.round(this.w.leaseTtlMs * 1.75));
    }
    const roll = rng.next();
    const workMs = roll < handler.longShare ? rng.int(1000, 4000) : roll < handler.longShare + handler.slowShare ? rng.int(20, 200) : rng.int(0, 10);
    await sleep(workMs);
    this.alive();
    if (message.body.p) throw new PermanentError(`poison message ${key}`);
    if (rng.next() < handler.retryableShare) throw new Error(`transient failure of ${key} (chaos)`);
    if (this.armed.has('kill_before_effect') && this.mayKill()) await this.fire('kill_before_effect', key);
    // A worker about to die applies nothing more (the kill is logged before it lands).
    if (this.dying) throw new WorkerDead();
    const slot = `${message.key} ${context.fencingToken}`;
    this.window.add(slot);
    if (this.w.effectInTransaction) {
      if (!context.transaction) throw new Error(`no ctx.transaction for ${key}: the claimer is not transactional`);
      await ledger.effect(key, context.fencingToken, context.attempt, context.transaction);
    } else {
      await ledger.effect(key, context.fencingToken, context.attempt);
    }
    this.alive();
    if (this.armed.has('kill_after_effect')) await this.fire('kill_after_effect', key);
    if (this.armed.has('kill_after_commit')) this.killAtAck.set(message.raw, message.key);
    return ack();
  }

  /** Runs before the broker ack of a delivery: fires an armed `kill_after_commit` on a marked one. */
  private async beforeAck(body: Buffer): Promise<void> {
    const key = this.killAtAck.get(body);
    if (key === undefined) return;
    this.killAtAck.delete(body);
    if (!this.armed.has('kill_after_commit') || !this.mayKill()) return; // a later handler will
    this.dying = true;
    await this.markers.get(key);
    await this.fire('kill_after_commit', rawKey(key));
  }

  private onEvent(e: ConsumerEvent): void {
    if (!e.key || this.w.control.dead) return;
    const slot = `${e.key} ${e.fencingToken}`;
    const key = rawKey(e.key);
    switch (e.type) {
      case 'committed': {
        this.window.delete(slot);
        const write = this.w.ledger.marker(key, e.fencingToken!).catch(() => undefined);
        this.markers.set(e.key, write);
        void write.then(() => {
          if (this.markers.get(e.key!) === write) this.markers.delete(e.key!);
        });
        break;
      }
      case 'lease_lost':
      case 'commit_failed':
        this.window.delete(slot);
        void this.w.ledger.outcome(key, e.fencingToken!, e.type).catch(() => undefined);
        break;
      default:
        break;
    }
  }

  private mayKill(): boolean {
    return !this.w.strict || this.window.size === 0;
  }

  /**
   * Kills the worker at an armed point. `dying` is set before the first await, so in a strict run
   * no handler enters the effect-to-commit window between the check and the kill.
   */
  private async fire(fault: ArmedFault, key: string): Promise<void> {
    this.dying = true;
    this.armed.delete(fault);
    await this.w.ledger.fault(Date.now() - this.w.runStartedAt, fault, this.w.control.id, key).catch(() => undefined);
    await this.w.control.kill(fault, key);
    throw new WorkerDead();
  }

  private alive(): void {
    if (this.w.control.dead) throw new WorkerDead();
  }
}
