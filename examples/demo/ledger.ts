/**
 * The demo's effect ledger: every applied effect, which worker applied it, whether that
 * worker's claim was then committed, and whether the worker crashed in between.
 */

export interface EffectRecord {
  readonly worker: number;
  readonly fencingToken: number;
  committed: boolean;
}

export type DuplicateCause = 'crash_after_effect_before_commit' | 'unexplained';

export class EffectLedger {
  private readonly effects = new Map<string, EffectRecord[]>();
  /** Workers that crashed, by id. */
  readonly crashedWorkers = new Set<number>();

  /** A ledger of effects a store committed (the inbox's effect rows), each committed by its worker. */
  static fromRows(rows: readonly { key: string; worker: number; fencingToken: number }[], crashedWorkers: ReadonlySet<number>): EffectLedger {
    const ledger = new EffectLedger();
    for (const worker of crashedWorkers) ledger.crashedWorkers.add(worker);
    for (const row of rows) {
      ledger.apply(row.key, row.worker, row.fencingToken);
      ledger.committed(row.key, row.worker);
    }
    return ledger;
  }

  /** Records the business effect (the demo's "payment applied"). */
  apply(key: string, worker: number, fencingToken: number): void {
    let list = this.effects.get(key);
    if (!list) this.effects.set(key, (list = []));
    list.push({ worker, fencingToken, committed: false });
  }

  /** Marks the effect of `worker` on `key` as committed (called after the claim commit succeeded). */
  committed(key: string, worker: number): void {
    const list = this.effects.get(key);
    const record = list?.filter((r) => r.worker === worker).at(-1);
    if (record) record.committed = true;
  }

  effectCount(key: string): number {
    return this.effects.get(key)?.length ?? 0;
  }

  get totalEffects(): number {
    let n = 0;
    for (const list of this.effects.values()) n += list.length;
    return n;
  }

  /**
   * Each effect beyond the first of a key, with its cause. An extra effect is explained only when
   * the effect before it was never committed and its worker crashed (the window after the effect
   * and before the commit that no claim store can close). Anything else is unexplained.
   */
  duplicates(): { key: string; cause: DuplicateCause }[] {
    const out: { key: string; cause: DuplicateCause }[] = [];
    for (const [key, list] of this.effects) {
      for (let i = 1; i < list.length; i++) {
        const previous = list[i - 1]!;
        const explained = !previous.committed && this.crashedWorkers.has(previous.worker);
        out.push({ key, cause: explained ? 'crash_after_effect_before_commit' : 'unexplained' });
      }
    }
    return out;
  }
}
