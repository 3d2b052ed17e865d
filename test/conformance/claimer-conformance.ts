/**
 * The claimer conformance suite: one jest suite that proves the claim contract against any
 * Claimer. Call `describeClaimerConformance(name, factory, capabilities)` from a test file.
 *
 * The factory returns a fresh claimer (in its own namespace), a way to let time pass (a fake
 * clock, or a real sleep for stores that judge expiry themselves), the lease TTL the suite
 * should use, and a cleanup. The capabilities say which optional parts of the contract the
 * claimer offers; the suite checks them against the claimer, so none is skipped by accident.
 *
 * Receipts a case leaves unsettled are released after it, before the harness's cleanup: a
 * claimer whose lease holds a connection (the transactional PostgreSQL claimer) would otherwise
 * keep it borrowed, and the cleanup would wait for it.
 */
import {
  type Claimer,
  type ClaimResult,
  type Receipt,
  isRetriable,
  ConfigurationError,
  InvalidKeyError,
  KeyConflictError,
  LeaseLostError,
  MAX_KEY_BYTES,
  NoLeaseError,
  ReceiptStateError,
  ResultTooLargeError,
} from '../../src';

export interface ClaimerHarness {
  readonly claimer: Claimer;
  /** Lets `ms` milliseconds pass for the claimer. */
  advance(ms: number): Promise<void>;
  /** Lease TTL the suite uses, in ms; expiry is tested by advancing past it. */
  readonly leaseTtlMs: number;
  /**
   * Fault injection for the lost-reply rules: the store applies the next `operation` of any
   * receipt, then its reply is lost (the call rejects with a retriable error, as when the
   * connection resets after the store acted). Build it at the claimer's store boundary (its client,
   * or its store primitives), never around the receipt, which would remember its own success.
   * Required: the lost-reply rules hold for every claimer.
   */
  readonly dropNextReply: (operation: 'commit' | 'release') => void;
  cleanup(): Promise<void>;
}

export type ClaimerFactory = () => Promise<ClaimerHarness>;

/**
 * Which optional parts of the contract a claimer offers. Every flag is required, and a case
 * checks the flags against the claimer itself, so a claimer that gains (or loses) a part fails
 * until its test file says so.
 */
export interface ClaimerCapabilities {
  /** The claimer offers `claimMany`: its cases run. */
  readonly claimMany: boolean;
  /** The claimer offers `commitMany`: its cases run, lost replies included. */
  readonly commitMany: boolean;
  /**
   * Set when the lease is the claim's open transaction (`claimer.transactional`, the PostgreSQL
   * claimer's `mode: 'transactional'`): the store ends a transaction left idle past the lease
   * TTL, `extend` sends nothing, and a commit whose transaction ended rejects with `abortError`
   * (not retriable on that receipt; the message is redelivered). The lease-expiry and lost-reply
   * cases then run in their transactional form; every other case is the same.
   */
  readonly transactional: false | { readonly abortError: abstract new (...args: never[]) => Error };
}

/**
 * The harness's claimer with every acquired receipt recorded, so `settleAll` can release the
 * ones a case left open. Other members pass through untouched.
 */
export function trackingReceipts(claimer: Claimer): { claimer: Claimer; settleAll(): Promise<void> } {
  const open: Receipt[] = [];
  const note = (result: ClaimResult): ClaimResult => {
    if (result.state === 'acquired') open.push(result.receipt);
    return result;
  };
  const tracked = new Proxy(claimer, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (property === 'claim') return (key: string, options: Parameters<Claimer['claim']>[1]) => target.claim(key, options).then(note);
      if (property === 'claimMany' && typeof value === 'function') {
        return (requests: Parameters<NonNullable<Claimer['claimMany']>>[0]) =>
          target.claimMany!(requests).then((entries) => {
            for (const entry of entries) if (entry.ok) note(entry.result);
            return entries;
          });
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return {
    claimer: tracked,
    // A committed receipt refuses release (ReceiptStateError), a lost one resolves: either is settled.
    settleAll: async () => {
      await Promise.allSettled(open.splice(0).map((receipt) => receipt.release()));
    },
  };
}

function acquired(result: ClaimResult) {
  if (result.state !== 'acquired') throw new Error(`expected acquired, got ${result.state}`);
  return result;
}

export function describeClaimerConformance(name: string, factory: ClaimerFactory, capabilities: ClaimerCapabilities): void {
  describe(`claimer conformance: ${name}`, () => {
    let h: ClaimerHarness;
    let settleAll: () => Promise<void>;
    let ttl: number;
    let opts: { leaseTtlMs: number; doneTtlMs: number };
    let n = 0;
    const key = (label: string) => `conf-${label}-${++n}`;
    const tx = capabilities.transactional;

    beforeEach(async () => {
      const made = await factory();
      const tracking = trackingReceipts(made.claimer);
      h = { ...made, claimer: tracking.claimer };
      settleAll = tracking.settleAll;
      ttl = h.leaseTtlMs;
      opts = { leaseTtlMs: ttl, doneTtlMs: ttl * 100 };
    });
    afterEach(async () => {
      await settleAll();
      await h.cleanup();
    });

    test('reports a known kind', () => {
      expect(['in_memory', 'distributed']).toContain(h.claimer.kind);
    });

    test('offers exactly the capabilities its test file declares', () => {
      expect({
        claimMany: typeof h.claimer.claimMany === 'function',
        commitMany: typeof h.claimer.commitMany === 'function',
        transactional: h.claimer.transactional === true,
      }).toEqual({ claimMany: capabilities.claimMany, commitMany: capabilities.commitMany, transactional: tx !== false });
    });

    test('a first claim is acquired with attempt 1, an owner token and a positive fencing token', async () => {
      const r = acquired(await h.claimer.claim(key('first'), opts));
      expect(r.attempt).toBe(1);
      expect(r.receipt.acquired).toBe(true);
      expect(r.receipt.ownerToken).not.toBe('');
      expect(r.receipt.fencingToken).toBeGreaterThan(0);
    });

    test('concurrent claims of one key give exactly one acquired, the rest busy', async () => {
      const k = key('race');
      // A long lease: on a loaded machine the 25 claims can outlast a short one, and a takeover is not this case.
      const long = { leaseTtlMs: ttl * 10, doneTtlMs: ttl * 100 };
      const results = await Promise.all(Array.from({ length: 25 }, () => h.claimer.claim(k, long)));
      expect(results.filter((r) => r.state === 'acquired')).toHaveLength(1);
      expect(results.filter((r) => r.state === 'busy')).toHaveLength(24);
    });

    test('commit then claim gives done with the stored result', async () => {
      const k = key('commit');
      const r = acquired(await h.claimer.claim(k, opts));
      await r.receipt.commit({ reply: 'ok', n: 7, nested: [1, null, 'x'] });
      const again = await h.claimer.claim(k, opts);
      expect(again.state).toBe('done');
      expect(again.state === 'done' && again.result).toEqual({ reply: 'ok', n: 7, nested: [1, null, 'x'] });
      expect(again.receipt.acquired).toBe(false);
    });

    test('commit without a result gives done with no result', async () => {
      const k = key('commit-empty');
      await acquired(await h.claimer.claim(k, opts)).receipt.commit();
      const again = await h.claimer.claim(k, opts);
      expect(again.state).toBe('done');
      expect(again.state === 'done' ? again.result : 'x').toBeUndefined();
    });

    test('release makes the key claimable again, with a higher fencing token and attempt 2', async () => {
      const k = key('release');
      const first = acquired(await h.claimer.claim(k, opts));
      await first.receipt.release();
      const second = acquired(await h.claimer.claim(k, opts));
      expect(second.receipt.fencingToken).toBeGreaterThan(first.receipt.fencingToken);
      expect(second.attempt).toBe(2);
    });

    test('release with resetAttempts makes the next acquisition attempt 1, and the fencing token still rises', async () => {
      const k = key('reset');
      const first = acquired(await h.claimer.claim(k, opts));
      await first.receipt.release();
      const second = acquired(await h.claimer.claim(k, opts));
      expect(second.attempt).toBe(2);
      await second.receipt.release({ resetAttempts: true });
      const third = acquired(await h.claimer.claim(k, opts));
      expect(third.attempt).toBe(1);
      expect(third.receipt.fencingToken).toBeGreaterThan(second.receipt.fencingToken);
    });

    test('release with uncountAttempt (a shutdown stopped the attempt): the next acquisition repeats its number, also at attempt 1; the fencing token still rises', async () => {
      const k = key('uncount');
      const first = acquired(await h.claimer.claim(k, opts));
      await first.receipt.release({ uncountAttempt: true });
      const again = acquired(await h.claimer.claim(k, opts));
      expect(again.attempt).toBe(1);
      expect(again.receipt.fencingToken).toBeGreaterThan(first.receipt.fencingToken);
      await again.receipt.release();
      const second = acquired(await h.claimer.claim(k, opts));
      expect(second.attempt).toBe(2);
      await second.receipt.release({ uncountAttempt: true });
      const secondAgain = acquired(await h.claimer.claim(k, opts));
      expect(secondAgain.attempt).toBe(2);
      await secondAgain.receipt.release({ resetAttempts: true, uncountAttempt: true });
      expect(acquired(await h.claimer.claim(k, opts)).attempt).toBe(1);
    });

    test('a live lease makes other claims busy', async () => {
      const k = key('busy');
      acquired(await h.claimer.claim(k, opts));
      const other = await h.claimer.claim(k, opts);
      expect(other.state).toBe('busy');
    });

    if (!tx) test('S19: after expiry and takeover the stale owner cannot commit, extend or release over the new owner', async () => {
      const k = key('takeover');
      const a = acquired(await h.claimer.claim(k, opts));
      await h.advance(ttl * 1.5);
      const b = acquired(await h.claimer.claim(k, opts));
      expect(b.receipt.fencingToken).toBeGreaterThan(a.receipt.fencingToken);
      expect(b.attempt).toBe(2);

      await expect(a.receipt.extend(ttl)).rejects.toBeInstanceOf(LeaseLostError);
      await expect(a.receipt.commit({ by: 'a' })).rejects.toBeInstanceOf(LeaseLostError);
      await expect(a.receipt.release()).resolves.toBeUndefined();

      // B's lease is untouched: still busy for others, and B can commit.
      expect((await h.claimer.claim(k, opts)).state).toBe('busy');
      await b.receipt.commit({ by: 'b' });
      const after = await h.claimer.claim(k, opts);
      expect(after.state === 'done' && after.result).toEqual({ by: 'b' });
    });

    if (!tx) test('a lease-lost outcome is final: repeating commit or extend repeats LeaseLostError', async () => {
      const k = key('lost-final');
      const a = acquired(await h.claimer.claim(k, opts));
      await h.advance(ttl * 1.5);
      const b = acquired(await h.claimer.claim(k, opts));
      await expect(a.receipt.commit()).rejects.toBeInstanceOf(LeaseLostError);
      await b.receipt.release(); // even once B leaves, A's receipt stays lost
      await expect(a.receipt.commit()).rejects.toBeInstanceOf(LeaseLostError);
      await expect(a.receipt.extend(ttl)).rejects.toBeInstanceOf(LeaseLostError);
    });

    if (!tx) test('an expired lease that nobody took over can still be committed by its owner', async () => {
      const k = key('expired-kept');
      const a = acquired(await h.claimer.claim(k, opts));
      await h.advance(ttl * 1.5);
      await a.receipt.commit('late');
      const again = await h.claimer.claim(k, opts);
      expect(again.state === 'done' && again.result).toBe('late');
    });

    if (!tx) test('extend keeps the lease alive past its first TTL', async () => {
      const k = key('extend');
      const a = acquired(await h.claimer.claim(k, opts));
      await h.advance(ttl * 0.6);
      await a.receipt.extend(ttl);
      await h.advance(ttl * 0.6);
      expect((await h.claimer.claim(k, opts)).state).toBe('busy');
    });

    if (tx) describe('the lease is the transaction', () => {
      test('S19: a transaction idle past its lease is ended by the store; the next claim takes over (higher fencing token, attempt 2); the stale commit rejects with the abort error and never lands', async () => {
        const k = key('tx-takeover');
        const a = acquired(await h.claimer.claim(k, opts));
        await h.advance(ttl * 1.5);
        const b = acquired(await h.claimer.claim(k, opts));
        expect(b.receipt.fencingToken).toBeGreaterThan(a.receipt.fencingToken);
        expect(b.attempt).toBe(2);
        await expect(a.receipt.commit({ by: 'a' })).rejects.toBeInstanceOf(tx.abortError);
        await expect(a.receipt.commit({ by: 'a' })).rejects.toBeInstanceOf(tx.abortError);
        await expect(a.receipt.release()).resolves.toBeUndefined();
        // B's lease is untouched: still busy for others, and B can commit.
        expect((await h.claimer.claim(k, opts)).state).toBe('busy');
        await b.receipt.commit({ by: 'b' });
        const after = await h.claimer.claim(k, opts);
        expect(after.state === 'done' && after.result).toEqual({ by: 'b' });
      });

      test('a transaction idle past its lease is ended even when nobody took over: the late commit rejects with the abort error, and the key is claimable (attempt 2)', async () => {
        const k = key('tx-expired');
        const a = acquired(await h.claimer.claim(k, opts));
        await h.advance(ttl * 1.5);
        await expect(a.receipt.commit('late')).rejects.toBeInstanceOf(tx.abortError);
        const again = acquired(await h.claimer.claim(k, opts));
        expect(again.attempt).toBe(2);
        expect(again.receipt.fencingToken).toBeGreaterThan(a.receipt.fencingToken);
      });

      test('extend sends nothing and resolves while the transaction is open; the key stays busy and the commit lands', async () => {
        const k = key('tx-extend');
        const a = acquired(await h.claimer.claim(k, opts));
        await expect(a.receipt.extend(ttl)).resolves.toBeUndefined();
        expect((await h.claimer.claim(k, opts)).state).toBe('busy');
        await a.receipt.commit('kept');
        const done = await h.claimer.claim(k, opts);
        expect(done.state === 'done' && done.result).toBe('kept');
      });

      test('a COMMIT whose reply was lost: the commit rejects with the abort error (its outcome unknown to the receipt); the key is done with its result, and the receipt stays settled', async () => {
        const k = key('tx-lost-commit');
        const r = acquired(await h.claimer.claim(k, opts));
        h.dropNextReply('commit');
        await expect(r.receipt.commit({ n: 1 })).rejects.toBeInstanceOf(tx.abortError);
        const again = await h.claimer.claim(k, opts);
        expect(again.state).toBe('done');
        expect(again.state === 'done' && again.result).toEqual({ n: 1 });
        await expect(r.receipt.commit({ n: 1 })).rejects.toBeInstanceOf(tx.abortError);
      });

      test('a ROLLBACK whose reply was lost: the release resolves (the session is closed, which rolls back and unlocks); commit is ReceiptStateError; the key is claimable (attempt 2)', async () => {
        const k = key('tx-lost-release');
        const r = acquired(await h.claimer.claim(k, opts));
        h.dropNextReply('release');
        await expect(r.receipt.release()).resolves.toBeUndefined();
        await expect(r.receipt.commit()).rejects.toBeInstanceOf(ReceiptStateError);
        const next = acquired(await h.claimer.claim(k, opts));
        expect(next.attempt).toBe(2);
      });
    });

    test('done expires after doneTtlMs and the key is claimable again', async () => {
      const k = key('done-expiry');
      const short = { leaseTtlMs: ttl, doneTtlMs: ttl * 2 };
      const a = acquired(await h.claimer.claim(k, short));
      await a.receipt.commit();
      expect((await h.claimer.claim(k, short)).state).toBe('done');
      await h.advance(ttl * 3);
      const b = acquired(await h.claimer.claim(k, short));
      expect(b.receipt.fencingToken).toBeGreaterThan(a.receipt.fencingToken);
    });

    test('repeat rules: a second commit or release is a no-op; commit after release and release after commit are errors', async () => {
      const c = acquired(await h.claimer.claim(key('repeat-c'), opts));
      await c.receipt.commit({ v: 1 });
      await expect(c.receipt.commit({ v: 2 })).resolves.toBeUndefined();
      await expect(c.receipt.release()).rejects.toBeInstanceOf(ReceiptStateError);
      await expect(c.receipt.extend(ttl)).rejects.toBeInstanceOf(ReceiptStateError);
      const done = await h.claimer.claim(c.receipt.key, opts);
      expect(done.state === 'done' && done.result).toEqual({ v: 1 });

      const r = acquired(await h.claimer.claim(key('repeat-r'), opts));
      await r.receipt.release();
      await expect(r.receipt.release()).resolves.toBeUndefined();
      await expect(r.receipt.commit()).rejects.toBeInstanceOf(ReceiptStateError);
      await expect(r.receipt.extend(ttl)).rejects.toBeInstanceOf(ReceiptStateError);
    });

    test('done and busy claims carry a receipt whose operations reject with NoLeaseError', async () => {
      const k = key('nolease');
      const a = acquired(await h.claimer.claim(k, opts));
      const busy = await h.claimer.claim(k, opts);
      expect(busy.state).toBe('busy');
      await expect(busy.receipt.commit()).rejects.toBeInstanceOf(NoLeaseError);
      await expect(busy.receipt.release()).rejects.toBeInstanceOf(NoLeaseError);
      await expect(busy.receipt.extend(ttl)).rejects.toBeInstanceOf(NoLeaseError);
      await a.receipt.commit();
      const done = await h.claimer.claim(k, opts);
      expect(done.state).toBe('done');
      await expect(done.receipt.commit()).rejects.toBeInstanceOf(NoLeaseError);
      await expect(done.receipt.release()).rejects.toBeInstanceOf(NoLeaseError);
      await expect(done.receipt.extend(ttl)).rejects.toBeInstanceOf(NoLeaseError);
    });

    test('a different fingerprint for a known key rejects with KeyConflictError; the same one does not', async () => {
      const k = key('fp');
      const a = acquired(await h.claimer.claim(k, { ...opts, fingerprint: 'aaa' }));
      // A transactional claimer stores the key's record at commit: while the transaction is open, another fingerprint is busy.
      if (tx) expect((await h.claimer.claim(k, { ...opts, fingerprint: 'bbb' })).state).toBe('busy');
      else await expect(h.claimer.claim(k, { ...opts, fingerprint: 'bbb' })).rejects.toBeInstanceOf(KeyConflictError);
      expect((await h.claimer.claim(k, { ...opts, fingerprint: 'aaa' })).state).toBe('busy');
      await a.receipt.commit();
      await expect(h.claimer.claim(k, { ...opts, fingerprint: 'bbb' })).rejects.toBeInstanceOf(KeyConflictError);
      expect((await h.claimer.claim(k, { ...opts, fingerprint: 'aaa' })).state).toBe('done');
    });

    test('a result larger than the bound is refused before anything is written', async () => {
      const k = key('big');
      const a = acquired(await h.claimer.claim(k, opts));
      await expect(a.receipt.commit('x'.repeat(5000))).rejects.toBeInstanceOf(ResultTooLargeError);
      expect((await h.claimer.claim(k, opts)).state).toBe('busy');
      await a.receipt.commit('small');
      const done = await h.claimer.claim(k, opts);
      expect(done.state === 'done' && done.result).toBe('small');
    });

    test('keys: empty, non-string and too long keys are refused with InvalidKeyError', async () => {
      await expect(h.claimer.claim('', opts)).rejects.toBeInstanceOf(InvalidKeyError);
      await expect(h.claimer.claim(42 as unknown as string, opts)).rejects.toBeInstanceOf(InvalidKeyError);
      await expect(h.claimer.claim('k'.repeat(MAX_KEY_BYTES + 1), opts)).rejects.toBeInstanceOf(InvalidKeyError);
      // multi-byte characters count in bytes
      await expect(h.claimer.claim('é'.repeat(MAX_KEY_BYTES / 2 + 1), opts)).rejects.toBeInstanceOf(InvalidKeyError);
      expect((await h.claimer.claim(`${key('unicode')}-ключ-鍵-🔑`, opts)).state).toBe('acquired');
    });

    test('TTLs: a non-positive lease or a done TTL shorter than the lease is a ConfigurationError', async () => {
      await expect(h.claimer.claim(key('ttl'), { leaseTtlMs: 0, doneTtlMs: 1000 })).rejects.toBeInstanceOf(ConfigurationError);
      await expect(h.claimer.claim(key('ttl'), { leaseTtlMs: 5000, doneTtlMs: 1000 })).rejects.toBeInstanceOf(ConfigurationError);
      await expect(h.claimer.claim(key('ttl'), { leaseTtlMs: 1.5, doneTtlMs: 1000 })).rejects.toBeInstanceOf(ConfigurationError);
      const a = acquired(await h.claimer.claim(key('ttl-ok'), opts));
      await expect(a.receipt.extend(-1)).rejects.toBeInstanceOf(ConfigurationError);
    });

    test('fencing tokens strictly increase across successive acquisitions of one key', async () => {
      const k = key('fence');
      const tokens: number[] = [];
      for (let i = 0; i < 4; i++) {
        const r = acquired(await h.claimer.claim(k, opts));
        tokens.push(r.receipt.fencingToken);
        await r.receipt.release();
      }
      const expiring = acquired(await h.claimer.claim(k, opts));
      tokens.push(expiring.receipt.fencingToken);
      await h.advance(ttl * 1.5);
      tokens.push(acquired(await h.claimer.claim(k, opts)).receipt.fencingToken);
      for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1]!);
    });

    describe('a store that acted but whose reply was lost (issue 12 item 3)', () => {
      const lostReply = (title: string, fn: (drop: (operation: 'commit' | 'release') => void) => Promise<void>) =>
        test(title, () => fn((operation) => h.dropNextReply(operation)));

      async function rejectsRetriably(operation: Promise<void>): Promise<void> {
        const error = await operation.then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeDefined();
        expect(isRetriable(error)).toBe(true);
      }

      if (!tx) lostReply('a commit that landed with its reply lost: the retried commit resolves (committed), the key is done with its result', async (drop) => {
        const k = key('lost-commit');
        const r = acquired(await h.claimer.claim(k, opts));
        drop('commit');
        await rejectsRetriably(r.receipt.commit({ n: 1 }));
        await expect(r.receipt.commit({ n: 1 })).resolves.toBeUndefined();
        const again = await h.claimer.claim(k, opts);
        expect(again.state).toBe('done');
        expect(again.state === 'done' && again.result).toEqual({ n: 1 });
        await expect(r.receipt.release()).rejects.toBeInstanceOf(ReceiptStateError);
      });

      if (capabilities.commitMany) lostReply('commitMany: a batch whose commit landed with its reply lost fails retriably, and the retried batch resolves with every key done', async (drop) => {
        const keys = [key('lost-many-a'), key('lost-many-b')];
        const receipts = [];
        for (const k of keys) receipts.push(acquired(await h.claimer.claim(k, opts)).receipt);
        const requests = receipts.map((receipt, i) => ({ receipt, result: { i } }));
        drop('commit');
        const first = await h.claimer.commitMany!(requests);
        // The drop loses the reply of one store call: one key's (in memory), or the whole batch's (Redis).
        expect(first.some((e) => !e.ok)).toBe(true);
        for (const e of first) if (!e.ok) expect(isRetriable(e.error)).toBe(true);
        const retried = await h.claimer.commitMany!(requests);
        expect(retried.map((e) => e.ok)).toEqual([true, true]);
        for (const [i, k] of keys.entries()) {
          const again = await h.claimer.claim(k, opts);
          expect(again.state === 'done' && again.result).toEqual({ i });
        }
        await expect(receipts[0]!.release()).rejects.toBeInstanceOf(ReceiptStateError);
      });

      if (!tx) lostReply('a commit that landed with its reply lost: a release without a retried commit is ReceiptStateError, and the key stays done', async (drop) => {
        const k = key('lost-commit-release');
        const r = acquired(await h.claimer.claim(k, opts));
        drop('commit');
        await rejectsRetriably(r.receipt.commit('kept'));
        await expect(r.receipt.release()).rejects.toBeInstanceOf(ReceiptStateError);
        await expect(r.receipt.release({ resetAttempts: true })).rejects.toBeInstanceOf(ReceiptStateError);
        const again = await h.claimer.claim(k, opts);
        expect(again.state).toBe('done');
        expect(again.state === 'done' && again.result).toBe('kept');
        await expect(r.receipt.commit('kept')).resolves.toBeUndefined();
      });

      if (!tx) lostReply('a commit that landed with its reply lost: extend is ReceiptStateError, never LeaseLostError', async (drop) => {
        const r = acquired(await h.claimer.claim(key('lost-commit-extend'), opts));
        drop('commit');
        await rejectsRetriably(r.receipt.commit());
        await expect(r.receipt.extend(ttl)).rejects.toBeInstanceOf(ReceiptStateError);
      });

      if (!tx) lostReply('a release that landed with its reply lost: the retried release resolves; commit is ReceiptStateError; the key is claimable', async (drop) => {
        const k = key('lost-release');
        const r = acquired(await h.claimer.claim(k, opts));
        drop('release');
        await rejectsRetriably(r.receipt.release());
        await expect(r.receipt.commit()).rejects.toBeInstanceOf(ReceiptStateError);
        await expect(r.receipt.release()).resolves.toBeUndefined();
        const next = acquired(await h.claimer.claim(k, opts));
        expect(next.attempt).toBe(2);
      });

      if (!tx) lostReply('a newer owner is still LeaseLostError: a lost release reply, then a takeover, then commit', async (drop) => {
        const k = key('lost-then-taken');
        const r = acquired(await h.claimer.claim(k, opts));
        drop('release');
        await rejectsRetriably(r.receipt.release());
        const newer = acquired(await h.claimer.claim(k, opts));
        await expect(r.receipt.commit()).rejects.toBeInstanceOf(LeaseLostError);
        // The old receipt's release leaves the newer owner alone.
        await expect(r.receipt.release()).resolves.toBeUndefined();
        expect((await h.claimer.claim(k, opts)).state).toBe('busy');
        await newer.receipt.commit('newer');
        const done = await h.claimer.claim(k, opts);
        expect(done.state === 'done' && done.result).toBe('newer');
      });
    });

    if (capabilities.claimMany) test('claimMany answers each request in order with its own outcome', async () => {
      const held = key('many-held');
      acquired(await h.claimer.claim(held, opts));
      const doneKey = key('many-done');
      await acquired(await h.claimer.claim(doneKey, opts)).receipt.commit(5);
      const fresh = key('many-fresh');
      const entries = await h.claimer.claimMany!([
        { key: fresh, options: opts },
        { key: held, options: opts },
        { key: doneKey, options: opts },
        { key: '', options: opts },
        { key: fresh, options: opts },
      ]);
      expect(entries).toHaveLength(5);
      const states = entries.map((e) => (e.ok ? e.result.state : e.error.constructor.name));
      expect(states).toEqual(['acquired', 'busy', 'done', 'InvalidKeyError', 'busy']);
      const d = entries[2]!;
      expect(d.ok && d.result.state === 'done' && d.result.result).toBe(5);
      const first = entries[0]!;
      if (first.ok && first.result.state === 'acquired') await first.result.receipt.commit();
      expect((await h.claimer.claim(fresh, opts)).state).toBe('done');
    });

    if (capabilities.commitMany) test('commitMany commits each receipt with its result; entries in request order; a repeat resolves', async () => {
      const keys = [key('cm-a'), key('cm-b'), key('cm-c')];
      const receipts = [];
      for (const k of keys) receipts.push(acquired(await h.claimer.claim(k, opts)).receipt);
      const requests = [{ receipt: receipts[0]!, result: { n: 0 } }, { receipt: receipts[1]! }, { receipt: receipts[2]!, result: 'two' }];
      expect(await h.claimer.commitMany!(requests)).toEqual([{ ok: true }, { ok: true }, { ok: true }]);
      const results = [];
      for (const k of keys) {
        const c = await h.claimer.claim(k, opts);
        expect(c.state).toBe('done');
        results.push(c.state === 'done' ? c.result : 'not done');
      }
      expect(results).toEqual([{ n: 0 }, undefined, 'two']);
      expect(await h.claimer.commitMany!(requests)).toEqual([{ ok: true }, { ok: true }, { ok: true }]);
      expect(await h.claimer.commitMany!([])).toEqual([]);
    });

    if (capabilities.commitMany) test('commitMany: a failing entry fails alone, with the error its receipt would give', async () => {
      const good = acquired(await h.claimer.claim(key('cmf-good'), opts)).receipt;
      const released = acquired(await h.claimer.claim(key('cmf-released'), opts)).receipt;
      await released.release();
      const doneKey = key('cmf-done');
      await acquired(await h.claimer.claim(doneKey, opts)).receipt.commit();
      const notAcquired = (await h.claimer.claim(doneKey, opts)).receipt;
      const stale = acquired(await h.claimer.claim(key('cmf-stale'), opts));
      const tooBig = acquired(await h.claimer.claim(key('cmf-big'), opts)).receipt;
      await h.advance(ttl * 1.5);
      // The newer owner's lease outlasts the rest of the case, however slow the machine.
      const newer = acquired(await h.claimer.claim(stale.receipt.key, { ...opts, leaseTtlMs: ttl * 10 }));
      // `good` and `tooBig` expired meanwhile but nobody took them over: still their owners'.
      const entries = await h.claimer.commitMany!([
        { receipt: released },
        { receipt: good, result: 'kept' },
        { receipt: notAcquired },
        { receipt: stale.receipt },
        { receipt: tooBig, result: 'x'.repeat(1_000_000) },
        { receipt: undefined as never },
      ]);
      expect(entries.map((e) => (e.ok ? 'ok' : e.error.constructor.name))).toEqual([
        'ReceiptStateError',
        'ok',
        'NoLeaseError',
        'LeaseLostError',
        'ResultTooLargeError',
        'ConfigurationError',
      ]);
      const kept = await h.claimer.claim(good.key, opts);
      expect(kept.state === 'done' && kept.result).toBe('kept');
      // The newer owner's lease is untouched, and the oversized result left its key leased.
      expect((await h.claimer.claim(stale.receipt.key, opts)).state).toBe('busy');
      await newer.receipt.commit('newer');
      await expect(tooBig.commit('small')).resolves.toBeUndefined();
      await expect(h.claimer.commitMany!('nope' as never)).rejects.toBeInstanceOf(ConfigurationError);
    });
  });
}
