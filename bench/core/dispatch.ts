/**
 * Per-delivery cost of the core pipeline alone: `ConsumerBase.dispatch` called directly with a
 * settler that records the settle, in `lanes` sequential lanes (like a Kafka source's partition
 * workers), against a loop that does the same decode and settle without twophase, and a floor: that
 * loop plus the least an in-memory claim and commit can do (the namespaced key, a `Map` record
 * written at claim and marked done at commit, kept like InMemoryClaimer keeps done keys). Prints
 * median wall ns and this process's CPU µs (user + system) per delivery, and the overheads. Not a test.
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

/** Wall ns and CPU µs per delivery of one pass over `list`. */
interface Pass {
  readonly ns: number;
  readonly cpuUs: number;
}

async function lanes(list: Delivery[], each: (d: Delivery) => Promise<unknown>): Promise<Pass> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const per = Math.ceil(list.length / LANES);
  await Promise.all(
    Array.from({ length: LANES }, async (_, lane) => {
      for (let i = lane * per; i < Math.min(list.length, (lane + 1) * per); i++) await each(list[i]!);
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  return { ns: ((performance.now() - t0) * 1e6) / list.length, cpuUs: (cpu.user + cpu.system) / list.length };
}

/** The floor's claim record: what a claim must keep per key until its done TTL ends. */
interface FloorRecord {
  state: 'leased' | 'done';
  fence: number;
  expiresAt: number;
}

async function main(): Promise<void> {
  const baseline: Pass[] = [];
  const floor: Pass[] = [];
  const core: Pass[] = [];
  for (let run = 0; run < RUNS; run++) {
    const list = deliveries(run);
    baseline.push(
      await lanes(list, async (d) => {
        JSON.parse(d.body.toString('utf8'));
        await d.settler.ack({ duplicate: false });
      }),
    );
    const records = new Map<string, FloorRecord>();
    let fence = 0;
    floor.push(
      await lanes(list, async (d) => {
        JSON.parse(d.body.toString('utf8'));
        const key = `bench-${run}:` + (d.headers['idempotency-key'] as string);
        if (records.get(key)?.state === 'done') throw new Error('duplicate');
        const record: FloorRecord = { state: 'leased', fence: ++fence, expiresAt: performance.now() + 30_000 };
        records.set(key, record);
        await Promise.resolve(); // the claim's await
        record.state = 'done';
        record.expiresAt = performance.now() + 86_400_000;
        await Promise.resolve(); // the commit's await
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
  const ns = (xs: Pass[]) => median(xs.map((x) => x.ns));
  const cpu = (xs: Pass[]) => median(xs.map((x) => x.cpuUs));
  // Overheads are medians of the per-run differences (each run measures both sides back to back).
  const over = (xs: Pass[], key: keyof Pass) => median(xs.map((x, i) => x[key] - baseline[i]![key]));
  console.log(`${N} deliveries x ${RUNS} runs, ${LANES} lanes`);
  console.log(`decode + settle only          median ${ns(baseline).toFixed(0)} ns/delivery  cpu ${cpu(baseline).toFixed(2)} us/delivery`);
  console.log(`floor: + Map claim/commit     median ${ns(floor).toFixed(0)} ns/delivery  cpu ${cpu(floor).toFixed(2)} us/delivery`);
  console.log(`ConsumerBase + in-memory      median ${ns(core).toFixed(0)} ns/delivery  cpu ${cpu(core).toFixed(2)} us/delivery`);
  console.log(`floor overhead                ${over(floor, 'ns').toFixed(0)} ns/delivery  cpu ${over(floor, 'cpuUs').toFixed(2)} us/delivery`);
  console.log(`twophase overhead             ${over(core, 'ns').toFixed(0)} ns/delivery  cpu ${over(core, 'cpuUs').toFixed(2)} us/delivery`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
