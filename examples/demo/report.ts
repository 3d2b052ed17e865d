/**
 * The demo's closing table and verdict.
 */
import type { CrashPoint } from './demo-consumer';
import type { EffectLedger } from './ledger';

export interface RunStats {
  published: number;
  delivered: number;
  /** Deliveries settled for good (ack or dead-letter) by a live worker. */
  finals: number;
  handlerRuns: number;
  duplicatesSkipped: number;
  busyRequeues: number;
  retries: number;
  deadLettered: number;
  commitFailed: number;
  leaseLost: number;
  crashes: Record<CrashPoint, number>;
}

export interface ReportInput {
  readonly label: string;
  readonly options: { messages: number; consumers: number; seed: number; crashRate: number };
  readonly stats: RunStats;
  readonly ledger: EffectLedger;
  readonly uniqueKeys: readonly string[];
  readonly poisonKeys: readonly string[];
  readonly invalid: number;
  readonly deadLetters: readonly { key: string | undefined; reason: string }[];
  readonly elapsedMs: number;
  readonly timedOut: boolean;
}

/** Prints the table and returns the exit code: 0 when nothing was lost and every duplicate is explained. */
export function printReport(input: ReportInput): number {
  const { stats, ledger } = input;
  const ns = (k: string) => `payments:${k}`;
  const lost = input.uniqueKeys.filter((k) => ledger.effectCount(ns(k)) === 0);
  const poisonApplied = input.poisonKeys.filter((k) => ledger.effectCount(ns(k)) > 0);
  const dlqKeys = new Set(input.deadLetters.map((d) => d.key));
  const poisonMissingFromDlq = input.poisonKeys.filter((k) => !dlqKeys.has(k));
  const duplicates = ledger.duplicates();
  const explained = duplicates.filter((d) => d.cause === 'crash_after_effect_before_commit').length;
  const unexplained = duplicates.filter((d) => d.cause === 'unexplained');
  const reasons = new Map<string, number>();
  for (const d of input.deadLetters) reasons.set(d.reason, (reasons.get(d.reason) ?? 0) + 1);

  const rows: [string, string | number][] = [
    ['stack', input.label],
    ['consumers at once / seed / crash rate per point', `${input.options.consumers} / ${input.options.seed} / ${input.options.crashRate}`],
    ['messages published (incl. duplicates, poison, invalid)', stats.published],
    ['deliveries (incl. redeliveries)', stats.delivered],
    ['handler runs', stats.handlerRuns],
    ['duplicates skipped (done, handler not run)', stats.duplicatesSkipped],
    ['busy requeues (lease held elsewhere)', stats.busyRequeues],
    ['retries after a handler failure', stats.retries],
    ['dead-letter queue at the end', `${input.deadLetters.length} (${[...reasons].map(([r, n]) => `${r}: ${n}`).join(', ')})`],
    ['crashes: before the effect', stats.crashes.before_effect],
    ['crashes: after the effect, before the commit', stats.crashes.after_effect_before_commit],
    ['crashes: after the commit, before the ack', stats.crashes.after_commit_before_ack],
    ['commit_failed / lease_lost (live workers)', `${stats.commitFailed} / ${stats.leaseLost}`],
    ['unique payments', input.uniqueKeys.length],
    ['effects applied', ledger.totalEffects],
    ['payments lost (no effect)', lost.length],
    ['duplicated effects: crash after effect, before commit', explained],
    ['duplicated effects: any other cause', unexplained.length],
    ['elapsed', `${(input.elapsedMs / 1000).toFixed(1)} s`],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  console.log('');
  for (const [k, v] of rows) console.log(`  ${k.padEnd(width)}  ${v}`);
  console.log('');

  const problems: string[] = [];
  if (input.timedOut) problems.push(`timed out with ${stats.published - stats.finals} messages not settled`);
  if (lost.length > 0) problems.push(`${lost.length} payments lost, e.g. ${lost.slice(0, 3).join(', ')}`);
  if (unexplained.length > 0) problems.push(`${unexplained.length} duplicated effects not explained by the documented window, e.g. ${unexplained.slice(0, 3).map((d) => d.key).join(', ')}`);
  if (poisonApplied.length > 0) problems.push(`${poisonApplied.length} poison payments applied`);
  if (poisonMissingFromDlq.length > 0) problems.push(`${poisonMissingFromDlq.length} poison payments missing from the dead-letter queue`);
  const expectedDead = input.poisonKeys.length + input.invalid;
  if (input.deadLetters.length < expectedDead) problems.push(`dead-letter queue holds ${input.deadLetters.length} messages, expected at least ${expectedDead}`);
  if (problems.length === 0) {
    console.log(`VERDICT: PASS — no payment lost; ${explained} duplicated effect(s), all from crashes between the effect and the commit (the documented window).`);
    return 0;
  }
  console.log(`VERDICT: FAIL\n- ${problems.join('\n- ')}`);
  return 1;
}
