/**
 * `claimMany` of the transactional mode with `transactionBatch: 'per-chunk'`: claims a chunk of
 * keys into ONE transaction on one pool client, and answers one entry per request, in order. The
 * platform inbox claims in one round trip (the advisory locks are the claims; the rows are written
 * completed at the commit), the tenant inbox in two (its claim rows are inserted in the
 * transaction, so a tenant its table does not hold is refused before a handler runs):
 * statements/chunk.ts. See chunk-transaction.ts for how the chunk ends.
 */
import { randomUUID } from 'node:crypto';
import type { QueryResult } from 'pg';
import { type JsonValue } from '../../src';
import { NonAcquiredReceipt, validateClaimOptions, type ClaimManyEntry, type ClaimRequest, validateKey } from '../../src/adapter-kit';
import { ChunkMemberLease, ChunkTransaction } from './chunk-transaction';
import { SQLSTATE, sqlState, toClaimerError } from './errors';
import { type KeyDigests, keyDigests, sha256 } from './key-digest';
import { borrow, type BorrowedClient } from './pool-client';
import type { ClaimSession } from './claim-session';
import { standaloneClaimResult } from './standalone-lease';
import { conflictError, runWithin } from './statement-runner';
import { storedResult } from './stored-outcome';
import { type BeginAttemptRow } from './statements/transaction';
import { attemptsAndBegin, beginAttempts, beginChunk } from './statements/chunk';
import type { ClaimRow } from './statements/claim';
import { TransactionReceipt } from './transaction-lease';

/** The entry of a key the chunk did not acquire: done (with its stored result), a fingerprint conflict, or busy. */
function notAcquired(c: Candidate, row: BeginAttemptRow): ClaimManyEntry {
  const key = c.request.key;
  if (row.state === 'done') return { ok: true, result: { state: 'done', receipt: new NonAcquiredReceipt(key, 'done'), result: storedResult(row.outcome) as JsonValue } };
  if (row.state === 'conflict') return { ok: false, error: conflictError(key, row.stored_fingerprint, c.request.options) };
  return { ok: true, result: { state: 'busy', receipt: new NonAcquiredReceipt(key, 'busy') } };
}

interface Candidate {
  readonly index: number;
  readonly request: ClaimRequest;
  readonly tenant: string | undefined;
  readonly digests: KeyDigests;
  readonly fingerprint: Buffer | null;
}

/**
 * Claims `requests` into one shared transaction.
 * - The chunk ends before the first request whose key repeats an earlier one: that request and
 *   every later one answer `busy` and hold nothing. The repeat can be told a duplicate only once
 *   the chunk COMMITted, which needs every member first, so a member after it could never commit;
 *   a source claims the cut requests again after the chunk ended (the Kafka source does).
 * - Done keys answer `done` with their stored result and open nothing; a different fingerprint is
 *   that entry's `KeyConflictError`; a key another session holds is `busy`.
 * - A row lock the claim cannot get within the lock limit makes every key of the chunk `busy`.
 * @throws ClaimerUnavailableError (and the other classified errors) when the store fails: the
 *   session is closed, so the server drops every lock and the open transaction
 */
export async function claimChunk(session: ClaimSession, requests: readonly ClaimRequest[]): Promise<ClaimManyEntry[]> {
  const entries: (ClaimManyEntry | undefined)[] = new Array(requests.length);
  const candidates: Candidate[] = [];
  const seen = new Set<string>();
  let cut = false;
  requests.forEach((request, index) => {
    // The chunk ends before the first repeated key: from there on nothing is claimed.
    if (cut || seen.has(request.key)) {
      cut = true;
      entries[index] = { ok: true, result: { state: 'busy', receipt: new NonAcquiredReceipt(request.key, 'busy') } };
      return;
    }
    try {
      validateKey(request.key);
      validateClaimOptions(request.options);
      const tenant = session.tenantOf(request.key);
      seen.add(request.key);
      const fingerprint = request.options.fingerprint === undefined ? null : sha256(request.options.fingerprint);
      candidates.push({ index, request, tenant, digests: keyDigests(request.key, tenant), fingerprint });
    } catch (error) {
      entries[index] = { ok: false, error: error as Error };
    }
  });
  if (candidates.length === 0) return entries as ClaimManyEntry[];

  const opts = session.options;
  const what = `claimMany of ${candidates.length} keys in one transaction`;
  const deadlineAt = session.clock.now() + opts.operationTimeoutMs;
  // One lease for the chunk's transaction limits: the shortest asked.
  const leaseMs = Math.min(...candidates.map((c) => c.request.options.leaseTtlMs));
  const retainMs = Math.max(...candidates.map((c) => c.request.options.doneTtlMs));
  const borrowed = await borrow(session.pool, what, opts.operationTimeoutMs);
  if (candidates.every((c) => c.tenant === undefined)) return claimPlatformChunk(session, borrowed, candidates, entries, { what, deadlineAt, leaseMs, retainMs });
  // From the first send on, the session may hold advisory locks and an open transaction.
  let sent = false;
  try {
    const step1 = beginAttempts(
      opts.schema,
      candidates.map((c) => ({ ...(c.tenant === undefined ? {} : { tenant: c.tenant }), lockId: c.digests.lockId, scope: c.digests.scope, key: c.digests.key, fingerprint: c.fingerprint })),
      retainMs,
    );
    sent = true;
    const begun = await runWithin<BeginAttemptRow & Record<string, unknown>>(borrowed, what, step1.text, step1.values, session.remaining(deadlineAt));
    const counted: { candidate: Candidate; attempt: number; owner: string }[] = [];
    candidates.forEach((c, i) => {
      const row = begun[i]!;
      switch (row.state) {
        case 'counted':
          counted.push({ candidate: c, attempt: row.attempts, owner: randomUUID() });
          break;
        default:
          entries[c.index] = notAcquired(c, row);
      }
    });
    if (counted.length === 0) {
      borrowed.giveBack();
      return entries as ClaimManyEntry[];
    }

    const text = beginChunk(
      opts.schema,
      leaseMs,
      Math.min(opts.operationTimeoutMs, leaseMs),
      counted.map(({ candidate: c, attempt, owner }) => ({
        ...(c.tenant === undefined ? {} : { tenant: c.tenant }),
        key: c.digests.key,
        keyText: opts.keepKeyText ? c.request.key : null,
        fingerprint: c.fingerprint,
        owner,
        attempt,
      })),
    );
    const remainingMs = session.remaining(deadlineAt);
    let replies: QueryResult[];
    try {
      if (remainingMs <= 0) throw toClaimerError(new Error('deadline passed before sending'), what);
      replies = (await borrowed.client.query({ text, query_timeout: Math.ceil(remainingMs) } as never)) as unknown as QueryResult[];
    } catch (error) {
      if (sqlState(error) !== SQLSTATE.lockNotAvailable) throw error;
      // A row of the chunk is locked by another transaction past the lock limit: end the chunk
      // (counts kept, locks released) and answer busy for its keys, never an unbounded wait.
      const chunk = new ChunkTransaction(session, borrowed, counted.map(({ candidate: c }) => ({ lockId: c.digests.lockId, scope: c.digests.scope })));
      await chunk.abandon(what);
      for (const { candidate: c } of counted) entries[c.index] = { ok: true, result: { state: 'busy', receipt: new NonAcquiredReceipt(c.request.key, 'busy') } };
      return entries as ClaimManyEntry[];
    }
    const rows = replies[replies.length - 1]!.rows as ClaimRow[];
    const others = counted.filter((_, i) => rows[i]?.state !== 'acquired').map(({ candidate: c }) => ({ lockId: c.digests.lockId, scope: c.digests.scope }));
    const chunk = new ChunkTransaction(session, borrowed, others);
    counted.forEach(({ candidate: c, owner }, i) => {
      const row = rows[i]!;
      const key = c.request.key;
      if (row.state === 'acquired') {
        const member = new ChunkMemberLease(chunk, session, c.tenant, c.digests, key);
        const lease = { key, ownerToken: owner, fencingToken: Number(row.fencing_token) };
        entries[c.index] = { ok: true, result: { state: 'acquired', attempt: row.attempt, receipt: new TransactionReceipt(lease, member, c.request.options.doneTtlMs, opts.maxResultBytes, opts.schema, chunk) } };
        return;
      }
      // A row a standalone claimer of the same table holds: answer as it does.
      try {
        entries[c.index] = { ok: true, result: standaloneClaimResult(session, key, c.tenant, c.digests, owner, c.request.options, row) };
      } catch (error) {
        entries[c.index] = { ok: false, error: error as Error };
      }
    });
    if (others.length === counted.length) await chunk.abandon(what);
    return entries as ClaimManyEntry[];
  } catch (error) {
    borrowed.noteError(error);
    // Possibly holding advisory locks or a transaction: close the session so the server drops both.
    borrowed.giveBack(sent);
    throw toClaimerError(error, what);
  }
}

/**
 * The platform inbox's chunk claim, one round trip (statements/chunk.ts `attemptsAndBegin`): every
 * key's advisory lock, done check, attempt count and fencing token auto-committed, then BEGIN
 * with the chunk's limits. A counted key is acquired: its lock is its claim until the
 * chunk ends, and its row is written completed by the chunk's commit. When no key was counted the
 * empty transaction is rolled back (one more round trip).
 */
async function claimPlatformChunk(
  session: ClaimSession,
  borrowed: BorrowedClient,
  candidates: readonly Candidate[],
  entries: (ClaimManyEntry | undefined)[],
  limits: { readonly what: string; readonly deadlineAt: number; readonly leaseMs: number; readonly retainMs: number },
): Promise<ClaimManyEntry[]> {
  const opts = session.options;
  const { what, leaseMs } = limits;
  let sent = false;
  try {
    const text = attemptsAndBegin(
      opts.schema,
      candidates.map((c) => ({ lockId: c.digests.lockId, scope: c.digests.scope, key: c.digests.key, fingerprint: c.fingerprint })),
      limits.retainMs,
      leaseMs,
      Math.min(opts.operationTimeoutMs, leaseMs),
    );
    const remainingMs = session.remaining(limits.deadlineAt);
    if (remainingMs <= 0) throw new Error('deadline passed before sending');
    sent = true;
    const replies = (await borrowed.client.query({ text, query_timeout: Math.ceil(remainingMs) } as never)) as unknown as QueryResult[];
    const begun = replies[0]!.rows as (BeginAttemptRow & { fencing_token: string })[];
    const chunk = new ChunkTransaction(session, borrowed, []);
    let members = 0;
    candidates.forEach((c, i) => {
      const row = begun[i]!;
      const key = c.request.key;
      switch (row.state) {
        case 'counted': {
          members++;
          const member = new ChunkMemberLease(chunk, session, undefined, c.digests, key, { attempt: row.attempts, fingerprint: c.fingerprint });
          const lease = { key, ownerToken: randomUUID(), fencingToken: Number(row.fencing_token) };
          entries[c.index] = { ok: true, result: { state: 'acquired', attempt: row.attempts, receipt: new TransactionReceipt(lease, member, c.request.options.doneTtlMs, opts.maxResultBytes, opts.schema, chunk) } };
          break;
        }
        default:
          entries[c.index] = notAcquired(c, row);
      }
    });
    if (members === 0) await chunk.abandon(what);
    return entries as ClaimManyEntry[];
  } catch (error) {
    borrowed.noteError(error);
    // Possibly holding advisory locks or a transaction: close the session so the server drops both.
    borrowed.giveBack(sent);
    throw toClaimerError(error, what);
  }
}
