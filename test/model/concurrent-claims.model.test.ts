/**
 * Interleavings of concurrent claim operations, chosen by fast-check's scheduler.
 *
 * Several actors (workers) each run a short program on a shared claimer: claim a key, then
 * commit, release or extend their receipt, or crash (abandon it). Every step waits on a task of
 * `fc.scheduler()`, and so does every reply, so the scheduler decides the order in which actors
 * act and in which they see answers. The recorded history must be linearizable against the
 * reference model: some order of the operations, consistent with real time, explains every
 * answer (exactly one owner per key at a time, fencing tokens increasing, done after commit, …).
 */
import fc from 'fast-check';
import type Redis from 'ioredis';
import { type Claimer, InMemoryClaimer } from '../../src';
import { RedisClaimer } from '../../adapters/redis';
import { describeWithServices } from '../support/services';
import {
  connectRedis,
  deleteMatching,
  REDIS_PROTOCOLS,
  type RespVersion,
  silentLogger,
  uniquePrefix,
} from '../integration/redis/support/redis-helpers';
import { at, type Operation, type Outcome } from './support/claim-model';
import { ClaimerDriver } from './support/claimer-driver';
import { checkLinearizable, type HistoryEntry } from './support/linearizability';

type ActorStep =
  | { readonly op: 'claim'; readonly key: string; readonly fingerprint?: string }
  | { readonly op: 'commit' | 'release' | 'extend' | 'crash' }
  | { readonly op: 'advance'; readonly ms: number };

interface Setting {
  readonly leaseTtlMs: number;
  readonly doneTtlMs: number;
  /** Time steps an actor may take; empty when time is real (the store's own clock). */
  readonly advancesMs: readonly number[];
}

function actorStep(setting: Setting): fc.Arbitrary<ActorStep> {
  const steps: fc.Arbitrary<ActorStep>[] = [
    fc.record({ op: fc.constant('claim' as const), key: fc.constantFrom('k1', 'k2'), fingerprint: fc.option(fc.constantFrom('f1', 'f2'), { freq: 4, nil: undefined }) }),
    fc.record({ op: fc.constantFrom('commit' as const, 'release' as const, 'extend' as const, 'crash' as const) }),
  ];
  if (setting.advancesMs.length > 0) steps.push(fc.record({ op: fc.constant('advance' as const), ms: fc.constantFrom(...setting.advancesMs) }));
  return fc.oneof({ weight: 3, arbitrary: steps[0]! }, { weight: 3, arbitrary: steps[1]! }, ...(steps[2] ? [{ weight: 1, arbitrary: steps[2] }] : []));
}

const programs = (setting: Setting) => fc.array(fc.array(actorStep(setting), { minLength: 1, maxLength: 7 }), { minLength: 2, maxLength: 4 });

/**
 * Runs the actors' programs under the scheduler and returns the history. `clock` is advanced by
 * `advance` steps (fake clock) and read by the model as each world's logical time.
 */
async function runActors(
  s: fc.Scheduler,
  claimer: Claimer,
  keyPrefix: string,
  setting: Setting,
  actors: readonly (readonly ActorStep[])[],
  advance: (ms: number) => void,
): Promise<HistoryEntry[]> {
  const driver = new ClaimerDriver(claimer, keyPrefix);
  const history: HistoryEntry[] = [];
  let seq = 0;
  const actor = async (index: number, program: readonly ActorStep[]): Promise<void> => {
    let receiptId: number | undefined;
    for (const st of program) {
      await s.schedule(Promise.resolve(), `actor ${index}: ${st.op}`);
      let operation: Operation;
      if (st.op === 'claim') operation = { op: 'claim', key: st.key, leaseTtlMs: setting.leaseTtlMs, doneTtlMs: setting.doneTtlMs, ...(st.fingerprint ? { fingerprint: st.fingerprint } : {}) };
      else if (st.op === 'advance') operation = { op: 'advance', ms: st.ms };
      else if (st.op === 'crash') {
        receiptId = undefined; // abandoned: never called again
        continue;
      } else if (receiptId === undefined) continue;
      else if (st.op === 'extend') operation = { op: 'extend', receiptId, ttlMs: setting.leaseTtlMs };
      else operation = { op: st.op, receiptId };
      const invokedAt = seq++;
      let running: Promise<Outcome>;
      if (operation.op === 'advance') {
        advance(operation.ms);
        running = Promise.resolve({ t: 'ok' });
      } else running = driver.run(operation);
      const outcome = await s.schedule(running, `actor ${index}: reply to ${operation.op}`);
      history.push({ actor: index, operation, invokedAt, returnedAt: seq++, outcome });
      if (outcome.t === 'acquired') receiptId = outcome.receiptId;
    }
  };
  const all = Promise.all(actors.map((program, i) => actor(i, program)));
  await s.waitFor(all);
  await all;
  return history;
}

function expectLinearizable(history: HistoryEntry[], clockAt: number, s: fc.Scheduler): void {
  const result = checkLinearizable(history, { slackMs: 0 }, (w) => at(clockAt + w.clock));
  if (!result.ok) throw new Error(`history is not linearizable against the claim model:\n${result.text}\nscheduler:\n${s.report().map((r) => r.label).join('\n')}`);
}

describe('model: concurrent interleavings (fast-check scheduler)', () => {
  test('InMemoryClaimer (fake clock; actors also let time pass)', async () => {
    const setting: Setting = { leaseTtlMs: 100, doneTtlMs: 250, advancesMs: [50, 100, 250] };
    await fc.assert(
      fc.asyncProperty(fc.scheduler(), programs(setting), async (s, actors) => {
        const start = 5_000;
        let t = start;
        const claimer = new InMemoryClaimer({ clock: { now: () => t } });
        const history = await runActors(s, claimer, '', setting, actors, (ms) => void (t += ms));
        expectLinearizable(history, start, s);
      }),
      { numRuns: 300 },
    );
  });
});

describeWithServices(['redis'], 'model: concurrent interleavings on RedisClaimer (127.0.0.1:6379)', () => {
  describe.each(REDIS_PROTOCOLS)('RESP%i', (protocol) => concurrentRedisSuite(protocol));
});

/** The Redis half, run once per RESP version (REDIS_PROTOCOLS). */
function concurrentRedisSuite(protocol: RespVersion): void {
  let client: Redis;
  const prefix = uniquePrefix('model-sched');
  beforeAll(async () => {
    client = await connectRedis(undefined, {}, protocol);
  });
  afterAll(async () => {
    await deleteMatching(client, `${prefix}:*`);
    await client.quit();
  });

  for (const coalesce of [true, false]) {
    test(`RedisClaimer, coalesce ${coalesce} (leases outlive the run: no expiry)`, async () => {
      const claimer = new RedisClaimer({ redis: client, logger: silentLogger }, { prefix, coalesce });
      await claimer.ready();
      const setting: Setting = { leaseTtlMs: 30_000, doneTtlMs: 60_000, advancesMs: [] };
      let run = 0;
      await fc.assert(
        fc.asyncProperty(fc.scheduler(), programs(setting), async (s, actors) => {
          const history = await runActors(s, claimer, `c${coalesce}-run${++run}:`, setting, actors, () => undefined);
          expectLinearizable(history, 0, s);
        }),
        { numRuns: 60 },
      );
      await claimer.close();
    });
  }
}
