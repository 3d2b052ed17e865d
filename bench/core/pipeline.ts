/**
 * Core pipeline overhead on the in-process broker: raw consume+ack against ConsumerBase with the
 * InMemoryClaimer, and ConsumerBase with TTLs per message type (`typeTtls`, two types by header),
 * side by side in one process run (alternating). Prints medians, the ratio, each
 * run's rate, and this process's CPU time per message (user + system; the run is CPU-bound in one
 * process, so the difference is what the pipeline adds per delivery).
 *
 *   npx ts-node --transpile-only bench/core/pipeline.ts [messages=100000] [runs=5]
 */
import { MemoryBroker, MemorySource } from '../../adapters/memory';
import { ack, ConsumerBase, type Disposition, InMemoryClaimer, silentLogger, type TypeTtls } from '../../src';

const N = Number(process.argv[2] ?? 100_000);
const RUNS = Number(process.argv[3] ?? 5);
const PREFETCH = 100;
const body = Buffer.from(JSON.stringify({ pad: 'x'.repeat(1000) }));

function publish(broker: MemoryBroker, queue: string, run: string, typed = false): void {
  for (let i = 0; i < N; i++) {
    broker.publish(queue, { body, headers: { 'idempotency-key': `${run}-${i}`, ...(typed ? { type: i % 2 === 0 ? 'payment' : 'notification' } : {}) } });
  }
}

const TYPE_TTLS: TypeTtls = {
  typeOf: (d) => d.headers.type as string | undefined,
  types: { payment: { doneTtlMs: 30 * 24 * 3600_000, leaseTtlMs: 60_000 }, notification: { doneTtlMs: 24 * 3600_000 } },
};

/** One run's rate (msg/s) and CPU time per message (µs). */
interface Run {
  readonly rate: number;
  readonly cpuUs: number;
}

function finish(t0: number, cpu0: NodeJS.CpuUsage): Run {
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { rate: (N / ms) * 1000, cpuUs: (cpu.user + cpu.system) / N };
}

async function raw(run: string): Promise<Run> {
  const broker = new MemoryBroker();
  publish(broker, 'q', run);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await new Promise<void>((resolve) => {
    let done = 0;
    broker.consume('q', PREFETCH, (d) => {
      JSON.parse(d.message.body.toString('utf8'));
      void Promise.resolve().then(() => {
        broker.ack(d.consumerTag, d.deliveryTag);
        if (++done === N) resolve();
      });
    });
  });
  const measured = finish(t0, cpu0);
  broker.close();
  return measured;
}

class Noop extends ConsumerBase<unknown> {
  async handle(): Promise<Disposition> {
    return ack();
  }
}

async function twophase(run: string, typed = false): Promise<Run> {
  const broker = new MemoryBroker();
  publish(broker, 'q', run, typed);
  const consumer = new Noop({
    name: 'bench',
    claimer: new InMemoryClaimer(),
    source: new MemorySource({ broker, queue: 'q' }),
    concurrency: PREFETCH,
    logger: silentLogger,
    ...(typed ? { typeTtls: TYPE_TTLS } : {}),
  });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await consumer.start();
  while (broker.stats.acked < N) await new Promise((r) => setTimeout(r, 1));
  const measured = finish(t0, cpu0);
  await consumer.stop();
  broker.close();
  return measured;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main() {
  const r: Run[] = [];
  const t: Run[] = [];
  const typed: Run[] = [];
  for (let i = 0; i < RUNS; i++) {
    typed.push(await twophase(`y${i}`, true));
    // Alternate which goes first, so drift on the machine hits both alike.
    if (i % 2) {
      t.push(await twophase(`t${i}`));
      r.push(await raw(`r${i}`));
    } else {
      r.push(await raw(`r${i}`));
      t.push(await twophase(`t${i}`));
    }
  }
  const rates = (xs: Run[]) => xs.map((x) => x.rate.toFixed(0)).join(' ');
  const cpu = (xs: Run[]) => median(xs.map((x) => x.cpuUs));
  console.log(`messages ${N} x ${RUNS} runs, prefetch ${PREFETCH}`);
  console.log(`raw consume+ack            median ${median(r.map((x) => x.rate)).toFixed(0)} msg/s  cpu ${cpu(r).toFixed(2)} us/msg  runs ${rates(r)}`);
  console.log(`ConsumerBase + in-memory   median ${median(t.map((x) => x.rate)).toFixed(0)} msg/s  cpu ${cpu(t).toFixed(2)} us/msg  runs ${rates(t)}`);
  console.log(`  + typeTtls (2 types)      median ${median(typed.map((x) => x.rate)).toFixed(0)} msg/s  cpu ${cpu(typed).toFixed(2)} us/msg  runs ${rates(typed)}`);
  console.log(`ratio ${(median(t.map((x) => x.rate)) / median(r.map((x) => x.rate))).toFixed(3)}`);
}
void main();
