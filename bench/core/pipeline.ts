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

async function raw(run: string): Promise<number> {
  const broker = new MemoryBroker();
  publish(broker, 'q', run);
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
  broker.close();
  return (N / ms) * 1000;
}

class Noop extends ConsumerBase<unknown> {
  async handle(): Promise<Disposition> {
    return ack();
  }
}

async function twophase(run: string): Promise<number> {
  const broker = new MemoryBroker();
  publish(broker, 'q', run);
  const consumer = new Noop({ name: 'bench', claimer: new InMemoryClaimer(), source: new MemorySource({ broker, queue: 'q' }), concurrency: PREFETCH, logger: silentLogger });
  const t0 = performance.now();
  await consumer.start();
  while (broker.stats.acked < N) await new Promise((r) => setTimeout(r, 1));
  const ms = performance.now() - t0;
  await consumer.stop();
  broker.close();
  return (N / ms) * 1000;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main() {
  const r: number[] = [];
  const t: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    r.push(await raw(`r${i}`));
    t.push(await twophase(`t${i}`));
  }
  console.log(`messages ${N} x ${RUNS} runs, prefetch ${PREFETCH}`);
  console.log(`raw consume+ack            median ${median(r).toFixed(0)} msg/s`);
  console.log(`ConsumerBase + in-memory   median ${median(t).toFixed(0)} msg/s`);
  console.log(`ratio ${(median(t) / median(r)).toFixed(3)}`);
}
void main();
