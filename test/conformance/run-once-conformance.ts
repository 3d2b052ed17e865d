/**
 * runOnce on any claimer: one jest suite, called beside the claimer conformance suite with the
 * same factory (`describeRunOnceConformance(name, factory)`), so the guard's rules are proved on
 * the in-memory, Redis and PostgreSQL claimers alike. Receipts a case leaves open (the abandoned
 * run) are released after it, before the harness's cleanup.
 */
import { ack, InProgressError, KeyConflictError, PreviousAttemptFailedError, runOnce, runOnceKey, type RunOnceOptions, UnstorableResultError } from '../../src';
import { fastOptions, FnConsumer, recordingDelivery } from '../unit/helpers';
import { type ClaimerFactory, type ClaimerHarness, trackingReceipts } from './claimer-conformance';

export function describeRunOnceConformance(name: string, factory: ClaimerFactory): void {
  describe(`runOnce conformance: ${name}`, () => {
    let h: ClaimerHarness;
    let settleAll: () => Promise<void>;
    let n = 0;
    beforeEach(async () => {
      const made = await factory();
      const tracking = trackingReceipts(made.claimer);
      h = { ...made, claimer: tracking.claimer };
      settleAll = tracking.settleAll;
    });
    afterEach(async () => {
      await settleAll();
      await h.cleanup();
    });

    function options(label: string, extra: Partial<RunOnceOptions> = {}): RunOnceOptions {
      return { claimer: h.claimer, scope: { operation: 'conformance', actor: label }, key: `k-${++n}`, leaseTtlMs: h.leaseTtlMs, doneTtlMs: h.leaseTtlMs * 100, ...extra };
    }

    test('a consumer named "run-once" is refused: its message keys would be runOnce keys, so a producer could plant the response a request replays', async () => {
      const planted = { status: 200, body: 'planted by a message' };
      expect(() => new FnConsumer({ ...fastOptions(h.claimer), name: 'run-once' }, async () => ack(planted))).toThrow(/name "run-once" is reserved for runOnce/);
      // A neighbouring name keeps to its own keys: the message key that spells a runOnce key lands elsewhere.
      const key = `abc-${++n}`;
      const neighbour = new FnConsumer({ ...fastOptions(h.claimer), name: 'run-once-jobs' }, async () => ack(planted));
      expect(await neighbour.dispatch(recordingDelivery({ key: `POST /payments:::${key}` }))).toMatchObject({ action: 'ack' });
      const request = { claimer: h.claimer, scope: { operation: 'POST /payments' }, key, leaseTtlMs: h.leaseTtlMs, doneTtlMs: h.leaseTtlMs * 100 };
      expect(await runOnce(request, () => ({ status: 201 }))).toMatchObject({ status: 'ran', result: { status: 201 } });
    });

    test('an HTTP-style operation with no actor and no tenant logs one warning per claimer; a bound scope or a job-style operation logs none', async () => {
      const lines: { msg?: string; obj: object }[] = [];
      const logger = { debug: () => undefined, info: () => undefined, error: () => undefined, warn: (obj: object, msg?: string) => void lines.push({ obj, msg }) };
      const base = { claimer: h.claimer, leaseTtlMs: h.leaseTtlMs, doneTtlMs: h.leaseTtlMs * 100, logger };
      await runOnce({ ...base, scope: { operation: 'job:nightly' }, key: `j-${++n}` }, () => 1);
      await runOnce({ ...base, scope: { operation: 'POST /payments', actor: 'acct-1' }, key: `a-${++n}` }, () => 1);
      await runOnce({ ...base, scope: { operation: 'POST /payments', tenant: 't1' }, key: `t-${++n}` }, () => 1);
      expect(lines).toEqual([]);
      await runOnce({ ...base, scope: { operation: 'POST /payments' }, key: `u-${++n}` }, () => 1);
      await runOnce({ ...base, scope: { operation: 'put /orders/7' }, key: `u-${++n}` }, () => 1);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({ obj: { operation: 'POST /payments' } });
      expect(lines[0]!.msg).toMatch(/runOnce: operation "POST \/payments" has no actor and no tenant in its scope, so any caller who presents a key gets the response stored for it/);
    });

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

    test('a replay returns the same JSON as the first call: object keys keep the order fn wrote them in', async () => {
      const o = options('key-order');
      const fn = () => ({ zeta: 1, a: 2, mm: { y: 1, b: 2 }, list: [{ long_name: 1, s: 2 }] });
      const first = await runOnce(o, fn);
      const replay = await runOnce(o, fn);
      expect(replay.status).toBe('replayed');
      expect(JSON.stringify(replay.result)).toBe(JSON.stringify(first.result));
      expect(JSON.stringify(replay.result)).toBe('{"zeta":1,"a":2,"mm":{"y":1,"b":2},"list":[{"long_name":1,"s":2}]}');
    });

    test('NaN, Infinity and -Infinity in a result fail with UnstorableResultError naming the path; nothing is stored as null', async () => {
      const cases: [unknown, RegExp][] = [
        [{ total: NaN }, /result\.total is NaN, which JSON cannot hold/],
        [{ items: [1, { price: Infinity }] }, /result\.items\[1\]\.price is Infinity/],
        [-Infinity, /result is -Infinity/],
        [{ boxed: new Number(NaN) }, /result\.boxed is NaN/],
      ];
      for (const [value, message] of cases) {
        const o = options('non-finite', { onFailure: 'release' });
        const run = runOnce(o, () => value as never);
        await expect(run).rejects.toBeInstanceOf(UnstorableResultError);
        await expect(run).rejects.toThrow(message);
        // Released, not stored: the next call runs and its result is what a replay returns.
        expect(await runOnce(o, () => ({ total: 0 }))).toMatchObject({ status: 'ran', result: { total: 0 } });
        expect(await runOnce(o, () => ({ total: 1 }))).toMatchObject({ status: 'replayed', result: { total: 0 } });
      }
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
      // Explicit: with a transactional claimer the default is 'release' (a failed run rolled back).
      const recorded = options('record', { onFailure: 'record' });
      await expect(runOnce(recorded, () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
      await expect(runOnce(recorded, () => 1)).rejects.toBeInstanceOf(PreviousAttemptFailedError);
      expect(await runOnce({ ...recorded, retry: true }, () => 2)).toMatchObject({ status: 'ran', result: 2 });
      const released = options('release', { onFailure: 'release' });
      await expect(runOnce(released, () => Promise.reject(new Error('early')))).rejects.toThrow('early');
      expect(await runOnce(released, () => 3)).toMatchObject({ status: 'ran', result: 3, attempt: 1 });
    });

    test('after a recorded failure, ten calls at the same moment are all refused as a previous failure, none as in progress; the key stays claimable', async () => {
      const o = options('siblings', { onFailure: 'record', waitMs: 0 });
      await expect(runOnce(o, () => Promise.reject(new Error('charge failed')))).rejects.toThrow('charge failed');
      const outcomes = await Promise.allSettled(Array.from({ length: 10 }, () => runOnce(o, () => 'ran')));
      const names = outcomes.map((r) => (r.status === 'rejected' ? (r.reason as Error).name : r.status));
      expect(names).toEqual(Array.from({ length: 10 }, () => 'PreviousAttemptFailedError'));
      expect(await runOnce({ ...o, retry: true }, () => 'retried')).toMatchObject({ status: 'ran', result: 'retried', attempt: 2 });
    });

    test('a run that never settled: once its lease expired the key is blocked until retry: true; on a transactional claimer the store rolled it back, so the next call runs (the next attempt)', async () => {
      const o = options('crash');
      const crashed = await h.claimer.claim(runOnceKey(o.scope, o.key), { leaseTtlMs: o.leaseTtlMs, doneTtlMs: o.doneTtlMs });
      expect(crashed.state).toBe('acquired');
      await h.advance(o.leaseTtlMs + 50);
      if (h.claimer.transactional) {
        expect(await runOnce(o, () => 1)).toMatchObject({ status: 'ran', result: 1, attempt: 2 });
        return;
      }
      await expect(runOnce(o, () => 1)).rejects.toBeInstanceOf(PreviousAttemptFailedError);
      expect(await runOnce({ ...o, retry: true }, () => 2)).toMatchObject({ status: 'ran', result: 2 });
    });
  });
}
