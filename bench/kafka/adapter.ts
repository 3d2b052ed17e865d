/**
 * Per-record cost of the Kafka adapter without a broker: `KafkaSource` + `ConsumerBase` with the
 * in-memory claimer, fed prepared batches by the in-process test client (the client's own cost is
 * left out, so what remains is what twophase adds), against the same batches consumed by a bare
 * `eachBatch` loop (decode each record, resolve its offset, commit the batch's end) and a floor:
 * that loop plus the least an in-memory claim and commit can do (as in bench/core/dispatch.ts).
 * Lanes are partitions, each delivering its next batch once the previous one returned and its
 * partition is not paused. Prints median CPU µs (user + system) per record and the overheads,
 * each overhead the median of per-run differences. Not a test.
 *
 *   npx ts-node --transpile-only bench/kafka/adapter.ts [records=120000] [runs=5] [partitions=6] [batch=500]
 *
 * Profile one side: `node --cpu-prof -r ts-node/register/transpile-only bench/kafka/adapter.ts …`.
 */
import { performance } from 'node:perf_hooks';
import { ack, ConsumerBase, type Disposition, InMemoryClaimer, type Message, silentLogger } from '../../src';
import { type FetchedBatch, KafkaSource, type KafkaRecord } from '../../adapters/kafka';
import { FakeKafka } from '../../test/integration/kafka/support/fake-client';

const N = Number(process.argv[2] ?? 120_000);
const RUNS = Number(process.argv[3] ?? 5);
const PARTITIONS = Number(process.argv[4] ?? 6);
const BATCH = Number(process.argv[5] ?? 500);
const only = process.env.BENCH_ONLY; // 'raw' | 'floor' | 'twophase': run one side (for a profile)
const pad = 'x'.repeat(1000);

/** Prepared records of one partition: JSON bodies of about 1 KiB, each with its own idempotency key. */
function records(run: number, partition: number, count: number): KafkaRecord[] {
  const out: KafkaRecord[] = [];
  for (let o = 0; o < count; o++) {
    out.push({
      key: null,
      value: Buffer.from(JSON.stringify({ id: `${partition}-${o}`, pad })),
      offset: String(o),
      timestamp: '0',
      headers: { 'idempotency-key': Buffer.from(`r${run}-${partition}-${o}`) },
    });
  }
  return out;
}

function batchOf(topic: string, partition: number, messages: KafkaRecord[], commit: FetchedBatch['commit'], resolveOffset: FetchedBatch['resolveOffset']): FetchedBatch {
  return {
    topic,
    partition,
    highWatermark: messages[messages.length - 1]!.offset,
    messages,
    resolveOffset,
    heartbeat: async () => undefined,
    commit,
    isRunning: () => true,
    isStale: () => false,
  };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** CPU µs per record of one pass: `lanes` deliver their partitions' batches through `deliver`, then `done` resolves. */
async function measure(perPartition: KafkaRecord[][], deliver: (partition: number, batch: KafkaRecord[]) => Promise<void>, done: () => Promise<void>): Promise<number> {
  const cpu0 = process.cpuUsage();
  await Promise.all(
    perPartition.map(async (list, partition) => {
      for (let i = 0; i < list.length; i += BATCH) await deliver(partition, list.slice(i, i + BATCH));
    }),
  );
  await done();
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / N;
}

/** The bare loop, and with `claim` the floor's Map claim and commit around each record. */
async function bare(run: number, perPartition: KafkaRecord[][], claim: boolean): Promise<number> {
  const resolved = new Map<number, string>();
  const records = new Map<string, { state: 'leased' | 'done'; fence: number; expiresAt: number }>();
  let fence = 0;
  let seen = 0;
  const commit = async () => undefined;
  return measure(
    perPartition,
    async (partition, messages) => {
      const batch = batchOf('orders', partition, messages, commit, (offset) => void resolved.set(partition, offset));
      for (const m of batch.messages) {
        const body = JSON.parse(m.value!.toString('utf8')) as { id: string };
        if (claim) {
          const key = `bench-${run}:` + (m.headers!['idempotency-key'] as Buffer).toString();
          if (records.get(key)?.state === 'done') throw new Error('duplicate');
          const record = { state: 'leased' as const as 'leased' | 'done', fence: ++fence, expiresAt: performance.now() + 30_000 };
          records.set(key, record);
          await Promise.resolve(); // the claim's await
          if (body.id.length > 0) seen++;
          record.state = 'done';
          record.expiresAt = performance.now() + 86_400_000;
          await Promise.resolve(); // the commit's await
        } else if (body.id.length > 0) seen++;
        batch.resolveOffset(m.offset);
      }
      await batch.commit([{ topic: 'orders', partition, offset: String(Number(messages[messages.length - 1]!.offset) + 1) }]);
    },
    async () => {
      if (seen !== N) throw new Error(`bare loop saw ${seen} of ${N}`);
    },
  );
}

class Noop extends ConsumerBase<{ id: string }> {
  seen = 0;
  private target = Infinity;
  private reached: (() => void) | undefined;
  async handle(message: Message<{ id: string }>): Promise<Disposition> {
    if (message.body.id.length > 0 && ++this.seen === this.target) this.reached?.();
    return ack();
  }
  all(target: number): Promise<void> {
    this.target = target;
    return this.seen >= target ? Promise.resolve() : new Promise((resolve) => (this.reached = resolve));
  }
}

async function twophase(run: number, perPartition: KafkaRecord[][]): Promise<number> {
  const kafka = new FakeKafka(['orders', 'orders.dlq']);
  const source = new KafkaSource({ client: kafka }, { topics: ['orders'], groupId: `bench-${run}`, logger: silentLogger, ...(process.env.CLAIM_BATCH ? { claimBatchSize: Number(process.env.CLAIM_BATCH) } : {}) });
  const consumer = new Noop({ name: `bench-${run}`, claimer: new InMemoryClaimer(), source, logger: silentLogger, concurrency: PARTITIONS, deployment: { replicas: 1 } });
  await consumer.start();
  const client = kafka.consumers[0]!;
  client.join({ orders: perPartition.map((_, p) => p) });
  const commit = async () => undefined;
  const cpu = await measure(
    perPartition,
    async (partition, messages) => {
      while (client.pausedSet.has(`orders/${partition}`)) await sleep(1);
      await client.deliverBatch(batchOf('orders', partition, messages, commit, () => undefined));
    },
    () => consumer.all(N),
  );
  await consumer.stop();
  return cpu;
}

async function main(): Promise<void> {
  const per = Math.ceil(N / PARTITIONS);
  const sides = { raw: [] as number[], floor: [] as number[], twophase: [] as number[] };
  for (let run = 0; run < RUNS; run++) {
    const perPartition = Array.from({ length: PARTITIONS }, (_, p) => records(run, p, Math.min(per, N - p * per)));
    // Alternate the order of the sides from run to run, so a drift in the machine's load is shared.
    const order: Array<keyof typeof sides> = run % 2 === 0 ? ['raw', 'floor', 'twophase'] : ['twophase', 'floor', 'raw'];
    for (const side of order) {
      if (only && only !== side && side !== 'raw') continue;
      if (side === 'raw') sides.raw.push(await bare(run, perPartition, false));
      else if (side === 'floor') sides.floor.push(await bare(run, perPartition, true));
      else sides.twophase.push(await twophase(run, perPartition));
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const over = (xs: number[]) => median(xs.map((x, i) => x - sides.raw[i]!));
  console.log(`${N} records x ${RUNS} runs, ${PARTITIONS} partitions, batches of ${BATCH}`);
  console.log(`bare eachBatch loop           cpu ${median(sides.raw).toFixed(2)} us/record`);
  if (sides.floor.length) console.log(`floor: + Map claim/commit     cpu ${median(sides.floor).toFixed(2)} us/record  adds ${over(sides.floor).toFixed(2)}`);
  if (sides.twophase.length) console.log(`KafkaSource + in-memory       cpu ${median(sides.twophase).toFixed(2)} us/record  adds ${over(sides.twophase).toFixed(2)}`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
