/**
 * The claimer side of the Kafka batch mode (`transactionBatch: 'per-chunk'`) on real PostgreSQL,
 * without a broker: `claimMany` puts a chunk's keys in one shared transaction; the chunk COMMITs
 * once every member committed and rolls back, for all, when one is released or its session ends;
 * attempt counts survive the rollback.
 */
import { Client, type PoolClient } from 'pg';
import type { ClaimResult, Receipt } from '../../../src';
import { type ClaimManyEntry } from '../../../src/adapter-kit';
import { PostgresClaimer, TransactionAbortedError } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { type InboxFixture, inboxFixture, writeLedger } from './support/inbox-fixture';

const OPTIONS = { leaseTtlMs: 30_000, doneTtlMs: 600_000 };

function acquired(entry: ClaimManyEntry | undefined): Extract<ClaimResult, { state: 'acquired' }> {
  if (!entry?.ok || entry.result.state !== 'acquired') throw new Error(`not acquired: ${JSON.stringify(entry)}`);
  return entry.result;
}

describeWithServices(['postgres'], 'PostgresClaimer per-chunk transactions (claimMany)', () => {
  let f: InboxFixture;
  let claimer: PostgresClaimer;
  beforeEach(async () => {
    f = await inboxFixture('chunkclaim');
    claimer = new PostgresClaimer({ pool: f.pool }, { schema: f.schema, mode: 'transactional', transactionBatch: 'per-chunk' });
  });
  afterEach(() => f.cleanup());

  const claimMany = (keys: string[], options = OPTIONS) => claimer.claimMany!(keys.map((key) => ({ key, options })));

  test('one transaction for the chunk: effects invisible until the last member commits, then COMMIT once; each key done with its result', async () => {
    const entries = await claimMany(['a', 'b', 'c']);
    const [a, b, c] = entries.map(acquired);
    const shared = a!.receipt.sharedTransaction!;
    expect(shared).toBeDefined();
    expect(b!.receipt.sharedTransaction).toBe(shared);
    expect(c!.receipt.sharedTransaction).toBe(shared);
    const pid = async (r: Receipt) => (await (r.transaction as PoolClient).query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    expect(new Set([await pid(a!.receipt), await pid(b!.receipt), await pid(c!.receipt)]).size).toBe(1);
    for (const [r, key] of [[a!, 'a'], [b!, 'b'], [c!, 'c']] as const) await writeLedger(r.receipt.transaction as PoolClient, f.ledger, key);

    // Not adopted: a member's commit waits for the chunk's COMMIT, which waits for every member.
    let early = 0;
    const commits = [a!.receipt.commit({ v: 'a' }), b!.receipt.commit({ v: 'b' })].map((p) => p.then(() => early++));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(early).toBe(0);
    expect((await f.counts()).size).toBe(0);
    await c!.receipt.commit({ v: 'c' });
    await Promise.all(commits);
    expect(await shared.outcome).toBe(true);
    expect([...(await f.counts()).values()]).toEqual([1, 1, 1]);
    const again = await claimMany(['a', 'b']);
    expect(again.map((e) => (e.ok ? [e.result.state, (e.result as { result?: unknown }).result] : e.error.name))).toEqual([
      ['done', { v: 'a' }],
      ['done', { v: 'b' }],
    ]);
  });

  test('adopted: a member commit resolves at once (recorded, not durable); the last member COMMITs', async () => {
    const [a, b] = (await claimMany(['a', 'b'])).map(acquired);
    a!.receipt.sharedTransaction!.adopt();
    await writeLedger(a!.receipt.transaction as PoolClient, f.ledger, 'a');
    await a!.receipt.commit();
    expect((await f.counts()).size).toBe(0);
    await writeLedger(b!.receipt.transaction as PoolClient, f.ledger, 'b');
    await b!.receipt.commit();
    expect(await a!.receipt.sharedTransaction!.outcome).toBe(true);
    expect((await f.counts()).size).toBe(2);
  });

  test('a released member rolls the whole chunk back: no effect stays, the others fail their commit, attempt counts survive', async () => {
    const [a, b, c] = (await claimMany(['a', 'b', 'c'])).map(acquired);
    expect([a!.attempt, b!.attempt, c!.attempt]).toEqual([1, 1, 1]);
    a!.receipt.sharedTransaction!.adopt();
    await writeLedger(a!.receipt.transaction as PoolClient, f.ledger, 'a');
    await a!.receipt.commit();
    await writeLedger(b!.receipt.transaction as PoolClient, f.ledger, 'b');
    await b!.receipt.release();
    expect(await a!.receipt.sharedTransaction!.outcome).toBe(false);
    await expect(c!.receipt.commit()).rejects.toBeInstanceOf(TransactionAbortedError);
    await expect((c!.receipt.transaction as PoolClient).query('SELECT 1')).rejects.toBeInstanceOf(TransactionAbortedError);
    expect((await f.counts()).size).toBe(0);
    // One by one now (each in its own transaction), the attempt counted before the rollback kept.
    const perRecord = new PostgresClaimer({ pool: f.pool }, { schema: f.schema, mode: 'transactional' });
    const retry = await perRecord.claim('a', OPTIONS);
    expect(retry.state).toBe('acquired');
    expect((retry as { attempt: number }).attempt).toBe(2);
    await retry.receipt.release();
  });

  test('the session ends under a waiting commit (idle_in_transaction_session_timeout = leaseTtlMs): the commit fails at once, nothing applied, the client leaves the pool', async () => {
    const [a] = (await claimMany(['a', 'b'], { leaseTtlMs: 1000, doneTtlMs: 60_000 })).map(acquired);
    await writeLedger(a!.receipt.transaction as PoolClient, f.ledger, 'a');
    const started = Date.now();
    // Not adopted and b never settles: the commit waits; PostgreSQL ends the idle session.
    await expect(a!.receipt.commit()).rejects.toBeInstanceOf(TransactionAbortedError);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(await a!.receipt.sharedTransaction!.outcome).toBe(false);
    expect((await f.counts()).size).toBe(0);
    // The keys are free again (the session's advisory locks went with it).
    const again = await claimMany(['a', 'b']);
    expect(again.map((e) => e.ok && e.result.state)).toEqual(['acquired', 'acquired']);
    for (const e of again) await acquired(e).receipt.release();
  }, 30_000);

  test('the platform inbox: a chunk of 8 keys is claimed in ONE round trip and committed in one (one statement completes every row); rows written completed', async () => {
    const keys = ['r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7', 'r8'];
    await claimer.ready();
    const sent = jest.spyOn(Client.prototype, 'query');
    try {
      const members = (await claimMany(keys)).map(acquired);
      expect(sent).toHaveBeenCalledTimes(1);
      const tx = members[0]!.receipt.transaction as PoolClient;
      // No claim row is written before the commit: the advisory locks are the claims.
      expect(Number((await tx.query(`SELECT count(*) AS n FROM ${f.schema}.twophase_inbox`)).rows[0].n)).toBe(0);
      for (const [i, m] of members.entries()) await writeLedger(m.receipt.transaction as PoolClient, f.ledger, keys[i]!);
      sent.mockClear();
      await Promise.all(members.map((m, i) => m.receipt.commit({ i })));
      expect(sent).toHaveBeenCalledTimes(1);
      const text = String((sent.mock.calls[0]![0] as unknown as { text: string }).text);
      expect(text.match(/INSERT INTO/g)).toHaveLength(1);
    } finally {
      sent.mockRestore();
    }
    expect([...(await f.counts()).values()]).toEqual(keys.map(() => 1));
    const rows = await f.pool.query<{ status: string; attempt: number; outcome: unknown }>(`SELECT status, attempt, outcome FROM ${f.schema}.twophase_inbox ORDER BY (outcome->'result'->>'i')::int`);
    expect(rows.rows).toEqual(keys.map((_, i) => ({ status: 'completed', attempt: 1, outcome: { result: { i } } })));
    expect(Number((await f.pool.query(`SELECT count(*) AS n FROM ${f.schema}.twophase_attempts`)).rows[0].n)).toBe(0);
  });

  test('the tenant inbox: the chunk still writes its claim rows at the claim (two round trips), completes them at the commit; each key done with its result', async () => {
    const tenantClaimer = new PostgresClaimer({ pool: f.pool }, { schema: f.schema, mode: 'transactional', transactionBatch: 'per-chunk', tenantOf: () => 't1' });
    await tenantClaimer.ready();
    const keys = ['ta', 'tb', 'tc'];
    const sent = jest.spyOn(Client.prototype, 'query');
    let members: Extract<ClaimResult, { state: 'acquired' }>[];
    try {
      members = (await tenantClaimer.claimMany!(keys.map((key) => ({ key, options: OPTIONS })))).map(acquired);
      expect(sent).toHaveBeenCalledTimes(2);
    } finally {
      sent.mockRestore();
    }
    for (const [i, m] of members.entries()) await writeLedger(m.receipt.transaction as PoolClient, f.ledger, keys[i]!);
    await Promise.all(members.map((m, i) => m.receipt.commit({ i })));
    expect([...(await f.counts()).values()]).toEqual([1, 1, 1]);
    const rows = await f.pool.query<{ status: string }>(`SELECT status FROM ${f.schema}.twophase_tenant_inbox WHERE tenant_id = 't1'`);
    expect(rows.rows.map((r) => r.status)).toEqual(['completed', 'completed', 'completed']);
    const again = await tenantClaimer.claimMany!(keys.map((key) => ({ key, options: OPTIONS })));
    expect(again.map((e) => (e.ok ? [e.result.state, (e.result as { result?: unknown }).result] : e.error.name))).toEqual(keys.map((_, i) => ['done', { i }]));
  });

  test('a key a standalone claimer of the same table holds live: the chunk cannot write its row, so its COMMIT rolls every member back', async () => {
    const standalone = new PostgresClaimer({ pool: f.pool }, { schema: f.schema });
    const held = await standalone.claim('held', OPTIONS);
    expect(held.state).toBe('acquired');
    const [free, other] = (await claimMany(['free', 'held'])).map(acquired);
    await writeLedger(free!.receipt.transaction as PoolClient, f.ledger, 'free');
    const commits = [free!.receipt.commit(), other!.receipt.commit()];
    for (const c of commits) await expect(c).rejects.toBeInstanceOf(TransactionAbortedError);
    expect(await free!.receipt.sharedTransaction!.outcome).toBe(false);
    expect((await f.counts()).size).toBe(0);
    await held.receipt.release();
  });

  test('a done key answers done and joins no transaction; the chunk ends before a repeated key: it and every later key answer busy and hold nothing', async () => {
    const [first] = (await claimMany(['d'])).map(acquired);
    await first!.receipt.commit({ v: 'd' });
    const entries = await claimMany(['d', 'x', 'y', 'x', 'z']);
    expect(entries.map((e) => e.ok && e.result.state)).toEqual(['done', 'acquired', 'acquired', 'busy', 'busy']);
    // 'z' was not claimed: another claim takes it at once.
    const [z] = (await claimMany(['z'])).map(acquired);
    await z!.receipt.release();
    await acquired(entries[1]).receipt.release();
  });
});
