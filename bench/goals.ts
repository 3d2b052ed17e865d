/**
 * Issue #14's goals beside the figures one `npm run bench` measured (bench/report.ts). Each row
 * names the goal, its bound, the measured figure (medians over the alternating runs), the spread
 * over those runs and the raw client's rate. Nothing fails on a number: a missed goal is printed
 * as missed, and docs/performance.md says what bounds it.
 */

/** One goal and what was measured for it. */
export interface GoalRow {
  readonly area: string;
  readonly goal: string;
  /** `≤` or `≥` the bound, in `unit`. */
  readonly bound: string;
  readonly unit: string;
  /** The median figure; undefined when the part did not run. */
  readonly measured: number | undefined;
  /** The figure over the individual runs, min–max (or the paired per-run values). */
  readonly spread: string;
  /** The raw client's median rate on the same path, msg/s, where one applies. */
  readonly rawRate: number | undefined;
  /** True when met, false when missed, undefined when not measured. */
  readonly met: boolean | undefined;
}

/** bench/core/pipeline.ts, parsed. */
export interface CoreFigures {
  readonly rawRate: number;
  readonly twophaseRate: number;
  readonly rawCpuUs: number;
  readonly twophaseCpuUs: number;
  readonly rawRuns: readonly number[];
  readonly twophaseRuns: readonly number[];
}

/** One variant of bench/rabbitmq/run.ts at one prefetch (its JSON `results` entries). */
export interface RabbitVariant {
  readonly prefetch: number;
  readonly variant: string;
  readonly medianMsgsPerSec: number;
  readonly runsMsgsPerSec: readonly number[];
  readonly medianNodeCpuUsPerMsg: number;
  readonly runsNodeCpuUsPerMsg?: readonly number[];
  readonly medianRedisCpuUsPerMsg?: number;
  readonly runsRedisCpuUsPerMsg?: readonly number[];
}

/** One run of one variant of bench/kafka/consume.ts. */
export interface KafkaRun {
  readonly msgsPerSec: number;
  readonly cpuUsPerMsg: number;
  readonly redisCpuUsPerMsg?: number;
}

export interface LatencyFigure {
  readonly broker: string;
  readonly claimer: string;
  readonly addedP99Ms: number;
  readonly addedP99RangeMs?: readonly [number, number];
}

export interface PowertoolsRow {
  readonly impl: string;
  readonly path: string;
  readonly inFlight: number;
  readonly callsPerSec: number;
}

/** bench/outbox/run.ts's JSON (the parts the goals read). */
export interface OutboxFigures {
  readonly rabbitmq?: { readonly ratios: readonly number[]; readonly rawMedian: number };
  readonly kafka?: { readonly ratios: readonly number[]; readonly rawMedian: number };
  readonly staging?: { readonly ratios: readonly number[] };
  readonly lag?: readonly { readonly targetRate: number; readonly achievedRate: number; readonly messages: number; readonly arrived: number; readonly p50Ms: number; readonly p99Ms: number }[];
}

export interface Figures {
  readonly outbox?: OutboxFigures;
  readonly core?: CoreFigures;
  readonly rabbitmq?: readonly RabbitVariant[];
  readonly kafka?: Readonly<Record<string, { readonly runs: readonly KafkaRun[] }>>;
  readonly latency?: readonly LatencyFigure[];
  readonly latencyRatePerSec?: Readonly<Record<string, number>>;
  readonly powertools?: readonly PowertoolsRow[];
}

export function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const r2 = (x: number) => Math.round(x * 100) / 100;
const range = (xs: readonly number[], digits = 2) => (xs.length ? `${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}` : '—');
const pairs = (a: readonly number[], b: readonly number[], f: (x: number, y: number) => number) => a.slice(0, b.length).map((x, i) => f(x, b[i]!));

function row(area: string, goal: string, op: '≤' | '≥', bound: number, unit: string, measured: number | undefined, spread: string, rawRate?: number): GoalRow {
  const met = measured === undefined || !Number.isFinite(measured) ? undefined : op === '≤' ? measured <= bound : measured >= bound;
  return { area, goal, bound: `${op} ${bound}`, unit, measured: measured === undefined || !Number.isFinite(measured) ? undefined : r2(measured), spread, rawRate: rawRate === undefined ? undefined : Math.round(rawRate), met };
}

/** Every goal of issue #14, in its order, with what `figures` holds for it. */
export function evaluateGoals(f: Figures): GoalRow[] {
  const rows: GoalRow[] = [];
  const c = f.core;
  rows.push(
    row(
      'in-process',
      'in-memory adds Node CPU per delivery over raw',
      '≤',
      1.5,
      'µs/msg',
      c && c.twophaseCpuUs - c.rawCpuUs,
      c ? `rates raw ${range(c.rawRuns, 0)}, twophase ${range(c.twophaseRuns, 0)} msg/s; wall-clock difference ${r2(1e6 / c.twophaseRate - 1e6 / c.rawRate)} µs` : '—',
      c?.rawRate,
    ),
  );

  const rb = (v: string) => f.rabbitmq?.find((x) => x.prefetch === 100 && x.variant === v);
  const rRaw = rb('raw');
  // redis-batch-w2: the same goals with the source's batchClaims and a 2 ms claim window (batchWindowMs).
  for (const [v, addBound, ratioBound] of [['memory', 2, 0.95], ['redis', 6, 0.85], ['redis-batch-w2', 6, 0.85]] as const) {
    const x = rb(v);
    const cpuPairs = x?.runsNodeCpuUsPerMsg && rRaw?.runsNodeCpuUsPerMsg ? pairs(x.runsNodeCpuUsPerMsg, rRaw.runsNodeCpuUsPerMsg, (a, b) => a - b) : [];
    rows.push(row('RabbitMQ p100', `${v} adds Node CPU per message`, '≤', addBound, 'µs/msg', x && rRaw && x.medianNodeCpuUsPerMsg - rRaw.medianNodeCpuUsPerMsg, `per run ${range(cpuPairs)}`, rRaw?.medianMsgsPerSec));
    if (v !== 'memory') {
      rows.push(row('RabbitMQ p100', `${v}: Redis server CPU per message (INFO cpu)`, '≤', 4, 'µs/msg', x?.medianRedisCpuUsPerMsg, `per run ${range(x?.runsRedisCpuUsPerMsg ?? [])}`, rRaw?.medianMsgsPerSec));
    }
    const ratioPairs = x && rRaw ? pairs(x.runsMsgsPerSec, rRaw.runsMsgsPerSec, (a, b) => a / b) : [];
    rows.push(row('RabbitMQ p100', `${v} rate / raw rate`, '≥', ratioBound, '×', x && rRaw && x.medianMsgsPerSec / rRaw.medianMsgsPerSec, `paired per run ${range(ratioPairs)}; rates ${x ? range(x.runsMsgsPerSec, 0) : '—'}`, rRaw?.medianMsgsPerSec));
  }

  const kRuns = (v: string) => f.kafka?.[v]?.runs;
  const kRaw = kRuns('raw');
  for (const [v, addBound, ratioBound] of [['memory', 1.5, 0.9], ['redis', 4, 0.65]] as const) {
    const x = kRuns(v);
    const rawRate = kRaw && median(kRaw.map((r) => r.msgsPerSec));
    const added = x && kRaw ? median(x.map((r) => r.cpuUsPerMsg)) - median(kRaw.map((r) => r.cpuUsPerMsg)) : undefined;
    rows.push(row('Kafka 6 partitions', `${v} adds Node CPU per record`, '≤', addBound, 'µs/rec', added, x && kRaw ? `per run ${range(pairs(x.map((r) => r.cpuUsPerMsg), kRaw.map((r) => r.cpuUsPerMsg), (a, b) => a - b))}` : '—', rawRate));
    if (v === 'redis') {
      const server = x?.map((r) => r.redisCpuUsPerMsg).filter((n): n is number => n !== undefined) ?? [];
      rows.push(row('Kafka 6 partitions', 'redis: Redis server CPU per record (INFO cpu)', '≤', 3, 'µs/rec', server.length ? median(server) : undefined, `per run ${range(server)}`, rawRate));
    }
    const ratio = x && kRaw ? median(x.map((r) => r.msgsPerSec)) / median(kRaw.map((r) => r.msgsPerSec)) : undefined;
    rows.push(row('Kafka 6 partitions', `${v} rate / raw rate`, '≥', ratioBound, '×', ratio, x && kRaw ? `paired per run ${range(pairs(x.map((r) => r.msgsPerSec), kRaw.map((r) => r.msgsPerSec), (a, b) => a / b))}` : '—', rawRate));
  }

  for (const broker of ['memory', 'rabbitmq', 'kafka']) {
    const l = f.latency?.find((x) => x.broker === broker && x.claimer === 'redis');
    const rate = f.latencyRatePerSec?.[broker];
    rows.push(
      row(
        'added p99 latency',
        `redis on ${broker === 'memory' ? 'the in-process broker' : broker} at ${rate ?? '?'} msg/s`,
        '≤',
        1,
        'ms',
        l?.addedP99Ms,
        l?.addedP99RangeMs ? `per round ${range(l.addedP99RangeMs)}` : '—',
      ),
    );
  }

  for (const path of ['first', 'duplicate']) {
    const at = (impl: string) => f.powertools?.find((x) => x.impl === impl && x.path === path && x.inFlight === 64)?.callsPerSec;
    const tp = at('twophase');
    const pt = at('powertools');
    rows.push(row('vs Powertools', `claim+commit calls/s over Powertools, ${path === 'first' ? 'new keys' : 'duplicates'}, 64 in flight`, '≥', 4, '×', tp && pt ? tp / pt : undefined, tp && pt ? `${tp} vs ${pt} calls/s` : '—'));
  }
  const o = f.outbox;
  for (const broker of ['rabbitmq', 'kafka'] as const) {
    const x = o?.[broker];
    rows.push(row('outbox', `relay rate / raw confirmed-publish rate on ${broker} (1 KiB, same batch)`, '≥', 0.8, '×', x ? median(x.ratios) : undefined, x ? `per run ${range(x.ratios)}` : '—', x?.rawMedian));
  }
  rows.push(row('outbox', 'staging call / plain INSERT of the same row', '≤', 1.2, '×', o?.staging ? median(o.staging.ratios) : undefined, o?.staging ? `per run ${range(o.staging.ratios)}` : '—'));
  const lag = o?.lag?.find((l) => l.targetRate === 1000);
  const lagRow = row('outbox', 'lag COMMIT → downstream handler p99 at 1,000 msg/s, LISTEN/NOTIFY', '≤', 100, 'ms', lag?.p99Ms, lag ? `${lag.arrived}/${lag.messages} handled, ${lag.achievedRate} staged/s, p50 ${lag.p50Ms} ms` : '—');
  // Messages still on their way at the end: the p99 of those that arrived understates the whole.
  rows.push(lag && lag.arrived < lag.messages ? { ...lagRow, met: false } : lagRow);
  return rows;
}

/** The rows as a Markdown table (docs/performance.md uses the same layout). */
export function goalsMarkdown(rows: readonly GoalRow[]): string {
  const lines = ['| area | goal | bound | measured (median) | spread over the runs | raw msg/s | |', '|---|---|---|---|---|---|---|'];
  for (const r of rows) {
    lines.push(`| ${r.area} | ${r.goal} | ${r.bound} ${r.unit} | ${r.measured ?? 'not measured'} | ${r.spread} | ${r.rawRate ?? ''} | ${r.met === undefined ? '' : r.met ? 'met' : 'missed'} |`);
  }
  return lines.join('\n');
}
