/**
 * Core pipeline overhead on the in-process broker: raw consume+ack against ConsumerBase with the
 * InMemoryClaimer, side by side in one process run. Prints medians and the ratio.
 *
 *   npx ts-node --transpile-only bench/core/pipeline.ts [messages=100000] [runs=5]
 */
import { MemoryBroker, MemorySource } from '../../adapters/memory';
import { ack, ConsumerBase, type Disposition, InMemoryClaimer, silentLogger } from '../../src';

const N = Number(process.argv[2] ?? 100_000);
const RUNS = Number(process.argv[3] ?? 5);
const PREFETCH = 100;
const body = Buffer.from(JSON.stringify({ pad: 'x'.repeat(1000) }));

function publish(broker: MemoryBroker, queue: string, run: string): void {
  for (let i = 0; i < N; i++) broker.publish(queue, { body, headers: { 'idempotency-key': `${run}-${i}` } });
}

/** One run's figures: wall rate, and the process's CPU time (user + system) per message. */
interface RunFigures {
  readonly rate: number;
  readonly cpuUsPerMsg: number;
}

function figures(t0: number, cpu0: NodeJS.CpuUsage): RunFigures {
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { rate: (N / ms) * 1000, cpuUsPerMsg: (cpu.user + cpu.system) / N };
}

async function raw(run: string): Promise<RunFigures> {
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
  const result = figures(t0, cpu0);
  broker.close();
  return result;
}

class Noop extends ConsumerBase<unknown> {
  async handle(): Promise<Disposition> {
    return ack();
  }
}

async function twophase(run: string): Promise<RunFigures> {
  const broker = new MemoryBroker();
  publish(broker, 'q', run);
  const consumer = new Noop({ name: 'bench', claimer: new InMemoryClaimer(), source: new MemorySource({ broker, queue: 'q' }), concurrency: PREFETCH, logger: silentLogger });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await consumer.start();
  while (broker.stats.acked < N) await new Promise((r) => setTimeout(r, 1));
  const result = figures(t0, cpu0);
  await consumer.stop();
  broker.close();
  return result;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main() {
  const r: RunFigures[] = [];
  const t: RunFigures[] = [];
  for (let i = 0; i < RUNS; i++) {
    r.push(await raw(`r${i}`));
    t.push(await twophase(`t${i}`));
  }
  const rate = (xs: RunFigures[]) => median(xs.map((x) => x.rate));
  const cpu = (xs: RunFigures[]) => median(xs.map((x) => x.cpuUsPerMsg));
  console.log(`messages ${N} x ${RUNS} runs, prefetch ${PREFETCH}`);
  console.log(`raw consume+ack            median ${rate(r).toFixed(0)} msg/s`);
  console.log(`ConsumerBase + in-memory   median ${rate(t).toFixed(0)} msg/s`);
  console.log(`ratio ${(rate(t) / rate(r)).toFixed(3)}`);
  // CPU time of the whole process (user + system) per message: less sensitive to a busy machine than the rate.
  console.log(`Node CPU per message: raw ${cpu(r).toFixed(2)} µs, twophase ${cpu(t).toFixed(2)} µs, added ${(cpu(t) - cpu(r)).toFixed(2)} µs`);
}
void main();
