/**
 * runOnce on any claimer: one jest suite, called beside the claimer conformance suite with the
 * same factory (`describeRunOnceConformance(name, factory)`), so the guard's rules are proved on
 * the in-memory, Redis and PostgreSQL claimers alike.
 */
import { InProgressError, KeyConflictError, PreviousAttemptFailedError, runOnce, runOnceKey, type RunOnceOptions } from '../../src';
import type { ClaimerFactory, ClaimerHarness } from './claimer-conformance';

/** Which cases apply to a claimer (all by default). */
export interface RunOnceCapabilities {
  /**
   * False when the lease is the claim's open transaction (PostgresClaimer `mode: 'transactional'`):
   * a claim abandoned without a settle holds a session until the server ends it, so the
   * abandoned-run case, which leaves one, does not run.
   */
  readonly abandonedRun?: boolean;
}

export function describeRunOnceConformance(name: string, factory: ClaimerFactory, capabilities: RunOnceCapabilities = {}): void {
  describe(`runOnce conformance: ${name}`, () => {
    let h: ClaimerHarness;
    let n = 0;
    beforeEach(async () => {
      h = await factory();
    });
    afterEach(async () => {
      await h.cleanup();
    });

    function options(label: string, extra: Partial<RunOnceOptions> = {}): RunOnceOptions {
      return { claimer: h.claimer, scope: { operation: 'conformance', actor: label }, key: `k-${++n}`, leaseTtlMs: h.leaseTtlMs, doneTtlMs: h.leaseTtlMs * 100, ...extra };
    }

    test('runs once, then replays the stored result', async () => {
      const o = options('replay');
      let runs = 0;
      const fn = () => {
        runs++;
        return { n: runs };
      };
      expect(await runOnce(o, fn)).toMatchObject({ status: 'ran', result: { n: 1 }, committed: true });
      expect(await runOnce(o, fn)).toMatchObject({ status: 'replayed', result: { n: 1 } });
      expect(runs).toBe(1);
    });

    test('a concurrent call is turned away with InProgressError while the first runs', async () => {
      const o = options('busy');
      let open!: () => void;
      const gate = new Promise<void>((resolve) => (open = resolve));
      let entered!: () => void;
      const started = new Promise<void>((resolve) => (entered = resolve));
      const first = runOnce(o, async () => {
        entered();
        await gate;
        return 'first';
      });
      await started;
      await expect(runOnce(o, () => 'second')).rejects.toBeInstanceOf(InProgressError);
      open();
      expect(await first).toMatchObject({ status: 'ran', result: 'first' });
    });

    test('another fingerprint is a KeyConflictError', async () => {
      const o = options('conflict');
      await runOnce({ ...o, fingerprint: 'a' }, () => 1);
      await expect(runOnce({ ...o, fingerprint: 'b' }, () => 2)).rejects.toBeInstanceOf(KeyConflictError);
    });

    test("a failure recorded ('record') blocks until retry: true; a failure released ('release') does not", async () => {
      const recorded = options('record');
      await expect(runOnce(recorded, () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
      await expect(runOnce(recorded, () => 1)).rejects.toBeInstanceOf(PreviousAttemptFailedError);
      expect(await runOnce({ ...recorded, retry: true }, () => 2)).toMatchObject({ status: 'ran', result: 2 });
      const released = options('release', { onFailure: 'release' });
      await expect(runOnce(released, () => Promise.reject(new Error('early')))).rejects.toThrow('early');
      expect(await runOnce(released, () => 3)).toMatchObject({ status: 'ran', result: 3, attempt: 1 });
    });

    if (capabilities.abandonedRun !== false) test('a run that never settled blocks the key once its lease expired, until retry: true', async () => {
      const o = options('crash');
      const crashed = await h.claimer.claim(runOnceKey(o.scope, o.key), { leaseTtlMs: o.leaseTtlMs, doneTtlMs: o.doneTtlMs });
      expect(crashed.state).toBe('acquired');
      await h.advance(o.leaseTtlMs + 50);
      await expect(runOnce(o, () => 1)).rejects.toBeInstanceOf(PreviousAttemptFailedError);
      expect(await runOnce({ ...o, retry: true }, () => 2)).toMatchObject({ status: 'ran', result: 2 });
    });
  });
}
