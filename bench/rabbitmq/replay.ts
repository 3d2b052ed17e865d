/**
 * Replay benchmark (`npm run bench:replay`; not a timed test): how fast `twophase dlq replay`
 * moves messages from a dead-letter queue back to their queue on RabbitMQ.
 *
 * Each run fills a durable DLQ with BENCH_MESSAGES messages of BENCH_BODY_BYTES bytes that carry
 * the twophase route headers (original exchange "" and routing key = a durable target queue),
 * then runs the CLI's replay loop (replayDeadLetters + RabbitMqReplayBackend, as `twophase dlq
 * replay` does, publisher confirms required before each DLQ copy is acked) and times it from the
 * first get to the last ack. It then checks that the DLQ is empty and the target holds every
 * message. Reports the median msgs/s and writes BENCH_OUT (default bench/results/replay.json).
 *
 * Environment (all optional):
 *   BENCH_MESSAGES    messages per run  (default 5000)
 *   BENCH_BODY_BYTES  body size, bytes  (default 1024)
 *   BENCH_RUNS        runs              (default 3)
 *   BENCH_WINDOW      publishes in flight (the replay's `window`; default: the CLI's default)
 *   BENCH_OUT, TWOPHASE_AMQP_URL
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { HEADERS } from '../../adapters/rabbitmq';
import { RabbitMqReplayBackend, replayDeadLetters } from '../../adapters/cli';
import { AMQP_URL, connectAdmin } from './broker';

const messages = Number(process.env.BENCH_MESSAGES ?? 5000);
const bodyBytes = Number(process.env.BENCH_BODY_BYTES ?? 1024);
const runs = Number(process.env.BENCH_RUNS ?? 3);
const window = process.env.BENCH_WINDOW === undefined ? undefined : Number(process.env.BENCH_WINDOW);
const out = process.env.BENCH_OUT ?? join(__dirname, '..', 'results', 'replay.json');

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

interface RunResult {
  readonly rate: number;
  /** CPU time of this process (user + system) per replayed message, µs: steadier than the rate on a shared machine. */
  readonly cpuMicrosPerMessage: number;
}

async function oneRun(run: number): Promise<RunResult> {
  const admin = await connectAdmin();
  const id = randomBytes(4).toString('hex');
  const dlq = `bench-replay.${id}.dlq`;
  const target = `bench-replay.${id}`;
  const ch = await admin.createConfirmChannel();
  try {
    await ch.assertQueue(dlq, { durable: true });
    await ch.assertQueue(target, { durable: true });
    const body = Buffer.alloc(bodyBytes, 'x');
    for (let i = 0; i < messages; i++) {
      const key = `${id}-${i}`;
      ch.publish('', dlq, body, {
        persistent: true,
        messageId: key,
        headers: { 'idempotency-key': key, [HEADERS.originalExchange]: '', [HEADERS.originalRoutingKey]: target, [HEADERS.reason]: 'retry_exhausted', [HEADERS.errorMessage]: 'bench' },
      });
      if (i % 1000 === 999) await ch.waitForConfirms();
    }
    await ch.waitForConfirms();
    const backend = new RabbitMqReplayBackend({ url: AMQP_URL });
    const started = process.hrtime.bigint();
    const cpuBefore = process.cpuUsage();
    const summary = await replayDeadLetters(backend, { source: dlq, dryRun: false, window }, () => undefined);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const cpu = process.cpuUsage(cpuBefore);
    const [left, arrived] = await Promise.all([ch.checkQueue(dlq), ch.checkQueue(target)]);
    if (summary.replayed !== messages || left.messageCount !== 0 || arrived.messageCount !== messages) {
      throw new Error(`run ${run}: replayed ${summary.replayed}, ${left.messageCount} left in the DLQ, ${arrived.messageCount} at the target (expected ${messages})`);
    }
    const rate = messages / seconds;
    const cpuMicrosPerMessage = (cpu.user + cpu.system) / messages;
    process.stderr.write(`run ${run}: ${messages} messages in ${seconds.toFixed(2)} s = ${rate.toFixed(0)} msg/s, ${cpuMicrosPerMessage.toFixed(0)} µs CPU/msg in the replay process\n`);
    return { rate, cpuMicrosPerMessage };
  } finally {
    await ch.deleteQueue(dlq).catch(() => undefined);
    await ch.deleteQueue(target).catch(() => undefined);
    await admin.close().catch(() => undefined);
  }
}

async function main(): Promise<void> {
  const results: RunResult[] = [];
  for (let run = 1; run <= runs; run++) results.push(await oneRun(run));
  const rates = results.map((r) => r.rate);
  const result = {
    benchmark: 'replay',
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model, totalMemGiB: Math.round(totalmem() / 2 ** 30), node: process.version },
    config: { messages, bodyBytes, runs, window: window ?? 'default', path: 'basic.get → publish (confirm) → ack, DLQ and target durable, persistent messages' },
    ratesMsgsPerSec: rates.map((r) => Math.round(r)),
    medianMsgsPerSec: Math.round(median(rates)),
    medianCpuMicrosPerMessage: Math.round(median(results.map((r) => r.cpuMicrosPerMessage))),
    loadAvgAtEnd: loadavg().map((x) => Number(x.toFixed(2))),
  };
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write(`replay median ${result.medianMsgsPerSec} msg/s, ${result.medianCpuMicrosPerMessage} µs CPU/msg (${messages} × ${bodyBytes} B, ${runs} runs)\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exitCode = 1;
});
