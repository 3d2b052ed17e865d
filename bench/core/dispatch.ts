/**
 * Per-delivery cost of the core pipeline alone: `ConsumerBase.dispatch` called directly with a
 * settler that records the settle, in `lanes` sequential lanes (like a Kafka source's partition
 * workers), against a loop that does the same decode and settle without twophase. Prints median
 * ns per delivery and the twophase overhead per delivery. Not a test.
 *
 *   npx ts-node --transpile-only bench/core/dispatch.ts [deliveries=200000] [runs=5] [lanes=6]
 */
import { performance } from 'node:perf_hooks';
import { ack, type Claimer, ConsumerBase, type Delivery, type Disposition, InMemoryClaimer, type Message, type MessageSource, silentLogger } from '../../src';

const N = Number(process.argv[2] ?? 200_000);
const RUNS = Number(process.argv[3] ?? 5);
const LANES = Number(process.argv[4] ?? 6);
const body = Buffer.from(JSON.stringify({ id: 'x', pad: 'x'.repeat(1000) }));

const idleSource: MessageSource = {
  system: 'bench',
  start: async () => undefined,
  stopIntake: async () => undefined,
  close: async () => undefined,
};

function deliveries(run: number): Delivery[] {
  const out: Delivery[] = [];
  for (let i = 0; i < N; i++) {
    out.push({
      body,
      headers: { 'idempotency-key': `r${run}-${i}` },
      metadata: { system: 'bench', destination: 'q', redelivered: false },
      settler: { ack: async () => undefined, requeue: async () => undefined, reject: async () => undefined },
    });
  }
  return out;
}

class Noop extends ConsumerBase<{ id: string }> {
  seen = 0;
  async handle(message: Message<{ id: string }>): Promise<Disposition> {
    if (message.body.id === 'x') this.seen++;
    return ack();
  }
}

async function lanes(list: Delivery[], each: (d: Delivery) => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  const per = Math.ceil(list.length / LANES);
  await Promise.all(
    Array.from({ length: LANES }, async (_, lane) => {
      for (let i = lane * per; i < Math.min(list.length, (lane + 1) * per); i++) await each(list[i]!);
    }),
  );
  return ((performance.now() - t0) * 1e6) / list.length;
}

async function main(): Promise<void> {
  const baseline: number[] = [];
  const core: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const list = deliveries(run);
    baseline.push(
      await lanes(list, async (d) => {
        JSON.parse(d.body.toString('utf8'));
        await d.settler.ack({ duplicate: false });
      }),
    );
    const claimer: Claimer = new InMemoryClaimer();
    const consumer = new Noop({ name: `bench-${run}`, claimer, source: idleSource, logger: silentLogger, concurrency: LANES, deployment: { replicas: 1 } });
    await consumer.start();
    core.push(await lanes(list, (d) => consumer.dispatch(d)));
    await consumer.stop();
    if (consumer.seen !== N) throw new Error(`handled ${consumer.seen} of ${N}`);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(`${N} deliveries x ${RUNS} runs, ${LANES} lanes`);
  console.log(`decode + settle only          median ${median(baseline).toFixed(0)} ns/delivery`);
  console.log(`ConsumerBase + in-memory      median ${median(core).toFixed(0)} ns/delivery`);
  console.log(`twophase overhead             ${(median(core) - median(baseline)).toFixed(0)} ns/delivery`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
