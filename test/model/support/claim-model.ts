/**
 * Reference model of the claim state machine (docs/guarantees.md, src/claim/claimer.ts), written
 * independently of the claimers it checks.
 *
 * One record per key: absent, leased (L), done (D) or released (R), with its fencing token, owner
 * (the receipt that acquired it), attempt count, fingerprint, stored result, lease end and
 * retention end. One receipt model per acquired receipt, with the receipt-side settlement state
 * (committed, released, lost) that gives the repeat and ordering rules.
 *
 * Time is an interval. With a fake clock an operation happens at one known instant; against a
 * store that judges expiry on its own clock (Redis), the model only knows that the operation ran
 * between the local clock readings taken before the call and after the reply. An expiry that may
 * or may not have passed inside that interval is a fork: the model keeps every world consistent
 * with the outcomes seen so far (a small set of possible worlds) and fails only when no world can
 * produce the outcome the real claimer gave.
 */
import { type JsonValue } from '../../../src';
import { encodeResult } from '../../../src/adapter-kit';

/** [lo, hi] in milliseconds of the clock the model and the harness share. */
export interface Interval {
  readonly lo: number;
  readonly hi: number;
}

export const at = (t: number): Interval => ({ lo: t, hi: t });
const plus = (i: Interval, ms: number): Interval => ({ lo: i.lo + ms, hi: i.hi + ms });
const maxOf = (a: Interval, b: Interval): Interval => ({ lo: Math.max(a.lo, b.lo), hi: Math.max(a.hi, b.hi) });

export interface ModelRecord {
  readonly state: 'L' | 'D' | 'R';
  /** Fencing token reported by the real claimer for this acquisition. */
  readonly fence: number;
  /** Id of the receipt that acquired the key. */
  readonly owner: number;
  readonly attempts: number;
  readonly fingerprint: string | undefined;
  /** Encoded JSON result, for D. */
  readonly result: string | undefined;
  /** Lease end (meaningful for L). */
  readonly leaseEnd: Interval;
  /** When the record is forgotten. */
  readonly retainEnd: Interval;
}

export interface ModelReceipt {
  readonly id: number;
  readonly key: string;
  readonly fence: number;
  readonly doneTtlMs: number;
  readonly settled: 'committed' | 'released' | 'lost' | undefined;
}

/** One possible state of the store plus the receipts. Immutable: every step returns a new world. */
export interface World {
  readonly records: ReadonlyMap<string, ModelRecord>;
  readonly receipts: ReadonlyMap<number, ModelReceipt>;
  /** Logical clock, for harnesses whose time is itself an operation of the history. */
  readonly clock: number;
}

export const emptyWorld = (): World => ({ records: new Map(), receipts: new Map(), clock: 0 });

/** What an operation reports, as the model sees it. */
export type Outcome =
  | { readonly t: 'acquired'; readonly attempt: number; readonly receiptId: number; readonly fence: number }
  | { readonly t: 'done'; readonly result: string | undefined }
  | { readonly t: 'busy' }
  | { readonly t: 'conflict' }
  | { readonly t: 'ok' }
  | { readonly t: 'lease_lost' }
  | { readonly t: 'receipt_state' }
  | { readonly t: 'no_lease' };

export type Operation =
  | { readonly op: 'claim'; readonly key: string; readonly leaseTtlMs: number; readonly doneTtlMs: number; readonly fingerprint?: string }
  | { readonly op: 'commit'; readonly receiptId: number; readonly result?: JsonValue }
  | { readonly op: 'release'; readonly receiptId: number }
  | { readonly op: 'extend'; readonly receiptId: number; readonly ttlMs: number }
  /** An operation on the receipt of a done or busy claim. */
  | { readonly op: 'non_acquired'; readonly which: 'commit' | 'release' | 'extend' }
  /** Logical time passing (only for harnesses whose model time is the logical clock). */
  | { readonly op: 'advance'; readonly ms: number };

export function describeOperation(o: Operation): string {
  switch (o.op) {
    case 'claim':
      return `claim(${o.key}, lease ${o.leaseTtlMs}, done ${o.doneTtlMs}${o.fingerprint === undefined ? '' : `, fp ${o.fingerprint}`})`;
    case 'commit':
      return `commit(#${o.receiptId}${o.result === undefined ? '' : `, ${JSON.stringify(o.result)}`})`;
    case 'release':
      return `release(#${o.receiptId})`;
    case 'extend':
      return `extend(#${o.receiptId}, ${o.ttlMs})`;
    case 'non_acquired':
      return `${o.which} on a non-acquired receipt`;
    case 'advance':
      return `advance(${o.ms})`;
  }
}

export function describeOutcome(o: Outcome): string {
  switch (o.t) {
    case 'acquired':
      return `acquired(attempt ${o.attempt}, #${o.receiptId}, fence ${o.fence})`;
    case 'done':
      return `done(${o.result ?? 'no result'})`;
    default:
      return o.t;
  }
}

/** How the model compares time with expiries. */
export interface TimeRules {
  /**
   * Extra uncertainty around each expiry, ms: 0 for a fake clock; a few ms for a store whose
   * clock and expiry rounding differ slightly from the harness's clock readings.
   */
  readonly slackMs: number;
}

type Tri = 'yes' | 'no' | 'maybe';

/** Has `end` passed at `now`? (The claimers treat an expiry as passed from its instant on.) */
function passed(end: Interval, now: Interval, rules: TimeRules): Tri {
  if (now.lo >= end.hi + rules.slackMs) return 'yes';
  if (now.hi < end.lo - rules.slackMs) return 'no';
  return 'maybe';
}

function fork<T>(tri: Tri, ifYes: () => T[], ifNo: () => T[]): T[] {
  if (tri === 'yes') return ifYes();
  if (tri === 'no') return ifNo();
  return [...ifYes(), ...ifNo()];
}

/** A world after the operation, and the outcome it gives. `fresh` marks a receipt id to be bound. */
export interface Branch {
  readonly outcome: Outcome;
  readonly world: World;
}

function withRecord(w: World, key: string, rec: ModelRecord | undefined): World {
  const records = new Map(w.records);
  if (rec) records.set(key, rec);
  else records.delete(key);
  return { ...w, records };
}

function withReceipt(w: World, r: ModelReceipt): World {
  const receipts = new Map(w.receipts);
  receipts.set(r.id, r);
  return { ...w, receipts };
}

/**
 * Every world the store can be in for `key` at `now`: the record as it is, or forgotten when its
 * retention may have passed.
 */
function resolveRetention(w: World, key: string, now: Interval, rules: TimeRules): World[] {
  const rec = w.records.get(key);
  if (!rec) return [w];
  return fork(passed(rec.retainEnd, now, rules), () => [withRecord(w, key, undefined)], () => [w]);
}

/**
 * All branches of `operation` from world `w` at time `now`. For a claim that acquires, the
 * caller gives the receipt id and fencing token the real claimer reported (`acquiredAs`).
 */
export function step(w: World, operation: Operation, now: Interval, rules: TimeRules, acquiredAs?: { receiptId: number; fence: number }): Branch[] {
  switch (operation.op) {
    case 'advance':
      return [{ outcome: { t: 'ok' }, world: { ...w, clock: w.clock + operation.ms } }];
    case 'non_acquired':
      return [{ outcome: { t: 'no_lease' }, world: w }];
    case 'claim':
      return resolveRetention(w, operation.key, now, rules).flatMap((world) => claimIn(world, operation, now, rules, acquiredAs));
    case 'commit':
    case 'release':
    case 'extend':
      return receiptOperation(w, operation, now, rules);
  }
}

function claimIn(
  w: World,
  o: Extract<Operation, { op: 'claim' }>,
  now: Interval,
  rules: TimeRules,
  acquiredAs: { receiptId: number; fence: number } | undefined,
): Branch[] {
  const rec = w.records.get(o.key);
  if (rec && o.fingerprint !== undefined && rec.fingerprint !== undefined && rec.fingerprint !== o.fingerprint) {
    return [{ outcome: { t: 'conflict' }, world: w }];
  }
  if (rec?.state === 'D') return [{ outcome: { t: 'done', result: rec.result }, world: w }];
  const take = (): Branch[] => {
    // A takeover must carry a higher fencing token than the record it replaces.
    if (acquiredAs && rec && !(acquiredAs.fence > rec.fence)) return [];
    const attempt = (rec?.attempts ?? 0) + 1;
    // The receipt id and fence are the real claimer's; without them (the real side did not
    // acquire) the branch still exists so that its outcome can be compared.
    const receiptId = acquiredAs?.receiptId ?? -1;
    const fence = acquiredAs?.fence ?? -1;
    const next: ModelRecord = {
      state: 'L',
      fence,
      owner: receiptId,
      attempts: attempt,
      fingerprint: o.fingerprint ?? rec?.fingerprint,
      result: undefined,
      leaseEnd: plus(now, o.leaseTtlMs),
      retainEnd: plus(now, o.doneTtlMs),
    };
    const world = withReceipt(withRecord(w, o.key, next), { id: receiptId, key: o.key, fence, doneTtlMs: o.doneTtlMs, settled: undefined });
    return [{ outcome: { t: 'acquired', attempt, receiptId, fence }, world }];
  };
  if (rec?.state === 'L') {
    return fork(passed(rec.leaseEnd, now, rules), take, () => [{ outcome: { t: 'busy' }, world: w }]);
  }
  return take();
}

function receiptOperation(w: World, o: Extract<Operation, { op: 'commit' | 'release' | 'extend' }>, now: Interval, rules: TimeRules): Branch[] {
  const r = w.receipts.get(o.receiptId);
  if (!r) throw new Error(`model: unknown receipt #${o.receiptId}`);
  const settle = (world: World, settled: ModelReceipt['settled']): World => withReceipt(world, { ...r, settled });
  // Receipt-side rules first: they never reach the store.
  if (o.op === 'commit') {
    if (r.settled === 'committed') return [{ outcome: { t: 'ok' }, world: w }];
    if (r.settled === 'released') return [{ outcome: { t: 'receipt_state' }, world: w }];
    if (r.settled === 'lost') return [{ outcome: { t: 'lease_lost' }, world: w }];
  } else if (o.op === 'release') {
    if (r.settled === 'released' || r.settled === 'lost') return [{ outcome: { t: 'ok' }, world: w }];
    if (r.settled === 'committed') return [{ outcome: { t: 'receipt_state' }, world: w }];
  } else {
    if (r.settled === 'lost') return [{ outcome: { t: 'lease_lost' }, world: w }];
    if (r.settled) return [{ outcome: { t: 'receipt_state' }, world: w }];
  }
  return resolveRetention(w, r.key, now, rules).map((world) => {
    const rec = world.records.get(r.key);
    const owned = rec !== undefined && rec.owner === r.id && rec.fence === r.fence;
    if (o.op === 'commit') {
      if (!owned || rec.state === 'R') return { outcome: { t: 'lease_lost' }, world: settle(world, 'lost') };
      const done: ModelRecord = { ...rec, state: 'D', result: encodeResult(o.result, Number.MAX_SAFE_INTEGER), retainEnd: plus(now, r.doneTtlMs) };
      return { outcome: { t: 'ok' }, world: settle(withRecord(world, r.key, done), 'committed') };
    }
    if (o.op === 'release') {
      if (!owned || rec.state !== 'L') return { outcome: { t: 'ok' }, world: settle(world, 'lost') };
      return { outcome: { t: 'ok' }, world: settle(withRecord(world, r.key, { ...rec, state: 'R' }), 'released') };
    }
    if (!owned || rec.state !== 'L') return { outcome: { t: 'lease_lost' }, world: settle(world, 'lost') };
    const leaseEnd = plus(now, o.ttlMs);
    return { outcome: { t: 'ok' }, world: withRecord(world, r.key, { ...rec, leaseEnd, retainEnd: maxOf(rec.retainEnd, leaseEnd) }) };
  });
}

/** True when two outcomes are the same observation (receipt ids and fences compared too). */
export function sameOutcome(a: Outcome, b: Outcome): boolean {
  if (a.t !== b.t) return false;
  if (a.t === 'acquired' && b.t === 'acquired') return a.attempt === b.attempt && a.receiptId === b.receiptId && a.fence === b.fence;
  if (a.t === 'done' && b.t === 'done') return a.result === b.result;
  return true;
}

/** Canonical text of a world, to deduplicate the set of possible worlds. */
export function worldKey(w: World): string {
  const records = [...w.records.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
  const receipts = [...w.receipts.values()].filter((r) => r.settled !== undefined).map((r) => `${r.id}:${r.settled}`).sort();
  return JSON.stringify([w.clock, records, receipts]);
}

/**
 * The set of worlds consistent with every outcome observed so far. `observe` applies one
 * operation with the outcome the real claimer gave and keeps the worlds that agree.
 */
export class PossibleWorlds {
  private worlds: World[] = [emptyWorld()];
  private readonly trail: string[] = [];

  constructor(
    private readonly rules: TimeRules,
    private readonly maxWorlds = 256,
  ) {}

  get size(): number {
    return this.worlds.length;
  }

  /** The steps applied so far, for failure messages. */
  get history(): readonly string[] {
    return this.trail;
  }

  /** Receipts that are acquired, not settled, in every world (the model agrees on them). */
  receiptIds(): number[] {
    const first = this.worlds[0];
    return first ? [...first.receipts.keys()] : [];
  }

  /**
   * Applies `operation`, observed to give `actual` during `now`.
   * @throws Error with the history when no possible world gives `actual`
   */
  observe(operation: Operation, now: Interval, actual: Outcome): void {
    const acquiredAs = actual.t === 'acquired' ? { receiptId: actual.receiptId, fence: actual.fence } : undefined;
    const next = new Map<string, World>();
    const expected = new Set<string>();
    for (const w of this.worlds) {
      for (const b of step(w, operation, now, this.rules, acquiredAs)) {
        expected.add(describeOutcome(b.outcome));
        if (sameOutcome(b.outcome, actual)) next.set(worldKey(b.world), b.world);
      }
    }
    this.trail.push(`${describeOperation(operation)} @[${now.lo.toFixed(1)}, ${now.hi.toFixed(1)}] → ${describeOutcome(actual)}`);
    if (next.size === 0) {
      throw new Error(
        `the claimer answered ${describeOutcome(actual)} to ${describeOperation(operation)}; the model allows only ${[...expected].join(' | ')}\nhistory:\n  ${this.trail.join('\n  ')}`,
      );
    }
    if (next.size > this.maxWorlds) throw new Error(`model: more than ${this.maxWorlds} possible worlds; lower the time uncertainty`);
    this.worlds = [...next.values()];
  }
}
