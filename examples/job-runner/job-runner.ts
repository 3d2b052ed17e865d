/**
 * A scheduled job guarded by `runOnce`: every replica ticks on its own timer, and each period's
 * run (the run id, here the UTC date or minute) happens once across all of them.
 *
 * A tick ends in one of:
 * - `ran`: this replica ran the period's job;
 * - `already_done`: a replica ran it earlier (its stored summary is returned, the job not run);
 * - `running_elsewhere`: another replica is running it now;
 * - `blocked`: an earlier run failed or did not finish (a crash): its effect may be partly
 *   applied, so the job waits for an operator's {@link JobRunner.retry};
 * - `failed`: this replica's run threw (recorded: the next ticks report `blocked`).
 */
import {
  type Claimer,
  InProgressError,
  type JsonValue,
  type Logger,
  PreviousAttemptFailedError,
  runOnce,
  type RunOnceContext,
} from '../../src';

export interface Job<T extends JsonValue> {
  /** The job type: the scope of its run ids. */
  readonly name: string;
  /** The run id of the period holding `now` (`2026-12-01` for a daily job). */
  periodOf(now: Date): string;
  /** The work. Its JSON summary is stored and returned by later ticks of the same period. */
  run(context: RunOnceContext): Promise<T>;
  /** How long a crashed run blocks its period, ms (kept alive while the job runs). */
  readonly leaseTtlMs: number;
  /** How long a period stays done, ms: longer than the period, or a late tick runs it again. */
  readonly doneTtlMs: number;
}

export type TickOutcome<T> =
  | { readonly outcome: 'ran' | 'already_done'; readonly runId: string; readonly summary: T }
  | { readonly outcome: 'running_elsewhere' | 'blocked'; readonly runId: string }
  | { readonly outcome: 'failed'; readonly runId: string; readonly error: unknown };

export class JobRunner {
  constructor(
    private readonly claimer: Claimer,
    private readonly logger: Logger,
  ) {}

  /** Runs `job` for the period holding `now`, unless it ran (or runs) elsewhere. Never throws for the job's own failure. */
  tick<T extends JsonValue>(job: Job<T>, now: Date = new Date()): Promise<TickOutcome<T>> {
    return this.runPeriod(job, job.periodOf(now), false);
  }

  /** The operator's explicit retry of a `blocked` period, after checking what its failed run left. */
  retry<T extends JsonValue>(job: Job<T>, runId: string): Promise<TickOutcome<T>> {
    return this.runPeriod(job, runId, true);
  }

  private async runPeriod<T extends JsonValue>(job: Job<T>, runId: string, retry: boolean): Promise<TickOutcome<T>> {
    try {
      const done = await runOnce<T>(
        { claimer: this.claimer, scope: { operation: `job:${job.name}` }, key: runId, leaseTtlMs: job.leaseTtlMs, doneTtlMs: job.doneTtlMs, retry, logger: this.logger },
        (context) => job.run(context),
      );
      const outcome = done.status === 'ran' ? 'ran' : 'already_done';
      if (outcome === 'ran') this.logger.info({ job: job.name, runId, summary: done.result }, 'job ran');
      return { outcome, runId, summary: done.result };
    } catch (error) {
      if (error instanceof InProgressError) return { outcome: 'running_elsewhere', runId };
      if (error instanceof PreviousAttemptFailedError) {
        this.logger.warn({ job: job.name, runId }, 'job blocked: an earlier run failed or did not finish; check its effects, then retry');
        return { outcome: 'blocked', runId };
      }
      this.logger.error({ job: job.name, runId, err: error }, 'job failed');
      return { outcome: 'failed', runId, error };
    }
  }
}
