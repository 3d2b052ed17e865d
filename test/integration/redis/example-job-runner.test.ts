/**
 * examples/job-runner on the real Redis: three replicas (each with its own connection and
 * RedisClaimer) tick the same job; each period runs once; a failed or crashed run blocks its
 * period until the operator's retry.
 */
import type { Redis } from 'ioredis';
import { runOnceKey } from '../../../src';
import { RedisClaimer } from '../../../adapters/redis';
import { type Job, JobRunner } from '../../../examples/job-runner/job-runner';
import { describeWithServices } from '../../support/services';
import { connectRedis, deleteMatching, silentLogger, uniquePrefix} from './support/redis-helpers';
import { waitFor } from '../../support/wait';

describeWithServices(['redis'], 'examples/job-runner (real Redis)', () => {
  let clients: Redis[] = [];
  let prefix = '';
  beforeEach(() => {
    prefix = uniquePrefix('jobs');
  });
  afterEach(async () => {
    if (clients[0]) await deleteMatching(clients[0], `${prefix}*`);
    await Promise.all(clients.map((c) => c.quit()));
    clients = [];
  });

  async function replicas(n: number): Promise<{ runners: JobRunner[]; claimers: RedisClaimer[] }> {
    const claimers: RedisClaimer[] = [];
    for (let i = 0; i < n; i++) {
      const redis = await connectRedis();
      clients.push(redis);
      claimers.push(new RedisClaimer({ redis, logger: silentLogger }, { prefix }));
    }
    return { claimers, runners: claimers.map((c) => new JobRunner(c, silentLogger)) };
  }

  /** A daily job whose run waits for `open()`, counting its runs. */
  function invoiceJob(behaviour: () => Promise<void> = async () => undefined): Job<{ invoices: number }> & { runs: number } {
    const job = {
      name: 'send-invoices',
      periodOf: (now: Date) => now.toISOString().slice(0, 10),
      leaseTtlMs: 300,
      doneTtlMs: 60_000,
      runs: 0,
      run: async () => {
        job.runs++;
        await behaviour();
        return { invoices: 3 };
      },
    };
    return job;
  }

  const day = new Date('2026-12-01T03:00:00Z');

  test('three replicas tick the same period at once: one runs it, the others see it running, then done with its summary', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const job = invoiceJob(() => gate);
    const { runners } = await replicas(3);
    const ticking = runners.map((r) => r.tick(job, day));
    await waitFor(() => job.runs === 1);
    // The first run keeps its 300 ms lease alive while the others tick again.
    await new Promise((r) => setTimeout(r, 700));
    const meanwhile = await Promise.all(runners.map((r) => r.tick(job, day)));
    expect(meanwhile.map((t) => t.outcome)).toEqual(['running_elsewhere', 'running_elsewhere', 'running_elsewhere']);
    open();
    const first = await Promise.all(ticking);
    expect(first.map((t) => t.outcome).sort()).toEqual(['ran', 'running_elsewhere', 'running_elsewhere']);
    const later = await Promise.all(runners.map((r) => r.tick(job, day)));
    expect(later).toEqual(runners.map(() => ({ outcome: 'already_done', runId: '2026-12-01', summary: { invoices: 3 } })));
    expect(job.runs).toBe(1);
    const nextDay = await runners[1]!.tick(job, new Date('2026-12-02T03:00:00Z'));
    expect(nextDay.outcome).toBe('ran');
    expect(job.runs).toBe(2);
  });

  test('a failed run blocks its period on every replica until the operator retries', async () => {
    let fail = true;
    const job = invoiceJob(async () => {
      if (fail) throw new Error('mail server rejected the batch halfway');
    });
    const { runners } = await replicas(2);
    expect((await runners[0]!.tick(job, day)).outcome).toBe('failed');
    fail = false;
    expect((await runners[0]!.tick(job, day)).outcome).toBe('blocked');
    expect((await runners[1]!.tick(job, day)).outcome).toBe('blocked');
    expect(job.runs).toBe(1);
    expect(await runners[1]!.retry(job, '2026-12-01')).toEqual({ outcome: 'ran', runId: '2026-12-01', summary: { invoices: 3 } });
    expect((await runners[0]!.tick(job, day)).outcome).toBe('already_done');
    expect(job.runs).toBe(2);
  });

  test('a replica that crashed mid-run blocks the period once its lease expired (Redis-judged), until the retry', async () => {
    const job = invoiceJob();
    const { runners, claimers } = await replicas(2);
    // The crashed replica: it claimed the period and never settled.
    const crashed = await claimers[0]!.claim(runOnceKey({ operation: 'job:send-invoices' }, '2026-12-01'), { leaseTtlMs: job.leaseTtlMs, doneTtlMs: job.doneTtlMs });
    expect(crashed.state).toBe('acquired');
    expect((await runners[1]!.tick(job, day)).outcome).toBe('running_elsewhere');
    await waitFor(async () => (await runners[1]!.tick(job, day)).outcome === 'blocked', { timeoutMs: 5000, intervalMs: 50, what: 'the crashed lease to expire' });
    expect(job.runs).toBe(0);
    expect((await runners[1]!.retry(job, '2026-12-01')).outcome).toBe('ran');
    expect(job.runs).toBe(1);
  });
});
