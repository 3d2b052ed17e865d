/**
 * The verdict of a run, from its effect ledger (docs/guarantees.md, docs/chaos.md):
 *
 * - **Lost**: a published key with no effect that was not dead-lettered on purpose.
 * - **Duplicated effects**: per key, one effect is the real one (the committed one, or else the
 *   last); every other effect is a duplicate and must be explained by a documented window of its
 *   own acquisition: its worker was killed before committing (no commit marker), it lost its lease
 *   (`lease_lost`), or its commit could not be recorded because the store was down
 *   (`commit_failed`, allowed only in runs that took the store down). Anything else is
 *   unexplained, and so is any effect of an acquisition made after the key's committed one (a
 *   higher fencing token than the committed effect's): no effect repeats after a committed claim.
 * - In a **strict** run (faults limited to published duplicates, lost acks, closed connections,
 *   rebalances, and crashes before the effect or after the commit) any duplicate fails.
 *
 * Pure: used by the chaos harness (rows read back from PostgreSQL) and by the pipeline property
 * test (an in-memory ledger).
 */

/** One applied effect: a row of the effect table. */
export interface EffectRow {
  readonly key: string;
  /** Fencing token of the acquisition that applied it. */
  readonly fence: number;
  /** Which worker (process or in-process consumer) applied it. */
  readonly worker: string;
}

/** A commit marker: written after the claim's commit succeeded. */
export interface MarkerRow {
  readonly key: string;
  readonly fence: number;
}

/** A lease_lost or commit_failed outcome reported for one acquisition. */
export interface OutcomeRow {
  readonly key: string;
  readonly fence: number;
  readonly kind: 'lease_lost' | 'commit_failed';
}

export type Window = 'killed_before_commit' | 'lease_lost' | 'commit_failed';

export interface Duplicate {
  readonly key: string;
  readonly fence: number;
  readonly worker: string;
  /** The window that explains it, or why it is not explained. */
  readonly cause: Window | 'unexplained' | 'after_commit' | 'strict_run';
}

export interface VerdictInput {
  /** Every unique key the producer published. */
  readonly published: readonly string[];
  readonly effects: readonly EffectRow[];
  readonly markers: readonly MarkerRow[];
  readonly outcomes: readonly OutcomeRow[];
  /** Workers that were killed (SIGKILL, simulated crash) at some point. */
  readonly killedWorkers: ReadonlySet<string>;
  /** Keys found in the dead-letter queue, with their reasons. */
  readonly deadLettered: ReadonlyMap<string, readonly string[]>;
  /** Keys the producer meant to be dead-lettered (poison), which must have no effect. */
  readonly poison?: ReadonlySet<string>;
  /** Dead-letter reasons that count as "on purpose" (poison, permanent errors, exhausted retries). */
  readonly allowedDeadLetterReasons: ReadonlySet<string>;
  /** The run took the claim store down: `commit_failed` may explain a duplicate. */
  readonly storeFaults: boolean;
  /** Any duplicate fails the run. */
  readonly strict: boolean;
}

export interface Verdict {
  readonly published: number;
  readonly effects: number;
  readonly lost: readonly string[];
  readonly duplicates: readonly Duplicate[];
  readonly explained: Readonly<Record<Window, number>>;
  readonly unexplained: readonly Duplicate[];
  /** Keys dead-lettered with a reason outside the allowed set, or poison keys with an effect. */
  readonly badDeadLetters: readonly string[];
  readonly deadLettered: number;
  readonly ok: boolean;
}

const pairKey = (key: string, fence: number) => `${key}\u0000${fence}`;

export function judge(input: VerdictInput): Verdict {
  const markers = new Set(input.markers.map((m) => pairKey(m.key, m.fence)));
  const outcomes = new Map<string, Set<OutcomeRow['kind']>>();
  for (const o of input.outcomes) {
    const k = pairKey(o.key, o.fence);
    let set = outcomes.get(k);
    if (!set) outcomes.set(k, (set = new Set()));
    set.add(o.kind);
  }
  const byKey = new Map<string, EffectRow[]>();
  for (const e of input.effects) {
    let list = byKey.get(e.key);
    if (!list) byKey.set(e.key, (list = []));
    list.push(e);
  }

  const lost: string[] = [];
  const badDeadLetters: string[] = [];
  for (const key of input.published) {
    const reasons = input.deadLettered.get(key) ?? [];
    if (input.poison?.has(key)) {
      if ((byKey.get(key)?.length ?? 0) > 0) badDeadLetters.push(`${key}: poison key has an effect`);
      if (reasons.length === 0) lost.push(key);
      continue;
    }
    if ((byKey.get(key)?.length ?? 0) > 0) continue;
    if (reasons.length > 0 && reasons.every((r) => input.allowedDeadLetterReasons.has(r))) continue;
    if (reasons.length > 0) badDeadLetters.push(`${key}: dead-lettered as ${reasons.join(', ')}`);
    lost.push(key);
  }

  const duplicates: Duplicate[] = [];
  for (const [key, list] of byKey) {
    if (list.length < 2) continue;
    const committed = list.filter((e) => markers.has(pairKey(key, e.fence)));
    // The real effect: the committed one (the first, should there be two), else the last applied.
    const primary = committed[0] ?? list[list.length - 1]!;
    const committedFence = committed[0]?.fence;
    let primarySkipped = false;
    for (const e of list) {
      if (e === primary && !primarySkipped) {
        primarySkipped = true;
        continue;
      }
      let cause: Duplicate['cause'];
      const seen = outcomes.get(pairKey(key, e.fence));
      if (committedFence !== undefined && e.fence > committedFence) cause = 'after_commit';
      else if (markers.has(pairKey(key, e.fence))) cause = 'unexplained'; // a second committed effect, or one acquisition applying twice
      else if (input.strict) cause = 'strict_run';
      else if (input.killedWorkers.has(e.worker)) cause = 'killed_before_commit';
      else if (seen?.has('lease_lost')) cause = 'lease_lost';
      else if (seen?.has('commit_failed') && input.storeFaults) cause = 'commit_failed';
      else cause = 'unexplained';
      duplicates.push({ key, fence: e.fence, worker: e.worker, cause });
    }
  }
  const explained: Record<Window, number> = { killed_before_commit: 0, lease_lost: 0, commit_failed: 0 };
  const unexplained: Duplicate[] = [];
  for (const d of duplicates) {
    if (d.cause === 'killed_before_commit' || d.cause === 'lease_lost' || d.cause === 'commit_failed') explained[d.cause]++;
    else unexplained.push(d);
  }
  let deadLettered = 0;
  for (const reasons of input.deadLettered.values()) deadLettered += reasons.length;
  return {
    published: input.published.length,
    effects: input.effects.length,
    lost,
    duplicates,
    explained,
    unexplained,
    badDeadLetters,
    deadLettered,
    ok: lost.length === 0 && unexplained.length === 0 && badDeadLetters.length === 0,
  };
}
