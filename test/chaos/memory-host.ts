/**
 * The memory stack of the chaos harness: the in-process broker and InMemoryClaimer live in one
 * process, so this child process hosts the broker, the claimer, the producer and several
 * in-process consumers ("workers"). A kill is a simulated crash: the worker's unsettled
 * deliveries go back to the queue, its claimer view fails every call, and nothing it still runs
 * reaches the broker or applies an effect after its next step; a replacement worker starts.
 * Effects, markers and outcomes go to the same PostgreSQL ledger as the other stacks.
 *
 * Started by the harness with a {@link MemoryHostConfig} as JSON in argv[2]; reports one
 * {@link MemoryHostResult} over IPC and exits.
 */
import { CrashableClaimer, MemoryBroker, MemorySource } from '../../adapters/memory';
import { InMemoryClaimer, type Logger } from '../../src';
import { sleep as pause } from '../../src/adapter-kit';
import { type ArmedFault, ChaosConsumer, chaosConsumerOptions, type WorkerControl } from './chaos-consumer';
import { LedgerWriter } from './ledger';
import type { ScenarioProfile } from './profiles';
import { Rng } from './rng';
import { buildPlan, buildSchedule, type FaultKind, type ScheduledFault } from './schedule';
import { logFaultLine } from './stacks/stack';

/** This loop is the process's main work: its pauses keep the process alive (twophase's own are unref'd). */
const sleep = (ms: number): Promise<void> => pause(ms, undefined, { keepProcessAlive: true });

export interface MemoryHostConfig {
  readonly runId: string;
  readonly seed: number;
  readonly scenario: ScenarioProfile;
  readonly runStartedAt: number;
}

export interface MemoryHostResult {
  readonly t: 'result';
  readonly published: number;
  readonly uniqueKeys: readonly string[];
  readonly poison: readonly string[];
  readonly duplicatesInjected: number;
  readonly killedWorkers: readonly string[];
  readonly faults: Readonly<Partial<Record<FaultKind, number>>>;
  readonly deadLetters: readonly { key: string; reason: string }[];
  readonly drained: boolean;
  readonly elapsedMs: number;
}

const QUEUE = 'chaos';

const logger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: (obj, msg) => process.stderr.write(`${JSON.stringify({ level: 'warn', msg, ...obj })}\n`),
  error: (obj, msg) => process.stderr.write(`${JSON.stringify({ level: 'error', msg, ...obj })}\n`),
};


interface Worker {
  readonly id: string;
  readonly consumer: ChaosConsumer;
  readonly source: MemorySource;
  readonly claimer: CrashableClaimer;
  readonly control: WorkerControl & { dead: boolean };
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2]!) as MemoryHostConfig;
  const s = config.scenario;
  const rng = new Rng(config.seed);
  const broker = new MemoryBroker();
  const shared = new InMemoryClaimer();
  const ledger = new LedgerWriter(config.runId, 'memory-host', 8);
  const elapsed = () => Date.now() - config.runStartedAt;
  const workers: Worker[] = [];
  const killed: string[] = [];
  const faults: Partial<Record<FaultKind, number>> = {};
  let next = 0;
  let stopping = false;

  const startWorker = async (): Promise<void> => {
    const id = `m${++next}`;
    const claimer = new CrashableClaimer(shared);
    const source = new MemorySource({ broker, queue: QUEUE });
    const control: WorkerControl & { dead: boolean } = {
      id,
      dead: false,
      kill: async () => crash(worker),
      overrun: async (key, ms) => {
        claimer.stalled.add(key);
        await sleep(ms);
        claimer.stalled.delete(key);
      },
    };
    const guarded = ChaosConsumer.killableSource(
      {
        system: source.system,
        start: (sink, opts) =>
          source.start(
            {
              submit: () => {
                throw new Error('the memory source dispatches; it never submits');
              },
              dispatch: (d, p) =>
                sink.dispatch(
                  {
                    ...d,
                    settler: {
                      ack: (info) => (control.dead ? Promise.resolve() : d.settler.ack(info)),
                      requeue: (ms, info) => (control.dead ? Promise.resolve() : d.settler.requeue(ms, info)),
                      reject: (info) => (control.dead ? Promise.resolve() : d.settler.reject(info)),
                    },
                  },
                  p,
                ),
              claimBatch: (ds) => sink.claimBatch(ds),
            },
            opts,
          ),
        stopIntake: () => source.stopIntake(),
        close: () => source.close(),
        isConsuming: () => source.isConsuming(),
      },
      () => consumer,
    );
    const consumer = new ChaosConsumer(chaosConsumerOptions({ claimer, source: guarded, concurrency: s.concurrency, deployment: { replicas: 1 }, logger }, s.leaseTtlMs), {
      control,
      ledger: ledger.forWorker(id),
      rng: rng.fork(id),
      handler: s.handler,
      leaseTtlMs: s.leaseTtlMs,
      strict: s.name === 'strict',
      runStartedAt: config.runStartedAt,
    });
    const worker: Worker = { id, consumer, source, claimer, control };
    workers.push(worker);
    await consumer.start();
  };

  const crash = (w: Worker): void => {
    if (w.control.dead) return;
    w.control.dead = true;
    w.claimer.crashed = true;
    killed.push(w.id);
    w.source.crash();
    workers.splice(workers.indexOf(w), 1);
    if (!stopping) setTimeout(() => void startWorker(), s.restartDelayMs);
  };

  const live = () => workers.filter((w) => !w.control.dead);
  const fire = async (f: ScheduledFault): Promise<void> => {
    const candidates = live();
    if (candidates.length === 0) return;
    const target = candidates[Math.floor(f.pick * candidates.length)]!;
    faults[f.kind] = (faults[f.kind] ?? 0) + 1;
    if (f.kind === 'kill') {
      await ledger.fault(elapsed(), 'kill', target.id, 'simulated crash at a random moment');
      crash(target);
    } else {
      await ledger.fault(elapsed(), `arm:${f.kind}`, target.id);
      target.consumer.arm(f.kind as ArmedFault);
    }
    logFaultLine(elapsed(), f.kind, target.id);
  };

  for (let i = 0; i < s.workers; i++) await startWorker();
  const plan = buildPlan(rng.fork('plan'), { runId: config.runId, messages: s.messages, duplicateShare: s.duplicateShare, poisonShare: s.poisonShare, publishMs: s.publishMs });
  const schedule = buildSchedule(rng.fork('faults'), { ratesPerMinute: s.faultsPerMinute, fromMs: 1000, untilMs: Math.max(2000, s.publishMs - 1000), durationMs: s.outageMs });
  const faultRuns = schedule.map((f) => sleep(Math.max(0, f.atMs - elapsed())).then(() => fire(f)));
  for (const m of plan) {
    const wait = m.atMs - elapsed();
    if (wait > 0) await sleep(wait);
    broker.publish(QUEUE, { body: JSON.stringify({ k: m.key, ...(m.poison ? { p: 1 } : {}) }), headers: { 'idempotency-key': m.key } });
  }
  await Promise.all(faultRuns);
  const deadline = Date.now() + s.drainTimeoutMs;
  while (!(broker.isDrained(QUEUE) && workers.every((w) => w.consumer.health().inFlight === 0))) {
    if (Date.now() > deadline) break;
    await sleep(100);
  }
  const drained = broker.isDrained(QUEUE);
  stopping = true;
  await Promise.all(workers.map((w) => w.consumer.stop()));
  await ledger.close();
  const uniqueKeys = plan.filter((m) => !m.duplicate).map((m) => m.key);
  const result: MemoryHostResult = {
    t: 'result',
    published: plan.length,
    uniqueKeys,
    poison: plan.filter((m) => m.poison && !m.duplicate).map((m) => m.key),
    duplicatesInjected: plan.filter((m) => m.duplicate).length,
    killedWorkers: killed,
    faults,
    deadLetters: broker.deadLetters(QUEUE).map((d) => ({ key: String(d.message.headers['idempotency-key']), reason: String(d.reason.reason) })),
    drained,
    elapsedMs: elapsed(),
  };
  broker.close();
  process.send!(result, () => process.exit(0));
}

main().catch((error: unknown) => {
  process.stderr.write(`memory host failed: ${String(error)}\n`);
  process.exit(2);
});
