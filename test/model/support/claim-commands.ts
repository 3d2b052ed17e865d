/**
 * fast-check commands over the claim model: claim, commit, release, extend, an operation on a
 * non-acquired receipt, time passing, and a crash (the owner abandons its receipt: it never
 * calls it again, and the lease must run out).
 *
 * The same commands drive any claimer; what differs is the clock (`ClockControl`): a fake clock
 * that the model reads exactly, or real time with a store judging expiry on its own clock.
 */
import fc from 'fast-check';
import type { JsonValue } from '../../../src';
import { type Interval, type Operation, PossibleWorlds, type TimeRules } from './claim-model';
import type { ClaimerDriver } from './claimer-driver';

/** How the harness reads and moves time. */
export interface ClockControl {
  /** The clock now, in the model's milliseconds. */
  now(): number;
  /** Lets `ms` pass (a fake clock jumps; real time sleeps). */
  advance(ms: number): Promise<void>;
}

export interface ClaimModelState {
  readonly worlds: PossibleWorlds;
  /** Acquired receipts the harness may still use (a crashed owner's receipt is dropped). */
  usable: number[];
  hasNonAcquired: boolean;
}

export interface ClaimRealSystem {
  readonly driver: ClaimerDriver;
  readonly clock: ClockControl;
}

type StoreOperation = Exclude<Operation, { op: 'advance' }>;

/** Runs one store operation on the real claimer and feeds the answer to the model. */
async function observe(m: ClaimModelState, r: ClaimRealSystem, operation: StoreOperation): Promise<void> {
  const lo = r.clock.now();
  const outcome = await r.driver.run(operation);
  const now: Interval = { lo, hi: r.clock.now() };
  m.worlds.observe(operation, now, outcome);
  if (outcome.t === 'acquired') m.usable.push(outcome.receiptId);
  if (operation.op === 'claim' && (outcome.t === 'done' || outcome.t === 'busy')) m.hasNonAcquired = true;
}

const pick = (m: ClaimModelState, index: number): number => m.usable[index % m.usable.length]!;

class ClaimCommand implements fc.AsyncCommand<ClaimModelState, ClaimRealSystem> {
  constructor(private readonly o: Extract<Operation, { op: 'claim' }>) {}
  check = () => true;
  run = (m: ClaimModelState, r: ClaimRealSystem) => observe(m, r, this.o);
  toString = () => `claim(${this.o.key}, ${this.o.leaseTtlMs}, ${this.o.doneTtlMs}${this.o.fingerprint ? `, ${this.o.fingerprint}` : ''})`;
}

class ReceiptCommand implements fc.AsyncCommand<ClaimModelState, ClaimRealSystem> {
  constructor(
    private readonly kind: 'commit' | 'release' | 'extend',
    private readonly index: number,
    private readonly result: JsonValue | undefined,
    private readonly ttlMs: number,
  ) {}
  check = (m: Readonly<ClaimModelState>) => m.usable.length > 0;
  run = (m: ClaimModelState, r: ClaimRealSystem) => {
    const receiptId = pick(m, this.index);
    const operation: StoreOperation =
      this.kind === 'commit'
        ? { op: 'commit', receiptId, ...(this.result === undefined ? {} : { result: this.result }) }
        : this.kind === 'release'
          ? { op: 'release', receiptId }
          : { op: 'extend', receiptId, ttlMs: this.ttlMs };
    return observe(m, r, operation);
  };
  toString = () => `${this.kind}(receipt[${this.index}]${this.kind === 'extend' ? `, ${this.ttlMs}` : ''})`;
}

class CrashCommand implements fc.AsyncCommand<ClaimModelState, ClaimRealSystem> {
  constructor(private readonly index: number) {}
  check = (m: Readonly<ClaimModelState>) => m.usable.length > 0;
  run = async (m: ClaimModelState) => {
    const id = pick(m, this.index);
    m.usable = m.usable.filter((x) => x !== id);
  };
  toString = () => `crash(receipt[${this.index}])`;
}

class NonAcquiredCommand implements fc.AsyncCommand<ClaimModelState, ClaimRealSystem> {
  constructor(private readonly which: 'commit' | 'release' | 'extend') {}
  check = (m: Readonly<ClaimModelState>) => m.hasNonAcquired;
  run = (m: ClaimModelState, r: ClaimRealSystem) => observe(m, r, { op: 'non_acquired', which: this.which });
  toString = () => `${this.which}(non-acquired)`;
}

class AdvanceCommand implements fc.AsyncCommand<ClaimModelState, ClaimRealSystem> {
  constructor(private readonly ms: number) {}
  check = () => true;
  run = async (_m: ClaimModelState, r: ClaimRealSystem) => r.clock.advance(this.ms);
  toString = () => `advance(${this.ms})`;
}

/** Shape of generated runs. */
export interface CommandSpace {
  /** Model keys (a few, so operations collide). */
  readonly keys: readonly string[];
  /** Lease TTLs to claim and extend with, ms (each ≥ 100). */
  readonly leaseTtlsMs: readonly number[];
  /** Done TTLs, ms (≥ the largest lease TTL). */
  readonly doneTtlsMs: readonly number[];
  /** Time steps, ms. */
  readonly advancesMs: readonly number[];
  readonly maxCommands: number;
}

/** The commands arbitrary for `space`. */
export function claimCommands(space: CommandSpace): fc.Arbitrary<Iterable<fc.AsyncCommand<ClaimModelState, ClaimRealSystem>>> {
  const result: fc.Arbitrary<JsonValue | undefined> = fc.oneof(
    fc.constant(undefined),
    fc.constant(null),
    fc.record({ n: fc.integer({ min: 0, max: 9 }), s: fc.constantFrom('a', 'é', '{x}') }),
  );
  const index = fc.nat({ max: 7 });
  return fc.commands(
    [
      fc
        .record({
          key: fc.constantFrom(...space.keys),
          leaseTtlMs: fc.constantFrom(...space.leaseTtlsMs),
          doneTtlMs: fc.constantFrom(...space.doneTtlsMs),
          fingerprint: fc.option(fc.constantFrom('fp-1', 'fp-2'), { freq: 3, nil: undefined }),
        })
        .map((o) => new ClaimCommand({ op: 'claim', ...o })),
      fc.tuple(index, result).map(([i, value]) => new ReceiptCommand('commit', i, value, 0)),
      index.map((i) => new ReceiptCommand('release', i, undefined, 0)),
      fc.tuple(index, fc.constantFrom(...space.leaseTtlsMs)).map(([i, ttl]) => new ReceiptCommand('extend', i, undefined, ttl)),
      index.map((i) => new CrashCommand(i)),
      fc.constantFrom('commit' as const, 'release' as const, 'extend' as const).map((w) => new NonAcquiredCommand(w)),
      fc.constantFrom(...space.advancesMs).map((ms) => new AdvanceCommand(ms)),
    ],
    { maxCommands: space.maxCommands, size: 'max' },
  );
}

/** A fresh model state. */
export function initialModel(rules: TimeRules): ClaimModelState {
  return { worlds: new PossibleWorlds(rules), usable: [], hasNonAcquired: false };
}
