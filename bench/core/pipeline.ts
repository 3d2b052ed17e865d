/**
 * Core pipeline overhead on the in-process broker: raw consume+ack against ConsumerBase with the
 * InMemoryClaimer, and ConsumerBase with TTLs per message type (`typeTtls`, two types by header),
 * interleaved in one process run. Prints medians, the ratios, and Node CPU µs per message.
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

/** One measurement: messages per second and Node CPU microseconds (user + system) per message. */
interface Sample {
  readonly rate: number;
  readonly cpuUsPerMsg: number;
}

function sample(ms: number, cpu: NodeJS.CpuUsage): Sample {
  return { rate: (N / ms) * 1000, cpuUsPerMsg: (cpu.user + cpu.system) / N };
}

async function raw(run: string): Promise<Sample> {
  const broker = new MemoryBroker();
  publish(broker, 'q', run);
  const c0 = process.cpuUsage();
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
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  broker.close();
  return sample(ms, cpu);
}

class Noop extends ConsumerBase<unknown> {
  async handle(): Promise<Disposition> {
    return ack();
  }
}

async function twophase(run: string, typed = false): Promise<Sample> {
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
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await consumer.start();
  while (broker.stats.acked < N) await new Promise((r) => setTimeout(r, 1));
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  await consumer.stop();
  broker.close();
  return sample(ms, cpu);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main() {
  const r: Sample[] = [];
  const t: Sample[] = [];
  const y: Sample[] = [];
  for (let i = 0; i < RUNS; i++) {
    r.push(await raw(`r${i}`));
    t.push(await twophase(`t${i}`));
    y.push(await twophase(`y${i}`, true));
  }
  const line = (label: string, xs: Sample[]) =>
    `${label.padEnd(38)} median ${median(xs.map((x) => x.rate)).toFixed(0)} msg/s, ${median(xs.map((x) => x.cpuUsPerMsg)).toFixed(1)} CPU µs/msg`;
  console.log(`messages ${N} x ${RUNS} runs, prefetch ${PREFETCH}`);
  console.log(line('raw consume+ack', r));
  console.log(line('ConsumerBase + in-memory', t));
  console.log(line('ConsumerBase + in-memory, typeTtls', y));
  const rate = (xs: Sample[]) => median(xs.map((x) => x.rate));
  console.log(`ratio ${(rate(t) / rate(r)).toFixed(3)} (typeTtls: ${(rate(y) / rate(r)).toFixed(3)}; typeTtls / plain ${(rate(y) / rate(t)).toFixed(3)})`);
}
void main();
