/**
 * The fault-injection harness (docs/chaos.md):
 *
 *   npx ts-node --transpile-only test/chaos/run.ts --profile ci|long --stack <name>|all [--seed N]
 *     [--client kafkajs|platformatic|platformatic-kip848]
 *
 * (stack names: stacks/registry.ts). `--client` chooses what the Kafka stacks' consumers run on
 * (kafka-client.ts; @platformatic/kafka needs Node >= 22.22); with a client other than kafkajs,
 * `--stack all` runs the Kafka stacks only, the others do not use it.
 *
 * For each stack and scenario: consumer processes, a producer with unique keys and injected
 * duplicates, an effect ledger in PostgreSQL, and a seeded fault schedule; then the verdict
 * (test/chaos/verdict.ts) and a table per stack. Exits 1 on any lost message, unexplained
 * duplicate, bad dead letter, a run that did not drain or a gated run whose gate answered no
 * claim; 2 when the harness itself failed.
 */
import { randomBytes } from 'node:crypto';
import { Command, Option } from 'commander';
import { Pool } from 'pg';
import { CHAOS_KAFKA_CLIENTS, type ChaosKafkaClient } from './kafka-client';
import { pgConfig, prepareLedger, readFaultCounts, readLedger } from './ledger';
import { judgedStrictly, profile, type ProfileName, type ScenarioProfile, type StackName, STACKS } from './profiles';
import type { FaultKind } from './schedule';
import { stackSpec } from './stacks/registry';
import type { StackResult } from './stacks/stack';
import { judge, type Verdict } from './verdict';

interface Options {
  profile: ProfileName;
  stack: StackName | 'all';
  seed: number;
  scale: number;
  client: ChaosKafkaClient;
  scenario?: string;
}

interface Row {
  readonly stack: StackName;
  readonly scenario: ScenarioProfile['name'];
  readonly runId: string;
  readonly result: StackResult;
  readonly verdict: Verdict;
  /** Faults that fired, by kind (from the fault log). */
  readonly fired: Readonly<Record<string, number>>;
  /** The verdict held, the run drained, and (gated stacks) the gate answered claims. */
  readonly ok: boolean;
}

/**
 * A gated run proves something about the gate only if the gate answered claims: one whose gate
 * answered none (never reachable, or bypassed) fails, whatever its ledger says.
 */
function gateProblem(stack: StackName, result: StackResult): string | undefined {
  if (stackSpec(stack).store !== 'gated') return undefined;
  if (!result.gate) return 'no worker reported gate counters';
  return result.gate.gateAnswers > 0 ? undefined : 'the gate answered no claim';
}

/** What fails an outbox run beyond the ledger's verdict: phantoms, order broken, rows left. */
function outboxProblem(result: StackResult): string | undefined {
  const o = result.outbox;
  if (!o) return undefined;
  const problems: string[] = [];
  if (o.phantoms.length > 0) problems.push(`${o.phantoms.length} PHANTOM(S) (rolled-back messages applied): ${o.phantoms.slice(0, 5).join(', ')}`);
  if (o.orderViolations.length > 0) problems.push(`${o.orderViolations.length} ORDER VIOLATION(S): ${o.orderViolations.slice(0, 5).join('; ')}`);
  if (o.rowsLeft > 0) problems.push(`${o.rowsLeft} row(s) left in the outbox (${o.deadRows} dead)`);
  return problems.length > 0 ? problems.join('; ') : undefined;
}

function outboxText(result: StackResult): string {
  const o = result.outbox;
  if (!o) return '';
  return `; outbox: ${o.committed} committed, ${o.rolledBack} rolled back, ${o.phantoms.length} phantoms, ${o.orderViolations.length} order violations, ${o.republishesDeduplicated} republishes deduplicated downstream, ${o.rowsLeft} rows left`;
}

function gateText(result: StackResult): string {
  const g = result.gate;
  if (!g) return '';
  return `; gate: ${g.gateAnswers} answered by Redis alone, ${g.truthClaims} decided by PostgreSQL, ${g.repopulated} repopulated, ${g.fallbackClaims} fallback (PostgreSQL alone), ${g.conflictChecks} conflict checks, ${g.gateFailures} gate failures`;
}

async function runStack(stack: StackName, scenario: ScenarioProfile, runId: string, seed: number, client: ChaosKafkaClient): Promise<StackResult> {
  const spec = stackSpec(stack);
  if (spec.outbox) return (await import('./stacks/outbox')).runOutboxStack(spec, runId, seed, scenario, client);
  switch (spec.broker) {
    case 'memory':
      return (await import('./stacks/memory')).runMemoryStack(runId, seed, scenario);
    case 'rabbitmq':
      return (await import('./stacks/rabbitmq')).runRabbitMqStack(spec, runId, seed, scenario);
    case 'kafka':
      return (await import('./stacks/kafka')).runKafkaStack(spec, runId, seed, scenario, client);
  }
}

function faultText(faults: Readonly<Record<string, number>>): string {
  const parts = Object.entries(faults)
    .filter(([, n]) => (n ?? 0) > 0)
    .map(([k, n]) => `${k} ${n}`);
  return parts.length > 0 ? parts.join(', ') : 'none';
}

function printTable(stack: StackName, rows: readonly Row[]): void {
  const header = ['scenario', 'messages', 'dups injected', 'lost', 'dup effects', 'explained (killed/lease/commit_failed)', 'unexplained', 'dead-lettered', 'time'];
  const lines = rows.map((r) => [
    r.scenario,
    String(r.result.published),
    String(r.result.duplicatesInjected),
    String(r.verdict.lost.length),
    String(r.verdict.duplicates.length),
    `${r.verdict.explained.killed_before_commit}/${r.verdict.explained.lease_lost}/${r.verdict.explained.commit_failed}`,
    String(r.verdict.unexplained.length),
    String(r.verdict.deadLettered),
    `${(r.result.elapsedMs / 1000).toFixed(0)} s`,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const fmt = (cells: readonly string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  process.stdout.write(`\n${stack}${stackSpec(stack).strictVerdict ? " (strict verdict in every scenario: any duplicated effect fails)" : ""}\n${fmt(header)}\n|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|\n${lines.map(fmt).join('\n')}\n`);
  for (const r of rows) {
    const reasons: Record<string, number> = {};
    for (const d of r.result.deadLetters) reasons[d.reason] = (reasons[d.reason] ?? 0) + 1;
    const gate = gateProblem(r.stack, r.result);
    const outbox = outboxProblem(r.result);
    process.stdout.write(
      `  ${r.scenario} faults: ${faultText(r.fired)}; dead letters: ${faultText(reasons)}${gateText(r.result)}${outboxText(r.result)}; run ${r.runId}${r.result.drained ? '' : '; DID NOT DRAIN'}${gate ? `; GATE UNUSED: ${gate}` : ''}${outbox ? `; ${outbox}` : ''}\n`,
    );
    for (const u of r.verdict.unexplained.slice(0, 10)) process.stdout.write(`  UNEXPLAINED duplicate ${u.key} (fence ${u.fence}, worker ${u.worker}): ${u.cause}\n`);
    if (r.verdict.lost.length > 0) process.stdout.write(`  LOST ${r.verdict.lost.length}: ${r.verdict.lost.slice(0, 10).join(', ')}${r.verdict.lost.length > 10 ? ', …' : ''}\n`);
    for (const b of r.verdict.badDeadLetters.slice(0, 10)) process.stdout.write(`  BAD DEAD LETTER ${b}\n`);
  }
}

/**
 * Connects to the ledger database: PGDATABASE, else `test`, else `postgres` when `test` does not
 * exist (the choice is exported to PGDATABASE so worker processes use the same one).
 */
async function openLedger(): Promise<Pool> {
  const pool = new Pool(pgConfig(4));
  try {
    await pool.query('SELECT 1');
    return pool;
  } catch (error) {
    await pool.end().catch(() => undefined);
    if ((error as { code?: string }).code !== '3D000' || process.env.PGDATABASE) throw error;
    process.env.PGDATABASE = 'postgres';
    process.stdout.write('chaos: database "test" does not exist; using "postgres" for the ledger\n');
    return new Pool(pgConfig(4));
  }
}

async function main(): Promise<number> {
  const options = new Command()
    .name('chaos')
    .description('Fault injection with a PostgreSQL effect ledger: no message lost, no unexplained duplicate.')
    .addOption(new Option('--profile <profile>', 'ci (≈12 min for all stacks) or long (≥100,000 messages per stack)').choices(['ci', 'long']).default('ci'))
    .addOption(new Option('--stack <stack>', 'which stack').choices([...STACKS, 'all']).default('all'))
    .option('--seed <n>', 'seed of the message plans and fault schedules', (v) => Number(v), Number(process.env.CHAOS_SEED ?? 20240601))
    .addOption(new Option('--client <client>', 'the Kafka client of the Kafka stacks\' consumers').choices([...CHAOS_KAFKA_CLIENTS]).default('kafkajs'))
    .option('--scale <x>', 'multiply messages and publishing time (quick local runs)', (v) => Number(v), 1)
    .option('--scenario <name>', "run only this scenario of the profile (e.g. full); its seed is the one it has in a whole run")
    .parse(process.argv)
    .opts<Options>();
  const kafkaOnly = options.client !== 'kafkajs';
  if (kafkaOnly && options.stack !== 'all' && stackSpec(options.stack).broker !== 'kafka') {
    process.stderr.write(`chaos: --client ${options.client} applies to the Kafka stacks only; "${options.stack}" is not one\n`);
    return 2;
  }
  const stacks = options.stack === 'all' ? STACKS.filter((s) => !kafkaOnly || stackSpec(s).broker === 'kafka') : [options.stack];
  const scenarioName = options.scenario;
  if (scenarioName !== undefined && !stacks.some((s) => profile(options.profile, s).some((p) => p.name === scenarioName))) {
    process.stderr.write(`chaos: no stack of this run has a scenario "${scenarioName}" in the ${options.profile} profile\n`);
    return 2;
  }
  const pool = await openLedger();
  await prepareLedger(pool);
  const rows: Row[] = [];
  const started = Date.now();
  process.stdout.write(`chaos: profile ${options.profile}, seed ${options.seed}, stacks ${stacks.join(', ')}, Kafka client ${options.client}\n`);
  for (const stack of stacks) {
    const stackRows: Row[] = [];
    for (const [index, base] of profile(options.profile, stack).entries()) {
      if (scenarioName !== undefined && base.name !== scenarioName) continue;
      const scenario: ScenarioProfile = { ...base, messages: Math.max(10, Math.round(base.messages * options.scale)), publishMs: Math.round(base.publishMs * options.scale) };
      const runId = `${stack}-${scenario.name}-${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
      const seed = options.seed + index * 1000 + STACKS.indexOf(stack) * 100_000;
      await pool.query('INSERT INTO chaos_runs (run_id, stack, scenario, profile, seed) VALUES ($1, $2, $3, $4, $5)', [runId, options.client === 'kafkajs' ? stack : `${stack}@${options.client}`, scenario.name, options.profile, seed]);
      process.stdout.write(`\n== ${stack} / ${scenario.name}: ${scenario.messages} keys, ${scenario.workers} workers × ${scenario.concurrency}, run ${runId}, seed ${seed}\n`);
      const result = await runStack(stack, scenario, runId, seed, options.client);
      const ledger = await readLedger(pool, runId);
      const deadLettered = new Map<string, string[]>();
      for (const d of result.deadLetters) deadLettered.set(d.key, [...(deadLettered.get(d.key) ?? []), d.reason]);
      const fired = await readFaultCounts(pool, runId);
      const injected = Object.keys(fired) as FaultKind[];
      const verdict = judge({
        published: result.uniqueKeys,
        ...ledger,
        killedWorkers: new Set(result.killedWorkers),
        deadLettered,
        poison: new Set(result.poison),
        allowedDeadLetterReasons: new Set(['permanent_error', 'retry_exhausted']),
        storeFaults: injected.some((k) => k === 'redis_stop' || k === 'redis_pause' || k === 'redis_flush'),
        strict: judgedStrictly(stack, scenario.name, injected),
      });
      const gate = gateProblem(stack, result);
      const outbox = outboxProblem(result);
      const ok = verdict.ok && result.drained && gate === undefined && outbox === undefined;
      await pool.query('UPDATE chaos_runs SET verdict = $2 WHERE run_id = $1', [
        runId,
        JSON.stringify({ ok, drained: result.drained, lost: verdict.lost.length, duplicates: verdict.duplicates.length, explained: verdict.explained, unexplained: verdict.unexplained.slice(0, 100), faults: fired, elapsedMs: result.elapsedMs, ...(result.gate ? { gate: result.gate, gateProblem: gate ?? null } : {}), ...(result.outbox ? { outbox: { ...result.outbox, phantoms: result.outbox.phantoms.slice(0, 100), orderViolations: result.outbox.orderViolations.slice(0, 100) } } : {}) }),
      ]);
      process.stdout.write(`   ${ok ? 'OK' : 'FAILED'}: ${verdict.effects} effects for ${verdict.published} keys, ${verdict.duplicates.length} duplicated (${verdict.unexplained.length} unexplained), ${verdict.lost.length} lost, ${verdict.deadLettered} dead-lettered, ${(result.elapsedMs / 1000).toFixed(0)} s${gateText(result)}${outboxText(result)}${outbox ? `; ${outbox}` : ''}\n`);
      stackRows.push({ stack, scenario: scenario.name, runId, result, verdict, fired, ok });
    }
    printTable(stack, stackRows);
    rows.push(...stackRows);
  }
  await pool.end();
  const failed = rows.filter((r) => !r.ok);
  process.stdout.write(`\nchaos: ${rows.length - failed.length}/${rows.length} runs passed in ${((Date.now() - started) / 1000).toFixed(0)} s${failed.length > 0 ? `; FAILED: ${failed.map((r) => `${r.stack}/${r.scenario}`).join(', ')}` : ''}\n`);
  return failed.length > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`chaos harness failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(2);
  },
);
