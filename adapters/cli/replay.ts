/**
 * The broker-independent replay loop of `twophase dlq replay`.
 */
import { checkKnownOptions, optionNames } from '../../src';
import { type ReplayBackend, type ReplayDestination, type ReplayItem, ReplayItemError } from './replay-backend';

/** Options of one replay run. */
export interface ReplayOptions {
  /** The dead-letter queue (or topic). */
  readonly source: string;
  /** Most messages to examine; undefined for all that were there at the start. */
  readonly limit?: number;
  /** Show what would be replayed, change nothing. */
  readonly dryRun: boolean;
  /** Stops the loop after the message in progress (SIGINT, SIGTERM). */
  readonly signal?: AbortSignal;
}

/** What happened to one message. */
export type ReplayOutcome = 'replayed' | 'would_replay' | 'skipped' | 'failed';

/** Progress events, in order: `start`, one `message` per examined message, `done`. */
export type ReplayEvent =
  | { readonly type: 'start'; readonly source: string; readonly available: number; readonly planned: number; readonly dryRun: boolean }
  | {
      readonly type: 'message';
      readonly index: number;
      readonly planned: number;
      readonly outcome: ReplayOutcome;
      readonly item: ReplayItem;
      readonly destination?: ReplayDestination;
      readonly error?: string;
    }
  | { readonly type: 'done'; readonly summary: ReplaySummary };

/** Totals of a run. */
export interface ReplaySummary {
  readonly source: string;
  readonly dryRun: boolean;
  /** Messages in the source when the run started. */
  readonly available: number;
  readonly examined: number;
  readonly replayed: number;
  readonly wouldReplay: number;
  /** Left in place because they cannot be replayed (no route, unroutable). */
  readonly skipped: number;
  /** Left in place after an error that stopped the run. */
  readonly failed: number;
  /** True when the run stopped early (signal or error). */
  readonly interrupted: boolean;
  readonly durationMs: number;
}

/**
 * Replays dead-lettered messages through `backend`: each is republished with a confirm before its
 * dead-letter copy is removed. Never throws for a per-message problem; an error that is not a
 * {@link ReplayItemError} stops the run (the message stays in the source) and is rethrown after
 * the `done` event.
 */
export async function replayDeadLetters(backend: ReplayBackend, options: ReplayOptions, onEvent: (event: ReplayEvent) => void): Promise<ReplaySummary> {
  checkKnownOptions('replayDeadLetters options', options, optionNames<ReplayOptions>()(['source', 'limit', 'dryRun', 'signal']));
  const started = Date.now();
  const counts = { examined: 0, replayed: 0, wouldReplay: 0, skipped: 0, failed: 0 };
  let interrupted = false;
  let fatal: unknown;
  let available = 0;
  try {
    ({ available } = await backend.open(options.source));
    const planned = Math.min(available, options.limit ?? Number.POSITIVE_INFINITY);
    onEvent({ type: 'start', source: options.source, available, planned, dryRun: options.dryRun });
    while (counts.examined < planned) {
      if (options.signal?.aborted) {
        interrupted = true;
        break;
      }
      const item = await backend.next();
      if (!item) break;
      const index = ++counts.examined;
      if (options.dryRun) {
        await backend.release(item);
        const outcome: ReplayOutcome = item.destination ? 'would_replay' : 'skipped';
        if (item.destination) counts.wouldReplay++;
        else counts.skipped++;
        onEvent({ type: 'message', index, planned, outcome, item, destination: item.destination, error: item.destination ? undefined : 'no original route recorded' });
        continue;
      }
      let destination: ReplayDestination;
      try {
        destination = await backend.republish(item);
      } catch (error) {
        await backend.release(item).catch(() => undefined);
        const message = error instanceof Error ? error.message : String(error);
        if (error instanceof ReplayItemError) {
          counts.skipped++;
          onEvent({ type: 'message', index, planned, outcome: 'skipped', item, error: message });
          continue;
        }
        counts.failed++;
        onEvent({ type: 'message', index, planned, outcome: 'failed', item, error: message });
        fatal = error;
        interrupted = true;
        break;
      }
      await backend.remove(item);
      counts.replayed++;
      onEvent({ type: 'message', index, planned, outcome: 'replayed', item, destination });
    }
  } catch (error) {
    fatal ??= error;
    interrupted = true;
  } finally {
    await backend.close().catch(() => undefined);
  }
  const summary: ReplaySummary = { source: options.source, dryRun: options.dryRun, available, ...counts, interrupted, durationMs: Date.now() - started };
  onEvent({ type: 'done', summary });
  if (fatal !== undefined) throw fatal;
  return summary;
}
