/**
 * The twophase demo: publishes ~10,000 payments (a share duplicated, a few poison or garbled),
 * runs several consumers at once, crashes some at every step of the pipeline, and checks that no
 * payment is lost and that every duplicated effect comes from the one documented window (a crash
 * after the effect and before the commit).
 *
 *   npm run demo                                          # embedded broker + in-memory claimer
 *   npm run demo -- --broker rabbitmq --claimer redis     # local RabbitMQ + Redis
 *   npm run demo -- --broker kafka --claimer redis        # local Kafka + Redis
 *   npm run demo -- --broker rabbitmq --claimer postgres  # the PostgreSQL transactional inbox:
 *                                                         # effect rows commit with the claim, 0 duplicates
 *   npm run demo -- --outbox --messages 1000              # PostgreSQL outbox → relays → RabbitMQ → inbox (outbox.ts)
 *
 * Exit code 0 when the verdict holds, 1 otherwise.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import {
  type ConsumerEvent,
  type Delivery,
  InMemoryClaimer,
  type MessageSource,
  silentLogger,
} from '../../src';
import { type DeliverySink, sleep as pause } from '../../src/adapter-kit';
import { CrashableClaimer } from '../../adapters/memory';
import { type CrashPoint, type Payment, PaymentConsumer } from './demo-consumer';
import { EffectLedger } from './ledger';
import { runOutboxDemo } from './outbox';
import { printReport, type RunStats } from './report';
import { Rng } from './rng';
import type { CrashableSource, DemoMessage, DemoStack } from './stack';
import { memoryStack } from './stacks/memory';
import { type ClaimerKind, realStack } from './stacks/real';

/** This loop is the process's main work: its pauses keep the process alive (twophase's own are unref'd). */
const sleep = (ms: number): Promise<void> => pause(ms, undefined, { keepProcessAlive: true });

/** Short, so a crashed worker's leases end soon and the run stays short. */
const LEASE_TTL_MS = 1_000;
const BUSY_REQUEUE_DELAY_MS = 100;

interface DemoOptions {
  broker: 'memory' | 'rabbitmq' | 'kafka';
  claimer: ClaimerKind;
  messages: number;
  duplicateShare: number;
  consumers: number;
  concurrency: number | undefined;
  poison: number;
  crashRate: number;
  seed: number;
  timeoutS: number;
  quiet: boolean;
  perWorkerClaims: boolean;
  outbox: boolean;
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('expected a non-negative integer');
  return n;
}

function share(value: string): number {
  const n = Number(value);
  if (!(n >= 0 && n <= 1)) throw new InvalidArgumentError('expected a number in [0, 1]');
  return n;
}

function parseOptions(argv: string[]): DemoOptions {
  const program = new Command()
    .name('twophase-demo')
    .description('Publish payments, crash consumers at every step, and check the effect-once verdict.')
    .addOption(new Option('--broker <broker>', 'message broker').choices(['memory', 'rabbitmq', 'kafka']).default('memory').env('TWOPHASE_DEMO_BROKER'))
    .addOption(new Option('--claimer <claimer>', 'claim store').choices(['memory', 'redis', 'postgres']).default('memory').env('TWOPHASE_DEMO_CLAIMER'))
    .option('--messages <n>', 'unique payments to publish', positiveInt, 10_000)
    .option('--duplicate-share <x>', 'extra copies published, as a share of the unique payments', share, 0.15)
    .option('--consumers <n>', 'consumers running at once', positiveInt, 4)
    .option('--concurrency <n>', 'in-flight messages per consumer (default 16; 8 with postgres: each holds a connection)', positiveInt)
    .option('--poison <n>', 'poison payments (always fail permanently)', positiveInt, 10)
    .option('--crash-rate <x>', 'chance per delivery of a crash at each crash point', share, 0.002)
    .option('--seed <n>', 'random seed (reproducible runs)', positiveInt, 42)
    .option('--timeout-s <n>', 'give up after this many seconds', positiveInt, 300)
    .option('--quiet', 'no progress lines', false)
    .option('--outbox', 'outbox mode: orders staged in the PostgreSQL outbox (some rolled back), relays crashing at every step, an inbox consumer on RabbitMQ; the verdict counts phantom and duplicate events (outbox.ts)', false)
    .option('--per-worker-claims', 'control run: each worker keeps its own in-memory claims (as separate replicas would); the verdict should fail', false)
    .parse(argv);
  return program.opts<DemoOptions>();
}

/** In-flight messages per consumer: the option, else 16, or 8 with the inbox (each holds a PostgreSQL connection). */
function concurrencyOf(options: DemoOptions): number {
  return options.concurrency ?? (options.claimer === 'postgres' ? 8 : 16);
}

async function makeStack(options: DemoOptions): Promise<DemoStack> {
  if (options.broker === 'memory' && options.claimer === 'memory') return memoryStack();
  return realStack(options.broker, options.claimer, concurrencyOf(options) + 2);
}

function buildMessages(options: DemoOptions, rng: Rng): { messages: DemoMessage[]; uniqueKeys: string[]; poisonKeys: string[]; invalid: number; copies: number } {
  const uniqueKeys: string[] = [];
  const poisonKeys: string[] = [];
  const messages: DemoMessage[] = [];
  const body = (p: Payment) => Buffer.from(JSON.stringify(p));
  for (let i = 0; i < options.messages; i++) {
    const key = `pay-${options.seed}-${i}`;
    uniqueKeys.push(key);
    messages.push({ key, body: body({ account: `acct-${i % 97}`, amountCents: 100 + (i % 5000) }) });
  }
  const copies = Math.round(options.messages * options.duplicateShare);
  for (let i = 0; i < copies; i++) {
    const original = messages[Math.floor(rng.next() * options.messages)]!;
    messages.push(original);
  }
  for (let i = 0; i < options.poison; i++) {
    const key = `poison-${options.seed}-${i}`;
    poisonKeys.push(key);
    messages.push({ key, body: body({ account: 'closed', amountCents: 1, poison: true }) });
  }
  // Messages that cannot be handled at all: garbled bodies, and one with no key.
  const invalid = 3;
  messages.push({ key: `garbled-${options.seed}-1`, body: Buffer.from('{"account": "acct-1", "amountCe') });
  messages.push({ key: `garbled-${options.seed}-2`, body: Buffer.from([0xff, 0xfe, 0x00]) });
  messages.push({ key: undefined, body: body({ account: 'acct-2', amountCents: 5 }) });
  for (let i = messages.length - 1; i > 0; i--) {
    const j = Math.floor(rng.next() * (i + 1));
    [messages[i], messages[j]] = [messages[j]!, messages[i]!];
  }
  return { messages, uniqueKeys, poisonKeys, invalid, copies };
}

/** Wraps a worker's source so settles of a dead worker never reach the broker, and final settles are counted. */
function demoSource(inner: CrashableSource, consumer: () => PaymentConsumer, stats: RunStats): MessageSource {
  /** A dead worker's settle: dropped, or handed to a source that ignores it by itself. */
  const afterCrash = async (settle: () => Promise<void>) => {
    if (inner.forwardSettlesAfterCrash) await settle().catch(() => undefined);
  };
  const wrap = (d: Delivery): Delivery => ({
    ...d,
    settler: {
      ack: async (info) => {
        const c = consumer();
        if (c.crashOnAck.has(d.body)) {
          try {
            c.crash('after_commit_before_ack');
          } finally {
            await afterCrash(() => d.settler.ack(info));
          }
        }
        if (c.crashed) return afterCrash(() => d.settler.ack(info));
        await d.settler.ack(info);
        stats.finals++;
      },
      requeue: async (delayMs, info) => {
        if (consumer().crashed) return afterCrash(() => d.settler.requeue(delayMs, info));
        stats.requeues[info.cause] = (stats.requeues[info.cause] ?? 0) + 1;
        await d.settler.requeue(delayMs, info);
      },
      reject: async (info) => {
        if (consumer().crashed) return afterCrash(() => d.settler.reject(info));
        await d.settler.reject(info);
        stats.finals++;
        stats.deadLettered++;
      },
    },
  });
  return {
    system: inner.system,
    start: (sink: DeliverySink, opts) =>
      inner.start(
        {
          dispatch: (d, p) => {
            stats.delivered++;
            return sink.dispatch(wrap(d), p);
          },
          submit: (d, p) => {
            stats.delivered++;
            return sink.submit(wrap(d), p);
          },
          claimBatch: (ds) => sink.claimBatch(ds),
        },
        opts,
      ),
    stopIntake: () => inner.stopIntake(),
    close: () => inner.close(),
    isConsuming: () => inner.isConsuming?.() ?? true,
  };
}

async function main(): Promise<number> {
  const options = parseOptions(process.argv);
  if (options.outbox) return runOutboxDemo({ messages: options.messages, consumers: options.consumers, crashRate: options.crashRate, seed: options.seed, timeoutS: options.timeoutS, quiet: options.quiet });
  const rng = new Rng(options.seed);
  const stack = await makeStack(options);
  const ledger = new EffectLedger();
  const stats: RunStats = {
    published: 0,
    delivered: 0,
    finals: 0,
    handlerRuns: 0,
    duplicatesSkipped: 0,
    busyRequeues: 0,
    requeues: {},
    deadLettered: 0,
    commitFailed: 0,
    leaseLost: 0,
    effectWrites: 0,
    crashes: { before_effect: 0, after_effect_before_commit: 0, after_commit_before_ack: 0 },
  };
  const { messages, uniqueKeys, poisonKeys, invalid, copies } = buildMessages(options, rng);
  stats.published = messages.length;

  // With the inbox: every effect row written, counted to show how many a crash rolled back.
  const inbox = stack.inbox;
  const recordEffect = inbox
    ? async (transaction: unknown, key: string, worker: number, fencingToken: number) => {
        await inbox.recordEffect(transaction, key, worker, fencingToken);
        stats.effectWrites++;
      }
    : undefined;

  const live = new Set<PaymentConsumer>();
  let nextWorker = 0;
  let stopping = false;
  const plan = {
    rate: { before_effect: options.crashRate, after_effect_before_commit: options.crashRate, after_commit_before_ack: options.crashRate },
    maxWorkMs: 3,
  };

  const startWorker = async (): Promise<void> => {
    const worker = ++nextWorker;
    const own = options.perWorkerClaims ? undefined : stack.inbox?.workerClaimer(worker);
    const claimer = new CrashableClaimer(options.perWorkerClaims ? new InMemoryClaimer() : (own?.claimer ?? stack.claimer!));
    const inner = stack.makeSource(worker);
    const onEvent = (e: ConsumerEvent) => {
      switch (e.type) {
        case 'acquired':
          stats.handlerRuns++;
          break;
        case 'done_duplicate':
          stats.duplicatesSkipped++;
          break;
        case 'busy':
          stats.busyRequeues++;
          break;
        case 'committed':
          if (e.key) ledger.committed(e.key, worker);
          break;
        case 'commit_failed':
          if (!self.crashed) stats.commitFailed++;
          break;
        case 'lease_lost':
          stats.leaseLost++;
          break;
        default:
          break;
      }
    };
    const self: PaymentConsumer = new PaymentConsumer(
      {
        name: 'payments',
        claimer,
        source: demoSource(inner, () => self, stats),
        concurrency: concurrencyOf(options),
        leaseTtlMs: LEASE_TTL_MS,
        doneTtlMs: 3_600_000,
        busyRequeueDelayMs: BUSY_REQUEUE_DELAY_MS,
        retryBackoff: { initialDelayMs: 50, maxDelayMs: 500 },
        claimRetries: 1,
        claimBackoff: { initialDelayMs: 5, maxDelayMs: 5 },
        commitDeadlineMs: 100,
        releaseDeadlineMs: 50,
        unavailableRequeueDelayMs: 100,
        deployment: { replicas: stack.replicas },
        logger: silentLogger,
        observers: [{ onEvent }],
      },
      worker,
      ledger,
      rng,
      plan,
      (point: CrashPoint) => {
        stats.crashes[point]++;
        ledger.crashedWorkers.add(worker);
        claimer.crashed = true;
        live.delete(self);
        void Promise.allSettled([inner.crash(), own?.crash()]).finally(() => {
          if (!stopping) void startWorkerWithRetry();
        });
      },
      recordEffect,
    );
    live.add(self);
    try {
      await self.start();
    } catch (error) {
      live.delete(self);
      await inner.close().catch(() => undefined);
      throw error;
    }
  };

  /** A replacement worker retries its start (the broker may be busy closing the dead one's connection). */
  const startWorkerWithRetry = async (): Promise<void> => {
    for (let attempt = 1; !stopping; attempt++) {
      try {
        await startWorker();
        return;
      } catch (error) {
        if (attempt >= 20) throw error;
        await sleep(200);
      }
    }
  };

  for (let i = 0; i < options.consumers; i++) await startWorker();
  await stack.publish(messages);

  const started = Date.now();
  let lastProgress = 0;
  // Done when every message was settled for good and nothing waits or runs anywhere, three checks
  // in a row (a settle can be skipped as stale after a connection loss, so counts alone can lie).
  let quietChecks = 0;
  for (;;) {
    if (Date.now() - started > options.timeoutS * 1000) break;
    const inFlight = [...live].reduce((n, c) => n + c.health().inFlight, 0);
    const idle = stats.finals >= stats.published && inFlight === 0 && (await stack.waiting()) === 0;
    quietChecks = idle ? quietChecks + 1 : 0;
    if (quietChecks >= 3) break;
    if (!options.quiet && Date.now() - lastProgress >= 1000) {
      lastProgress = Date.now();
      const settled = Math.min(stats.finals, stats.published);
      const pct = ((100 * settled) / stats.published).toFixed(1);
      process.stdout.write(`  settled ${settled}/${stats.published} (${pct} %), delivered ${stats.delivered}, crashes ${ledger.crashedWorkers.size}\n`);
    }
    await sleep(idle ? 300 : 50);
  }
  const elapsedMs = Date.now() - started;
  stopping = true;
  await Promise.all([...live].map((c) => c.stop()));
  const deadLetters = await stack.deadLetters();
  // With the inbox the effects are the rows the database committed, not the handler's calls.
  const effects = stack.inbox ? EffectLedger.fromRows(await stack.inbox.effects(), ledger.crashedWorkers) : ledger;
  await stack.close();
  return printReport({ label: stack.label, inbox: stack.inbox !== undefined, options, copies, busyRequeueDelayMs: BUSY_REQUEUE_DELAY_MS, leaseTtlMs: LEASE_TTL_MS, stats, ledger: effects, uniqueKeys, poisonKeys, invalid, deadLetters, elapsedMs, timedOut: quietChecks < 3 });
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(error);
    process.exit(2);
  },
);
