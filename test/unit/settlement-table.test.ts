/**
 * The README's settlement table, row by row, against the pure `decide` (src/pipeline/settlement-table.ts):
 * no claimer, no broker, no timers.
 */
import { ack, ClaimerUnavailableError, ConfigurationError, InvalidDispositionError, InvalidKeyError, reject, requeue, InvalidMessageError, KeyConflictError, LeaseLostError, PermanentError, ShutdownError, TimeoutError } from '../../src';
import {
  attemptOf,
  attemptsAfterRequeue,
  claimFailure,
  decide,
  type Decision,
  handledOnCommitIssued,
  handlerEnd,
  type HandlerEnd,
  requeueInPlace,
  type Settlement,
  type SettlementRules,
  UNSETTLED_RETRY_MS,
} from '../../src/pipeline/settlement-table';

const rules: SettlementRules = { maxAttempts: 3, busyRequeueDelayMs: 10, unavailableRequeueDelayMs: 11, retryDelayMs: (attempt) => 100 * attempt };

const guarded = (end: HandlerEnd, attempt = 1): Decision => decide({ kind: 'handler_end', guarded: true, attempt, end }, rules);
const unguarded = (end: HandlerEnd, attempt = 1): Decision => decide({ kind: 'handler_end', guarded: false, attempt, end }, rules);

describe('settlement table (README "Settlement"), one row at a time', () => {
  test('done: ack as duplicate, no receipt step, handler not run', () => {
    expect(decide({ kind: 'done' }, rules)).toEqual({
      kind: 'settle', receipt: 'none', broker: { kind: 'ack', duplicate: true }, outcome: 'done_duplicate', events: ['done_duplicate'], handled: false, error: undefined,
    });
  });

  test('busy: requeue after busyRequeueDelayMs, not an attempt, never ack or dead-letter', () => {
    expect(decide({ kind: 'busy' }, rules)).toEqual({
      kind: 'settle', receipt: 'none', broker: { kind: 'requeue', cause: 'busy', delayMs: 10 }, outcome: 'busy', events: ['busy'], handled: false, error: undefined,
    });
  });

  test('claimer unavailable: fail closed, requeue after unavailableRequeueDelayMs without running the handler', () => {
    const error = new ClaimerUnavailableError('down');
    expect(decide({ kind: 'claim_failed', error, failOpen: false }, rules)).toEqual({
      kind: 'settle', receipt: 'none', broker: { kind: 'requeue', cause: 'claimer_unavailable', delayMs: 11 }, outcome: 'claim_failed', events: ['claim_failed'], handled: false, error,
    });
  });

  test('claimer unavailable with failOpen: run the handler without a claim, reporting claim_failed and fail_open', () => {
    const error = new ClaimerUnavailableError('down');
    expect(decide({ kind: 'claim_failed', error, failOpen: true }, rules)).toEqual({ kind: 'handle', guarded: false, events: ['claim_failed', 'fail_open'], error });
  });

  test('key conflict: dead-letter with reason key_conflict, no claim', () => {
    const error = new KeyConflictError('k', 'a', 'b');
    expect(decide({ kind: 'key_conflict', error }, rules)).toEqual({
      kind: 'settle', receipt: 'none', broker: { kind: 'dead_letter', reason: 'key_conflict', attempts: 0 }, outcome: 'key_conflict', events: ['key_conflict', 'rejected'], handled: false, error,
    });
  });

  test('acquired: run the handler with the claim', () => {
    expect(decide({ kind: 'acquired', attempt: 3 }, rules)).toEqual({ kind: 'handle', guarded: true, events: ['acquired'], error: undefined });
  });

  test('acquired past maxAttempts (a handler that crashes its process): dead-letter retry_exhausted, release with the count reset', () => {
    expect(decide({ kind: 'acquired', attempt: 4 }, rules)).toEqual({
      kind: 'settle', receipt: 'release_reset', broker: { kind: 'dead_letter', reason: 'retry_exhausted', attempts: 3 }, outcome: 'retry_exhausted', events: ['acquired', 'retry_exhausted', 'rejected'], handled: false, error: undefined,
    });
  });

  test('handler returned ack(result): commit with the result first', () => {
    expect(guarded({ kind: 'ack', result: { id: 7 } })).toEqual({ kind: 'commit', result: { id: 7 } });
    expect(guarded({ kind: 'ack' })).toEqual({ kind: 'commit', result: undefined });
  });

  test('commit landed: ack (not a duplicate), outcome committed', () => {
    expect(decide({ kind: 'commit_ended', attempt: 1, commit: { outcome: 'committed' }, transactional: false }, rules)).toEqual({
      kind: 'settle', receipt: 'none', broker: { kind: 'ack', duplicate: false }, outcome: 'committed', events: ['committed'], handled: true, error: undefined,
    });
  });

  test('commit finally failed or was fenced: still ack (the effect happened), the outcome reports it', () => {
    const failed = new ClaimerUnavailableError('down');
    expect(decide({ kind: 'commit_ended', attempt: 2, commit: { outcome: 'commit_failed', error: failed }, transactional: false }, rules)).toEqual({
      kind: 'settle', receipt: 'none', broker: { kind: 'ack', duplicate: false }, outcome: 'commit_failed', events: ['commit_failed'], handled: true, error: failed,
    });
    const lost = new LeaseLostError('k', 1, 'commit');
    expect(decide({ kind: 'commit_ended', attempt: 2, commit: { outcome: 'lease_lost', error: lost }, transactional: false }, rules)).toMatchObject({
      receipt: 'none', broker: { kind: 'ack', duplicate: false }, outcome: 'lease_lost', events: ['lease_lost'], error: lost,
    });
  });

  test('transactional claimer, COMMIT failed: the effect rolled back, so release and requeue with backoff (commit_failed), never ack', () => {
    const error = new Error('could not serialize access');
    expect(decide({ kind: 'commit_ended', attempt: 2, commit: { outcome: 'commit_failed', error }, transactional: true }, rules)).toEqual({
      kind: 'settle', receipt: 'release', broker: { kind: 'requeue', cause: 'retry', delayMs: 200, attempt: 2 }, outcome: 'commit_failed', events: ['commit_failed'], handled: true, error,
    });
  });

  test('transactional claimer, COMMIT failed at maxAttempts: dead-letter retry_exhausted with the COMMIT error, then release with the count reset', () => {
    const error = new Error('could not serialize access');
    expect(decide({ kind: 'commit_ended', attempt: 3, commit: { outcome: 'commit_failed', error }, transactional: true }, rules)).toEqual({
      kind: 'settle', receipt: 'release_reset', broker: { kind: 'dead_letter', reason: 'retry_exhausted', attempts: 3 }, outcome: 'retry_exhausted', events: ['commit_failed', 'retry_exhausted', 'rejected'], handled: true, error,
    });
  });

  test('handler threw a retryable error: release, requeue with backoff for that attempt', () => {
    const error = new Error('flaky');
    expect(guarded({ kind: 'threw', error, permanent: false }, 2)).toEqual({
      kind: 'settle', receipt: 'release', broker: { kind: 'requeue', cause: 'retry', delayMs: 200, attempt: 2 }, outcome: 'released', events: [], handled: true, error,
    });
  });

  test('handler returned requeue(): release, requeue after the asked delay, or the backoff when none was asked', () => {
    expect(guarded({ kind: 'requeue', delayMs: 42 })).toMatchObject({ receipt: 'release', broker: { kind: 'requeue', cause: 'retry', delayMs: 42, attempt: 1 }, outcome: 'released', error: undefined });
    expect(guarded({ kind: 'requeue' }, 2)).toMatchObject({ receipt: 'release', broker: { kind: 'requeue', cause: 'retry', delayMs: 200, attempt: 2 } });
  });

  test('after maxAttempts retryable failures (or requeues): dead-letter retry_exhausted, then release with the count reset', () => {
    const error = new Error('still flaky');
    expect(guarded({ kind: 'threw', error, permanent: false }, 3)).toEqual({
      kind: 'settle', receipt: 'release_reset', broker: { kind: 'dead_letter', reason: 'retry_exhausted', attempts: 3 }, outcome: 'retry_exhausted', events: ['retry_exhausted', 'rejected'], handled: true, error,
    });
    expect(guarded({ kind: 'requeue', delayMs: 5 }, 3)).toMatchObject({ broker: { kind: 'dead_letter', reason: 'retry_exhausted', attempts: 3 }, outcome: 'retry_exhausted' });
  });

  test('handler still running past handlerTimeoutMs: a retryable failure (release, requeue with backoff)', () => {
    const error = new TimeoutError('handler passed handlerTimeoutMs');
    expect(guarded({ kind: 'aborted', cause: 'timeout', error }, 1)).toEqual({
      kind: 'settle', receipt: 'release', broker: { kind: 'requeue', cause: 'retry', delayMs: 100, attempt: 1 }, outcome: 'released', events: [], handled: true, error,
    });
    expect(guarded({ kind: 'aborted', cause: 'timeout', error }, 3)).toMatchObject({ broker: { kind: 'dead_letter', reason: 'retry_exhausted' } });
  });

  test('handler threw PermanentError: dead-letter permanent_error, release with the attempt count reset', () => {
    const error = new PermanentError('no such account');
    expect(guarded({ kind: 'threw', error, permanent: true }, 2)).toEqual({
      kind: 'settle', receipt: 'release_reset', broker: { kind: 'dead_letter', reason: 'permanent_error', attempts: 2 }, outcome: 'rejected', events: ['rejected'], handled: true, error,
    });
    const invalid = new InvalidMessageError('invalid_body', 'bad field');
    expect(guarded({ kind: 'threw', error: invalid, permanent: true })).toMatchObject({ broker: { kind: 'dead_letter', reason: 'invalid_body' } });
  });

  test('handler returned reject(reason): dead-letter with that reason (handler_rejected when empty), release with the count reset', () => {
    expect(guarded({ kind: 'reject', reason: 'bad_amount' }, 2)).toEqual({
      kind: 'settle', receipt: 'release_reset', broker: { kind: 'dead_letter', reason: 'bad_amount', attempts: 2 }, outcome: 'rejected', events: ['rejected'], handled: true, error: undefined,
    });
    expect(guarded({ kind: 'reject', reason: '' })).toMatchObject({ broker: { kind: 'dead_letter', reason: 'handler_rejected' } });
  });

  test('handler returned anything else: dead-letter once with invalid_disposition, never an ack, never retried', () => {
    const error = new InvalidDispositionError(undefined);
    expect(guarded({ kind: 'invalid_disposition', error }, 1)).toEqual({
      kind: 'settle', receipt: 'release_reset', broker: { kind: 'dead_letter', reason: 'invalid_disposition', attempts: 1 }, outcome: 'rejected', events: ['rejected'], handled: true, error,
    });
    // Whatever isPermanent says: the end is invalid_disposition, not a `threw` judged by the hook.
    const retryable = () => false;
    expect(handlerEnd(true, undefined, undefined, undefined, retryable)).toMatchObject({ kind: 'invalid_disposition' });
    expect(handlerEnd(true, { type: 'acknowledge' }, undefined, undefined, retryable)).toMatchObject({ kind: 'invalid_disposition' });
    expect(handlerEnd(false, error, undefined, undefined, retryable)).toEqual({ kind: 'invalid_disposition', error });
    expect(unguarded({ kind: 'invalid_disposition', error })).toMatchObject({ receipt: 'none', broker: { kind: 'dead_letter', reason: 'invalid_disposition' } });
  });

  test('invalid message (undecodable body, missing or bad key): dead-letter with the reason, no claim', () => {
    for (const reason of ['invalid_body', 'missing_key', 'invalid_key']) {
      const error = new InvalidMessageError(reason, 'bad');
      expect(decide({ kind: 'invalid', reason, error }, rules)).toEqual({
        kind: 'settle', receipt: 'none', broker: { kind: 'dead_letter', reason, attempts: 0 }, outcome: 'rejected', events: ['rejected'], handled: false, error,
      });
    }
  });

  test('shutdown during the handler: release with the attempt uncounted, requeue at once, never dead-letter', () => {
    expect(guarded({ kind: 'aborted', cause: 'shutdown', error: new ShutdownError() }, 3)).toEqual({
      kind: 'settle', receipt: 'release_uncounted', broker: { kind: 'requeue', cause: 'shutdown', delayMs: 0 }, outcome: 'released', events: [], handled: true, error: undefined,
    });
  });

  test('shutdown during a claim backoff, or a delivery that arrives while stopping: requeue at once', () => {
    const error = new ShutdownError();
    expect(decide({ kind: 'stopping', during: 'claim', error }, rules)).toEqual({
      kind: 'settle', receipt: 'none', broker: { kind: 'requeue', cause: 'shutdown', delayMs: 0 }, outcome: 'claim_failed', events: [], handled: false, error,
    });
    expect(decide({ kind: 'stopping', during: 'intake' }, rules)).toMatchObject({ receipt: 'none', broker: { kind: 'requeue', cause: 'shutdown', delayMs: 0 }, outcome: 'released', handled: false });
  });

  test('lease lost while the handler ran (it did not ack): release, requeue after busyRequeueDelayMs, outcome lease_lost', () => {
    const error = new LeaseLostError('k', 1, 'commit');
    expect(guarded({ kind: 'aborted', cause: 'lease_lost', error }, 2)).toEqual({
      kind: 'settle', receipt: 'release', broker: { kind: 'requeue', cause: 'lease_lost', delayMs: 10 }, outcome: 'lease_lost', events: ['lease_lost'], handled: true, error,
    });
  });

  test('an unexpected pipeline error: requeue before the handler acked, ack after (the source may have moved on)', () => {
    const error = new Error('bug');
    expect(decide({ kind: 'unexpected', error, handled: false }, rules)).toMatchObject({ receipt: 'none', broker: { kind: 'requeue', cause: 'retry', delayMs: 10 }, outcome: 'claim_failed', handled: false, error });
    expect(decide({ kind: 'unexpected', error, handled: true }, rules)).toMatchObject({ receipt: 'none', broker: { kind: 'ack', duplicate: false }, outcome: 'commit_failed', handled: true, error });
  });
});

describe('the fail-open path follows the same rows, without a receipt step', () => {
  test('ack: ack without a commit, outcome claim_failed (nothing was recorded)', () => {
    expect(unguarded({ kind: 'ack', result: 1 })).toEqual({
      kind: 'settle', receipt: 'none', broker: { kind: 'ack', duplicate: false }, outcome: 'claim_failed', events: [], handled: true, error: undefined,
    });
  });

  test('reject, permanent errors and retries: the reasons and limits of the guarded path', () => {
    expect(unguarded({ kind: 'reject', reason: '' })).toMatchObject({ receipt: 'none', broker: { kind: 'dead_letter', reason: 'handler_rejected', attempts: 1 } });
    expect(unguarded({ kind: 'threw', error: new InvalidMessageError('invalid_body', 'x'), permanent: true })).toMatchObject({ receipt: 'none', broker: { kind: 'dead_letter', reason: 'invalid_body' } });
    expect(unguarded({ kind: 'threw', error: new Error('x'), permanent: false }, 3)).toMatchObject({ receipt: 'none', broker: { kind: 'dead_letter', reason: 'retry_exhausted', attempts: 3 }, outcome: 'retry_exhausted', events: ['retry_exhausted', 'rejected'] });
    expect(unguarded({ kind: 'requeue' }, 3)).toMatchObject({ broker: { kind: 'dead_letter', reason: 'retry_exhausted' } });
    expect(unguarded({ kind: 'requeue' }, 1)).toMatchObject({ receipt: 'none', broker: { kind: 'requeue', cause: 'retry', delayMs: 100, attempt: 1 }, outcome: 'claim_failed' });
  });

  test('handler timeout and shutdown: requeue like the guarded path', () => {
    expect(unguarded({ kind: 'aborted', cause: 'timeout', error: new TimeoutError('t') })).toMatchObject({ receipt: 'none', broker: { kind: 'requeue', cause: 'retry', delayMs: 100 } });
    expect(unguarded({ kind: 'aborted', cause: 'shutdown', error: new ShutdownError() })).toMatchObject({ receipt: 'none', broker: { kind: 'requeue', cause: 'shutdown', delayMs: 0 } });
  });
});

describe('the facts the table reads (README "Settlement": which end wins, claim errors, attempts, the handled moment)', () => {
  const permanentIfMarked = (error: unknown) => error instanceof PermanentError;
  const shutdown = new ShutdownError();
  const lost = new LeaseLostError('k', 1, 'extend');

  test('handler end precedence: an ack wins over everything, then shutdown, then a lost lease, then the return value, then timeout, then the throw', () => {
    expect(handlerEnd(true, ack({ n: 1 }), shutdown, lost, permanentIfMarked)).toEqual({ kind: 'ack', result: { n: 1 } });
    expect(handlerEnd(true, ack(), undefined, undefined, permanentIfMarked)).toEqual({ kind: 'ack' });
    expect(handlerEnd(true, reject('x'), shutdown, lost, permanentIfMarked)).toEqual({ kind: 'aborted', cause: 'shutdown', error: shutdown });
    expect(handlerEnd(false, new Error('x'), undefined, lost, permanentIfMarked)).toEqual({ kind: 'aborted', cause: 'lease_lost', error: lost });
    expect(handlerEnd(true, reject('bad'), undefined, undefined, permanentIfMarked)).toEqual({ kind: 'reject', reason: 'bad' });
    expect(handlerEnd(true, requeue({ delayMs: 7 }), undefined, undefined, permanentIfMarked)).toEqual({ kind: 'requeue', delayMs: 7 });
    const timeout = new TimeoutError('late');
    expect(handlerEnd(false, timeout, timeout, undefined, permanentIfMarked)).toEqual({ kind: 'aborted', cause: 'timeout', error: timeout });
    // A TimeoutError the handler threw itself (not the run's abort reason) is an ordinary failure.
    expect(handlerEnd(false, new TimeoutError('own'), undefined, undefined, permanentIfMarked)).toMatchObject({ kind: 'threw', permanent: false });
    const permanent = new PermanentError('no');
    expect(handlerEnd(false, permanent, undefined, undefined, permanentIfMarked)).toEqual({ kind: 'threw', error: permanent, permanent: true });
  });

  test('a handler that throws undefined gets an error object and is retryable, never read as a requeue request', () => {
    const end = handlerEnd(false, undefined, undefined, undefined, () => false);
    expect(end).toMatchObject({ kind: 'threw', permanent: false });
    expect((end as { error: Error }).error.message).toMatch(/threw undefined/);
  });

  test('claim errors: key conflict, invalid key or refused claim options, shutdown during the backoff, else the store is unavailable', () => {
    const conflict = new KeyConflictError('k', 'a', 'b');
    expect(claimFailure(conflict, false)).toEqual({ kind: 'key_conflict', error: conflict });
    const badKey = new InvalidKeyError('too long');
    expect(claimFailure(badKey, false)).toEqual({ kind: 'invalid', reason: 'invalid_key', error: badKey });
    const badOptions = new ConfigurationError('leaseTtlMs');
    expect(claimFailure(badOptions, true)).toEqual({ kind: 'invalid', reason: 'invalid_key', error: badOptions });
    const stop = new ShutdownError();
    expect(claimFailure(stop, true)).toEqual({ kind: 'stopping', during: 'claim', error: stop });
    const down = new ClaimerUnavailableError('down');
    expect(claimFailure(down, true)).toEqual({ kind: 'claim_failed', error: down, failOpen: true });
  });

  test('attempt numbers: the acquisition count, never below one past the prior attempts the broker copy carries', () => {
    expect(attemptOf(1, undefined)).toBe(1);
    expect(attemptOf(3, 1)).toBe(3);
    expect(attemptOf(1, 2)).toBe(3); // the claim expired in a delay queue; the header remembers
    expect(attemptOf(undefined, undefined)).toBe(1); // fail-open
    expect(attemptOf(undefined, 4)).toBe(5);
  });

  test('attempts a requeued copy carries: only a retry counts; busy, unavailable, lease lost and shutdown keep the prior count', () => {
    expect(attemptsAfterRequeue('retry', 2, 0)).toBe(2);
    expect(attemptsAfterRequeue('retry', undefined, 2)).toBe(3);
    expect(attemptsAfterRequeue('retry', 1, 4)).toBe(5);
    for (const cause of ['busy', 'claimer_unavailable', 'lease_lost', 'shutdown'] as const) expect(attemptsAfterRequeue(cause, 3, 1)).toBe(1);
  });

  test('the handled moment: when the commit is issued without a transaction, only after it succeeded with one', () => {
    expect(handledOnCommitIssued(false)).toBe(true);
    expect(handledOnCommitIssued(true)).toBe(false);
  });
});

describe('the decision type admits only the receipt/broker pairs the table decides', () => {
  test('a release goes with a requeue, a release with the count reset with a dead-letter (checked by the compiler)', () => {
    const base = { kind: 'settle', outcome: 'released', events: [], handled: true, error: undefined } as const;
    // @ts-expect-error a released key is requeued, never acked
    const releasedAck: Settlement = { ...base, receipt: 'release', broker: { kind: 'ack', duplicate: false } };
    // @ts-expect-error the count is reset only for a dead-letter
    const resetRequeue: Settlement = { ...base, receipt: 'release_reset', broker: { kind: 'requeue', cause: 'retry', delayMs: 1 } };
    const legal: Settlement = { ...base, receipt: 'release', broker: { kind: 'requeue', cause: 'retry', delayMs: 1 } };
    expect([releasedAck.receipt, resetRequeue.receipt, legal.receipt]).toEqual(['release', 'release_reset', 'release']);
  });

  test('every end the table decides, on both paths and at every attempt, is one of the legal pairs', () => {
    const ends: HandlerEnd[] = [
      { kind: 'ack' },
      { kind: 'requeue' },
      { kind: 'requeue', delayMs: 3 },
      { kind: 'reject', reason: 'r' },
      { kind: 'invalid_disposition', error: new InvalidDispositionError(1) },
      { kind: 'threw', error: new Error('x'), permanent: false },
      { kind: 'threw', error: new PermanentError('x'), permanent: true },
      { kind: 'aborted', cause: 'shutdown', error: new ShutdownError() },
      { kind: 'aborted', cause: 'timeout', error: new TimeoutError('t') },
      { kind: 'aborted', cause: 'lease_lost', error: new LeaseLostError('k', 1, 'extend') },
    ];
    const legal = { none: ['ack', 'requeue', 'dead_letter'], release: ['requeue'], release_uncounted: ['requeue'], release_reset: ['dead_letter'] };
    for (const end of ends) {
      for (const attempt of [1, 2, 3]) {
        for (const decision of [guarded(end, attempt), unguarded(end, attempt)]) {
          if (decision.kind !== 'settle') continue;
          expect(legal[decision.receipt]).toContain(decision.broker.kind);
        }
      }
    }
  });
});

describe('in-place rows (a source that requeues in place: the Kafka partition; docs/kafka.md "Settlement on Kafka")', () => {
  const backoff = { maxDelayMs: 1000, jitter: 0 };

  test('a settle that failed: dispatch again after UNSETTLED_RETRY_MS', () => {
    expect(requeueInPlace(undefined, false, 0, backoff)).toEqual({ kind: 'wait', delayMs: UNSETTLED_RETRY_MS });
  });

  test('shutdown: leave the record (it comes again after the restart or rebalance)', () => {
    expect(requeueInPlace({ cause: 'shutdown', delayMs: 0 }, true, 0, backoff)).toEqual({ kind: 'leave' });
  });

  test('busy while this partition\'s own commits are in flight: wait for them, not for busyRequeueDelayMs; otherwise the table\'s delay', () => {
    expect(requeueInPlace({ cause: 'busy', delayMs: 250 }, true, 0, backoff)).toEqual({ kind: 'after_own_commits' });
    expect(requeueInPlace({ cause: 'busy', delayMs: 250 }, false, 0, backoff)).toEqual({ kind: 'wait', delayMs: 250 });
  });

  test('retry and lease_lost: the delay the table chose', () => {
    expect(requeueInPlace({ cause: 'retry', delayMs: 400 }, true, 0, backoff)).toEqual({ kind: 'wait', delayMs: 400 });
    expect(requeueInPlace({ cause: 'lease_lost', delayMs: 10 }, false, 0, backoff)).toEqual({ kind: 'wait', delayMs: 10 });
  });

  test('claimer unavailable: the table\'s delay doubled per unavailable answer in a row, capped at unavailableBackoff.maxDelayMs', () => {
    const unavailable = { cause: 'claimer_unavailable', delayMs: 100 } as const;
    expect([1, 2, 3, 4, 5].map((streak) => requeueInPlace(unavailable, false, streak, backoff))).toEqual(
      [100, 200, 400, 800, 1000].map((delayMs) => ({ kind: 'wait', delayMs })),
    );
    // A cap below the table's delay never shortens it.
    expect(requeueInPlace({ cause: 'claimer_unavailable', delayMs: 5000 }, false, 3, backoff)).toEqual({ kind: 'wait', delayMs: 5000 });
  });
});
