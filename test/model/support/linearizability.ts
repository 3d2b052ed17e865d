/**
 * Linearizability check of a concurrent history against the claim model (Wing & Gong search):
 * the history is correct when some total order of its operations, consistent with real time (an
 * operation that returned before another was invoked comes first), makes the model give every
 * outcome that was observed.
 */
import { describeOperation, describeOutcome, type Interval, type Operation, type Outcome, sameOutcome, step, type TimeRules, type World, emptyWorld, worldKey } from './claim-model';

/** One completed operation of a concurrent history. */
export interface HistoryEntry {
  readonly actor: number;
  readonly operation: Operation;
  /** Position of the invocation in the history's event sequence. */
  readonly invokedAt: number;
  /** Position of the response; always after invokedAt. */
  readonly returnedAt: number;
  readonly outcome: Outcome;
}

export interface LinearizabilityResult {
  readonly ok: boolean;
  /** States explored. */
  readonly explored: number;
  /** A readable history, for failure messages. */
  readonly text: string;
}

/**
 * Searches for a linearization of `history`. `timeOf(world)` gives the instant an operation
 * linearized in `world` happens at (for example the world's logical clock).
 * @throws Error when the search passes `budget` states (the history is too concurrent to decide)
 */
export function checkLinearizable(history: readonly HistoryEntry[], rules: TimeRules, timeOf: (w: World) => Interval, budget = 200_000): LinearizabilityResult {
  const failed = new Set<string>();
  let explored = 0;
  const entries = [...history].sort((a, b) => a.invokedAt - b.invokedAt);

  const search = (worlds: World[], remaining: readonly number[]): boolean => {
    if (remaining.length === 0) return true;
    const memo = `${remaining.join(',')}|${worlds.map(worldKey).sort().join('|')}`;
    if (failed.has(memo)) return false;
    if (++explored > budget) throw new Error(`linearizability search passed ${budget} states`);
    const firstReturn = Math.min(...remaining.map((i) => entries[i]!.returnedAt));
    for (const i of remaining) {
      const e = entries[i]!;
      if (e.invokedAt > firstReturn) continue; // something returned before e began: it must come first
      const acquiredAs = e.outcome.t === 'acquired' ? { receiptId: e.outcome.receiptId, fence: e.outcome.fence } : undefined;
      const next = new Map<string, World>();
      for (const w of worlds) {
        for (const b of step(w, e.operation, timeOf(w), rules, acquiredAs)) {
          if (sameOutcome(b.outcome, e.outcome)) next.set(worldKey(b.world), b.world);
        }
      }
      if (next.size > 0 && search([...next.values()], remaining.filter((j) => j !== i))) return true;
    }
    failed.add(memo);
    return false;
  };

  const ok = search([emptyWorld()], entries.map((_, i) => i));
  const text = entries
    .map((e) => `  [${e.invokedAt}..${e.returnedAt}] actor ${e.actor}: ${describeOperation(e.operation)} → ${describeOutcome(e.outcome)}`)
    .join('\n');
  return { ok, explored, text };
}
