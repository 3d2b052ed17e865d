/**
 * The demo's closing table and verdict.
 */
import type { CrashPoint } from './demo-consumer';
import type { EffectLedger } from './ledger';

/** What the messages dead-lettered for each reason are, in the demo. */
const DEAD_LETTER_WHAT: Readonly<Record<string, string>> = {
  permanent_error: 'poison payments',
  invalid_body: 'undecodable messages',
  missing_key: 'message without a key',
};

export interface RunStats {
  published: number;
  delivered: number;
  /** Deliveries settled for good (ack or dead-letter) by a live worker. */
  finals: number;
  handlerRuns: number;
  duplicatesSkipped: number;
  busyRequeues: number;
  /** Requeues by a live worker, by cause (busy, retry, claimer_unavailable, shutdown, lease_lost). */
  requeues: Record<string, number>;
  deadLettered: number;
  commitFailed: number;
  leaseLost: number;
  /** Effect rows written through a claim's transaction (the inbox), committed or not. */
  effectWrites: number;
  crashes: Record<CrashPoint, number>;
}

export interface ReportInput {
  readonly label: string;
  /** The transactional inbox: effects commit with their claim, so not one may repeat. */
  readonly inbox: boolean;
  readonly options: { messages: number; consumers: number; seed: number; crashRate: number };
  /** Extra copies of unique payments that were published. */
  readonly copies: number;
  /** The consumers' busyRequeueDelayMs and leaseTtlMs, for the explanations. */
  readonly busyRequeueDelayMs: number;
  readonly leaseTtlMs: number;
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

  // Dead letters by reason: copies, and the distinct messages they are copies of.
  const byReason = new Map<string, { copies: number; keys: Set<string | undefined> }>();
  for (const d of input.deadLetters) {
    const entry = byReason.get(d.reason) ?? { copies: 0, keys: new Set() };
    entry.copies++;
    entry.keys.add(d.key);
    byReason.set(d.reason, entry);
  }
  const unique = input.uniqueKeys.length;
  const poison = input.poisonKeys.length;
  const redeliveries = stats.delivered - stats.published;
  const extraRuns = stats.handlerRuns - unique - poison;
  const crashes = stats.crashes.before_effect + stats.crashes.after_effect_before_commit + stats.crashes.after_commit_before_ack;
  const otherRequeues = Object.entries(stats.requeues)
    .filter(([cause, n]) => cause !== 'busy' && n > 0)
    .map(([cause, n]) => `${cause} ${n}`);
  const doubled = [...byReason.values()].reduce((n, e) => n + e.copies - e.keys.size, 0);

  const rows: [string, string | number][] = [
    ['stack', input.label],
    ['consumers at once / seed / crash rate per point', `${input.options.consumers} / ${input.options.seed} / ${input.options.crashRate}`],
    ['messages published (incl. duplicates, poison, invalid)', stats.published],
    ['deliveries (incl. redeliveries)', stats.delivered],
    ['handler runs', stats.handlerRuns],
    ['duplicates skipped (done, handler not run)', stats.duplicatesSkipped],
    ['busy requeues (lease held elsewhere)', stats.busyRequeues],
    ['other requeues (live workers, by cause)', otherRequeues.length > 0 ? otherRequeues.join(', ') : 0],
    ['dead-letter queue at the end', `${input.deadLetters.length} (${[...reasons].map(([r, n]) => `${r}: ${n}`).join(', ')})`],
    ['crashes: before the effect', stats.crashes.before_effect],
    ['crashes: after the effect, before the commit', stats.crashes.after_effect_before_commit],
    ['crashes: after the commit, before the ack', stats.crashes.after_commit_before_ack],
    ['commit_failed / lease_lost (live workers)', `${stats.commitFailed} / ${stats.leaseLost}`],
    ['unique payments', unique],
    ['effects applied', ledger.totalEffects],
    ...(input.inbox ? ([['effect rows written, then rolled back (crashes)', stats.effectWrites - ledger.totalEffects]] as [string, string | number][]) : []),
    ['payments lost (no effect)', lost.length],
    ['duplicated effects: crash after effect, before commit', explained],
    ['duplicated effects: any other cause', unexplained.length],
    ['elapsed', `${(input.elapsedMs / 1000).toFixed(1)} s`],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  console.log('');
  for (const [k, v] of rows) console.log(`  ${k.padEnd(width)}  ${v}`);

  // Where each count comes from, for a first reading.
  const deadLetterParts = [...byReason].map(([reason, e]) => `${reason} ${e.copies} (of ${e.keys.size} ${DEAD_LETTER_WHAT[reason] ?? 'messages'})`);
  const notes: [string, string][] = [
    ['published', `${stats.published} = ${unique} payments + ${input.copies} extra copies of some (as a producer retry sends) + ${poison} poison + ${input.invalid} invalid`],
    ['deliveries', `${stats.delivered} = ${stats.published} published + ${redeliveries} redeliveries (after a requeue, or held by one of the ${crashes} crashed workers)`],
    ['handler runs', `${stats.handlerRuns} = ${unique + poison} payments and poison payments once each + ${extraRuns} again: runs cut short by a crash (it stops every message its worker held)`],
    ['duplicates', `${stats.duplicatesSkipped} deliveries of a key already committed: the ${input.copies} extra copies, and redeliveries after a crash`],
    ...(input.label.startsWith('Kafka') ? ([['', '(a crash re-delivers every record after its partitions\' last committed offset, settled or not)']] as [string, string][]) : []),
    ['busy', `${stats.busyRequeues} requeues (every ${input.busyRequeueDelayMs} ms) while another worker held the key's lease, e.g. until a crashed`],
    ['', `worker's ${input.leaseTtlMs} ms lease ran out; the handler did not run: neither an attempt nor a duplicate`],
    ['dead letters', `${input.deadLetters.length} = ${deadLetterParts.join(' + ')}`],
    ...(doubled > 0
      ? ([
          ['', `${doubled} dead-lettered twice: a worker crashed after writing the dead-letter copy and before settling the original,`],
          ['', 'so the original came back and was dead-lettered again (dead-lettering is at-least-once; both copies share the key)'],
        ] as [string, string][])
      : []),
    ['effects', `${ledger.totalEffects} = ${unique - lost.length} payments once + ${ledger.totalEffects - (unique - lost.length)} again, each after a crash between the effect and its commit`],
  ];
  console.log('\n  How the numbers add up:');
  const noteWidth = Math.max(...notes.map(([k]) => k.length));
  for (const [k, v] of notes) console.log(`    ${k.padEnd(noteWidth)}  ${v}`);
  console.log('');

  const problems: string[] = [];
  if (input.timedOut) problems.push(`timed out with ${stats.published - stats.finals} messages not settled`);
  if (lost.length > 0) problems.push(`${lost.length} payments lost, e.g. ${lost.slice(0, 3).join(', ')}`);
  if (input.inbox && explained > 0) problems.push(`${explained} duplicated effects: with the inbox an effect row commits with its claim, so a crash before the commit rolls it back and none may repeat`);
  if (unexplained.length > 0) problems.push(`${unexplained.length} duplicated effects not explained by the documented window, e.g. ${unexplained.slice(0, 3).map((d) => d.key).join(', ')}`);
  if (poisonApplied.length > 0) problems.push(`${poisonApplied.length} poison payments applied`);
  if (poisonMissingFromDlq.length > 0) problems.push(`${poisonMissingFromDlq.length} poison payments missing from the dead-letter queue`);
  const expectedDead = input.poisonKeys.length + input.invalid;
  if (input.deadLetters.length < expectedDead) problems.push(`dead-letter queue holds ${input.deadLetters.length} messages, expected at least ${expectedDead}`);
  if (problems.length === 0 && input.inbox) {
    console.log(`VERDICT: PASS — no payment lost; 0 duplicated effects: each effect row committed in the transaction of its claim, so the ${stats.crashes.after_effect_before_commit} crash(es) between the effect and the commit rolled their effect back.`);
    return 0;
  }
  if (problems.length === 0) {
    console.log(`VERDICT: PASS — no payment lost; ${explained} duplicated effect(s), all from crashes between the effect and the commit (the documented window).`);
    return 0;
  }
  console.log(`VERDICT: FAIL\n- ${problems.join('\n- ')}`);
  return 1;
}
