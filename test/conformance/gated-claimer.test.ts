/**
 * GatedClaimer on in-memory claimers with a fake clock: the conformance suite (gate up, and gate
 * down throughout), and the gate's rules in isolation — duplicates cost no truth call, the gate is
 * never marked done before (or without) the truth's commit, a lost gate entry is repopulated from
 * the truth, a gate outage falls back to the truth and recovers after gateRetryMs. The same rules
 * on real Redis and PostgreSQL: test/integration/postgres/gated-*.test.ts.
 */
import {
  type Claimer,
  ClaimerUnavailableError,
  type ClaimOptions,
  type ClaimResult,
  ConfigurationError,
  InMemoryClaimer,
  KeyConflictError,
  type Receipt,
  TwophaseError,
  silentLogger,
} from '../../src';
import { type LeaseIdentity, type LeaseOutcome } from '../../src/adapter-kit';
import { GatedClaimer } from '../../adapters/gated';
import { type ClaimerFactory, describeClaimerConformance } from './claimer-conformance';
import { describeRunOnceConformance } from './run-once-conformance';
import { ReplyFaults } from './reply-faults';

/** The in-memory claimer whose store primitives act, then may lose their reply. */
class ReplyDroppingClaimer extends InMemoryClaimer {
  readonly faults = new ReplyFaults();
  protected override commitLease(lease: LeaseIdentity, resultJson: string | undefined, doneTtlMs: number): LeaseOutcome {
    const outcome = super.commitLease(lease, resultJson, doneTtlMs);
    this.faults.after('commit');
    return outcome;
  }
  protected override releaseLease(lease: LeaseIdentity, resetAttempts: boolean, uncountAttempt?: boolean): LeaseOutcome {
    const outcome = super.releaseLease(lease, resetAttempts, uncountAttempt);
    this.faults.after('release');
    return outcome;
  }
}

/** A claimer in front of another that counts claims and can be switched off (rejects as a store outage). */
class Switchable implements Claimer {
  readonly kind = 'distributed' as const;
  claims = 0;
  down = false;
  constructor(public inner: Claimer) {}
  claim(key: string, options: ClaimOptions): Promise<ClaimResult> {
    this.claims++;
    if (this.down) return Promise.reject(new ClaimerUnavailableError('switched off'));
    return this.inner.claim(key, options);
  }
}

/** A truth whose next acquired receipt's commit fails for good (as a rolled-back transaction) without committing. */
class AbortingTruth extends Switchable {
  abortNextCommit = false;
  override async claim(key: string, options: ClaimOptions): Promise<ClaimResult> {
    const result = await super.claim(key, options);
    if (result.state !== 'acquired' || !this.abortNextCommit) return result;
    this.abortNextCommit = false;
    const inner = result.receipt;
    const receipt: Receipt = {
      key: inner.key,
      acquired: true,
      ownerToken: inner.ownerToken,
      fencingToken: inner.fencingToken,
      commit: async () => {
        await inner.release();
        throw new TwophaseError('TRANSACTION_ABORTED', 'injected: the transaction rolled back');
      },
      release: (o) => inner.release(o),
      extend: (ms) => inner.extend(ms),
    };
    return { ...result, receipt };
  }
}

function acquired(result: ClaimResult) {
  if (result.state !== 'acquired') throw new Error(`expected acquired, got ${result.state}`);
  return result;
}

describe('GatedClaimer on in-memory claimers', () => {
  const gatedFactory: ClaimerFactory = async () => {
    let t = 1_000;
    const clock = { now: () => t };
    const truth = new ReplyDroppingClaimer({ clock });
    const claimer = new GatedClaimer({ gate: new InMemoryClaimer({ clock }), truth, clock, logger: silentLogger });
    return {
      claimer,
      leaseTtlMs: 1_000,
      advance: async (ms) => {
        t += ms;
      },
      dropNextReply: (operation) => truth.faults.dropNext(operation),
      cleanup: async () => undefined,
    };
  };
  describeClaimerConformance('GatedClaimer (in-memory gate and truth, fake clock)', gatedFactory, { claimMany: false, commitMany: false, transactional: false });
  describeRunOnceConformance('GatedClaimer (in-memory gate and truth, fake clock)', gatedFactory);

  describeClaimerConformance('GatedClaimer with its gate down throughout (the truth decides alone)', async () => {
    let t = 1_000;
    const clock = { now: () => t };
    const truth = new ReplyDroppingClaimer({ clock });
    const gate = new Switchable(new InMemoryClaimer({ clock }));
    gate.down = true;
    const claimer = new GatedClaimer({ gate, truth, clock, logger: silentLogger }, { gateRetryMs: 0 });
    return {
      claimer,
      leaseTtlMs: 1_000,
      advance: async (ms) => {
        t += ms;
      },
      dropNextReply: (operation) => truth.faults.dropNext(operation),
      cleanup: async () => undefined,
    };
  }, { claimMany: false, commitMany: false, transactional: false });

  describe('the gate', () => {
    let t: number;
    const clock = { now: () => t };
    const opts = { leaseTtlMs: 1_000, doneTtlMs: 100_000 };
    let gate: Switchable;
    let truth: AbortingTruth;
    let claimer: GatedClaimer;
    const warnings: string[] = [];
    const logger = { ...silentLogger, warn: (_o: object, msg?: string) => void warnings.push(msg ?? '') };

    beforeEach(() => {
      t = 1_000;
      warnings.length = 0;
      gate = new Switchable(new InMemoryClaimer({ clock }));
      truth = new AbortingTruth(new InMemoryClaimer({ clock }));
      claimer = new GatedClaimer({ gate, truth, clock, logger }, { gateRetryMs: 500 });
    });

    test('a duplicate of a completed key and a concurrent duplicate of a key in flight are answered without a truth call', async () => {
      const a = acquired(await claimer.claim('k1', opts));
      expect(truth.claims).toBe(1);
      const busy = await Promise.all(Array.from({ length: 10 }, () => claimer.claim('k1', opts)));
      expect(busy.every((r) => r.state === 'busy')).toBe(true);
      await a.receipt.commit({ paid: 1 });
      const dups = await Promise.all(Array.from({ length: 10 }, () => claimer.claim('k1', opts)));
      expect(dups.every((r) => r.state === 'done' && JSON.stringify(r.result) === '{"paid":1}')).toBe(true);
      expect(truth.claims).toBe(1);
      expect(claimer.stats).toMatchObject({ gateAnswers: 20, truthClaims: 1, repopulated: 0, fallbackClaims: 0 });
    });

    test('hole 2: a truth commit that fails (rolled back) never leaves the key done in the gate; the next claim runs again', async () => {
      truth.abortNextCommit = true;
      const a = acquired(await claimer.claim('k2', opts));
      await expect(a.receipt.commit({ paid: 1 })).rejects.toThrow(/rolled back/);
      const gateView = await gate.inner.claim('k2', opts);
      expect(gateView.state).toBe('acquired'); // the gate gave its lease up: no done entry
      if (gateView.state === 'acquired') await gateView.receipt.release();
      const again = acquired(await claimer.claim('k2', opts));
      expect(again.attempt).toBe(2);
    });

    test('hole 1: the gate loses a completed key (flush, restart): the truth answers done, the gate is repopulated, the effect never runs again', async () => {
      await acquired(await claimer.claim('k3', opts)).receipt.commit('r3');
      gate.inner = new InMemoryClaimer({ clock }); // an empty gate, as after FLUSHALL
      const first = await claimer.claim('k3', opts);
      expect(first.state === 'done' && first.result).toBe('r3');
      expect(claimer.stats.repopulated).toBe(1);
      const truthCalls = truth.claims;
      const second = await claimer.claim('k3', opts);
      expect(second.state === 'done' && second.result).toBe('r3');
      expect(truth.claims).toBe(truthCalls); // served by the gate again
    });

    test('a key the truth holds in flight while the gate lost it: busy, and the gate lease is given back', async () => {
      const a = acquired(await claimer.claim('k4', opts));
      gate.inner = new InMemoryClaimer({ clock });
      expect((await claimer.claim('k4', opts)).state).toBe('busy');
      expect((await gate.inner.claim('k4', opts)).state).toBe('acquired'); // not left held
      await a.receipt.commit();
    });

    test('gate outage: claims fall back to the truth (still one acquired of many), one warning, and the gate is tried again after gateRetryMs', async () => {
      gate.down = true;
      const results = await Promise.all(Array.from({ length: 5 }, () => claimer.claim('k5', opts)));
      expect(results.filter((r) => r.state === 'acquired')).toHaveLength(1);
      expect(results.filter((r) => r.state === 'busy')).toHaveLength(4);
      expect(claimer.gateDown).toBe(true);
      const gateCalls = gate.claims;
      await acquired(results.find((r) => r.state === 'acquired')!).receipt.commit('r5');
      expect((await claimer.claim('k5', opts)).state).toBe('done');
      expect(gate.claims).toBe(gateCalls); // within gateRetryMs the gate is skipped
      gate.down = false;
      t += 600;
      const back = await claimer.claim('k5', opts);
      expect(back.state === 'done' && back.result).toBe('r5'); // from the truth, copied to the gate
      expect(claimer.gateDown).toBe(false);
      expect(claimer.stats.repopulated).toBe(1);
      expect(warnings.filter((w) => /failed/.test(w))).toHaveLength(1);
      expect(warnings.filter((w) => /answers again/.test(w))).toHaveLength(1);
    });

    test('a fingerprint the gate remembers from a rolled-back attempt does not refuse the key: the truth decides', async () => {
      // The gate keeps a released record's fingerprint; a transactional truth forgets a rolled-back row.
      const a = acquired(await claimer.claim('k6', { ...opts, fingerprint: 'aaa' }));
      await a.receipt.release();
      truth.inner = new InMemoryClaimer({ clock }); // the truth forgot the attempt (a rollback)
      const b = acquired(await claimer.claim('k6', { ...opts, fingerprint: 'bbb' }));
      expect(claimer.stats.conflictChecks).toBe(1);
      await b.receipt.commit();
      await expect(claimer.claim('k6', { ...opts, fingerprint: 'aaa' })).rejects.toBeInstanceOf(KeyConflictError);
    });

    test('configuration errors: missing claimers, the same claimer twice, unknown or invalid options', () => {
      const c = new InMemoryClaimer();
      expect(() => new GatedClaimer({ gate: c, truth: undefined as never })).toThrow(ConfigurationError);
      expect(() => new GatedClaimer({ gate: c, truth: c })).toThrow(/same claimer/);
      expect(() => new GatedClaimer({ gate: c, truth: new InMemoryClaimer() }, { gateRetyMs: 5 } as never)).toThrow(/did you mean "gateRetryMs"/);
      expect(() => new GatedClaimer({ gate: c, truth: new InMemoryClaimer() }, { gateRetryMs: -1 })).toThrow(/gateRetryMs/);
      expect(() => new GatedClaimer({ gate: c, truth: new InMemoryClaimer(), pool: 1 } as never)).toThrow(/unknown option "pool"/);
      expect(new GatedClaimer({ gate: c, truth: new InMemoryClaimer() }).kind).toBe('in_memory');
    });
  });
});

test('GatedClaimer given a store client where a claimer goes: names it and the claimer it goes inside', () => {
  const redisLike = { sendCommand: () => undefined, defineCommand: () => undefined };
  expect(() => new GatedClaimer({ gate: redisLike as never, truth: new InMemoryClaimer() })).toThrow(
    /GatedClaimer dependency gate must be a Claimer \(an object with claim\(\)\), got an ioredis client: an ioredis client goes inside a claimer: new RedisClaimer\(\{ redis \}\)/,
  );
});
