/**
 * The consumers the benchmark compares, each draining a pre-filled queue of `count` messages.
 * Each returns the elapsed time from the first delivery to the last ack (ms) and the CPU time
 * this process spent meanwhile (µs, user + system, from `process.cpuUsage`).
 */
import { performance } from 'node:perf_hooks';
import amqp from 'amqplib';
import type Redis from 'ioredis';
import { ack, type Claimer, ConsumerBase, type Disposition, InMemoryClaimer, silentLogger } from '../../src';
import { type DeliverySink, settledSubmission } from '../../src/adapter-kit';
import { RedisClaimer } from '../../adapters/redis';
import { RabbitMqSource } from '../../adapters/rabbitmq';
import { AMQP_URL, BENCH_DELAY_TIERS_MS } from './broker';

/** Time and CPU of one drain. */
export interface Measured {
  readonly elapsedMs: number;
  readonly cpuUs: number;
  /** Variants with `batchClaims`: deliveries per batch claim (the source's `deliveries / claimBatches`). */
  readonly meanClaimBatch?: number;
}

function cpuSince(start: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(start);
  return d.user + d.system;
}

/**
 * Consumes `queue` with plain amqplib and manual acks until `count` messages were acked. `onMessage`
 * gets each delivery and an `ack` to call when done with it. Timed from the first delivery.
 */
async function consumeRaw(
  queue: string,
  prefetch: number,
  count: number,
  name: string,
  onMessage: (message: amqp.ConsumeMessage, ack: () => void) => void,
): Promise<Measured> {
  const model = await amqp.connect(AMQP_URL, { clientProperties: { connection_name: name } });
  const ch = await model.createChannel();
  await ch.prefetch(prefetch, false);
  let seen = 0;
  let first = 0;
  let cpu = process.cpuUsage();
  const measured = await new Promise<Measured>((resolve) => {
    void ch.consume(
      queue,
      (message) => {
        if (!message) return;
        if (first === 0) {
          first = performance.now();
          cpu = process.cpuUsage();
        }
        onMessage(message, () => {
          ch.ack(message, false);
          if (++seen === count) resolve({ elapsedMs: performance.now() - first, cpuUs: cpuSince(cpu) });
        });
      },
      { noAck: false },
    );
  });
  await model.close();
  return measured;
}

/** Raw amqplib: consume with manual acks, ack each message at once. */
export function runRaw(queue: string, prefetch: number, count: number): Promise<Measured> {
  return consumeRaw(queue, prefetch, count, 'twophase-bench-raw', (_message, ack) => ack());
}

/**
 * The floor: raw amqplib plus the least work any claim-before-effect, commit-before-ack design
 * does per message, written inline with no SDK around it.
 *
 *   floor-memory  one Map lookup and two Map writes per message (claim, then mark done)
 *   floor-redis   one plain `SET key owner NX PX` before the ack and one `SET key done PX` after,
 *                 no Lua, no fencing, on an auto-pipelining client (concurrent commands share writes)
 *
 * A goal above the floor's ratio cannot be met by any design that records a claim per key in
 * that store; twophase's distance to the floor is its own overhead.
 */
export function runFloor(queue: string, prefetch: number, count: number, store: 'memory' | Redis, prefix: string): Promise<Measured> {
  const claims = new Map<string, number>();
  return consumeRaw(queue, prefetch, count, 'twophase-bench-floor', (message, ack) => {
    const key = String(message.properties.headers?.['idempotency-key']);
    if (store === 'memory') {
      if (claims.get(key) === undefined) {
        claims.set(key, 1);
        claims.set(key, 2);
      }
      ack();
      return;
    }
    const recordKey = `${prefix}:{${key}}`;
    void store
      .set(recordKey, 'leased', 'PX', 30_000, 'NX')
      .then((claimed) => (claimed === 'OK' ? store.set(recordKey, 'done', 'PX', 600_000) : undefined))
      .then(ack);
  });
}

/**
 * The RabbitMQ source alone, with a sink that acks at once: the adapter's own cost (delivery
 * objects, settler, channel generation) without the core pipeline. With `burnUs`, the sink first
 * spins that many µs of CPU per message, to show what a per-message cost does to the rate.
 */
export async function runAdapterOnly(queue: string, prefetch: number, count: number, burnUs = 0): Promise<Measured> {
  let first = 0;
  let done = 0;
  let cpu = process.cpuUsage();
  let finish!: (m: Measured) => void;
  const finished = new Promise<Measured>((resolve) => (finish = resolve));
  const sink: DeliverySink = {
    submit: (delivery, preclaimed) => settledSubmission(sink.dispatch(delivery, preclaimed)),
    dispatch: async (delivery) => {
      if (first === 0) {
        first = performance.now();
        cpu = process.cpuUsage();
      }
      if (burnUs > 0) {
        const until = performance.now() + burnUs / 1000;
        while (performance.now() < until) {
          // spin: a stand-in for per-message CPU work
        }
      }
      await delivery.settler.ack({ duplicate: false });
      if (++done === count) finish({ elapsedMs: performance.now() - first, cpuUs: cpuSince(cpu) });
      return { action: 'ack', outcome: 'committed', handled: false, durationMs: 0 };
    },
    claimBatch: async (deliveries) => deliveries.map(() => ({ kind: 'skipped' as const })),
  };
  const source = new RabbitMqSource({ url: AMQP_URL, queue, delayTiersMs: BENCH_DELAY_TIERS_MS, logger: silentLogger, connectionName: 'twophase-bench-adapter' });
  await source.start(sink, { concurrency: prefetch });
  const measured = await finished;
  await source.stopIntake();
  await source.close();
  return measured;
}

/** A do-nothing handler: what is measured is the pipeline (claim, commit, settle) itself. */
class BenchConsumer extends ConsumerBase<Buffer> {
  first = 0;
  cpu = process.cpuUsage();
  protected override decode(raw: Buffer): Buffer {
    return raw;
  }
  async handle(): Promise<Disposition> {
    if (this.first === 0) {
      this.first = performance.now();
      this.cpu = process.cpuUsage();
    }
    return ack();
  }
}

/**
 * The twophase consumer over the RabbitMQ source with the given claimer; `batchWindowMs` turns on
 * `batchClaims` with that claim window (0 = one event-loop turn), undefined leaves it off.
 */
export async function runTwophase(queue: string, prefetch: number, count: number, claimer: Claimer, batchWindowMs?: number): Promise<Measured> {
  const batching = batchWindowMs === undefined ? {} : { batchClaims: true, batchWindowMs };
  const source = new RabbitMqSource({ url: AMQP_URL, queue, delayTiersMs: BENCH_DELAY_TIERS_MS, logger: silentLogger, connectionName: 'twophase-bench', ...batching });
  const consumer = new BenchConsumer({
    name: 'bench',
    claimer,
    source,
    concurrency: prefetch,
    doneTtlMs: 10 * 60 * 1000,
    logger: silentLogger,
    deployment: { replicas: 1 },
  });
  await consumer.start();
  const measured = await new Promise<Measured>((resolve) => {
    const poll = setInterval(() => {
      if (source.stats.acks >= count) {
        clearInterval(poll);
        resolve({ elapsedMs: performance.now() - consumer.first, cpuUs: cpuSince(consumer.cpu) });
      }
    }, 1);
  });
  const stats = source.stats;
  const withBatch = stats.claimBatches > 0 ? { ...measured, meanClaimBatch: stats.deliveries / stats.claimBatches } : measured;
  if (stats.requeues.busy + stats.requeues.retry + stats.requeues.claimer_unavailable + stats.rejects > 0) {
    throw new Error(`benchmark run was not clean: ${JSON.stringify(stats)}`);
  }
  await consumer.stop();
  return withBatch;
}

export function memoryClaimer(): Claimer {
  return new InMemoryClaimer();
}

export function redisClaimer(redis: Redis, prefix: string): RedisClaimer {
  return new RedisClaimer({ redis }, { prefix });
}
