/**
 * The broker-independent replay loop of `twophase dlq replay`.
 */
import { checkKnownOptions, optionNames } from '../../src/adapter-kit';
import { type ReplayBackend, type ReplayDestination, type ReplayItem, ReplayItemError, type ReplayNotice } from './replay-backend';

/** Default of {@link ReplayOptions.window}. */
export const DEFAULT_REPLAY_WINDOW = 64;
/** Largest {@link ReplayOptions.window}. */
export const MAX_REPLAY_WINDOW = 1000;
/** Default of {@link ReplayOptions.progressEveryMs}. */
export const DEFAULT_PROGRESS_EVERY_MS = 2000;

/** Options of one replay run. */
export interface ReplayOptions {
  /** The dead-letter queue (or topic). */
  readonly source: string;
  /** Most messages to examine; undefined for all that were there at the start. */
  readonly limit?: number;
  /** Show what would be replayed, change nothing. */
  readonly dryRun: boolean;
  /** Stops the loop after the messages in progress (SIGINT, SIGTERM). */
  readonly signal?: AbortSignal;
  /**
   * Most republishes waiting for their broker confirm at once, 1 … 1000. Default 64. Each
   * message's dead-letter copy is still removed only after its own copy was confirmed; a larger
   * window only overlaps the round trips (and holds up to `window` message bodies in memory).
   */
  readonly window?: number;
  /** Interval of `progress` events, ms. Default 2000. */
  readonly progressEveryMs?: number;
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
  | {
      readonly type: 'progress';
      readonly examined: number;
      readonly planned: number;
      readonly replayed: number;
      readonly skipped: number;
      /** Messages replayed per second since the start. */
      readonly ratePerSec: number;
    }
  | { readonly type: 'notice'; readonly notice: ReplayNotice }
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
 * dead-letter copy is removed. Up to `window` republishes wait for their confirms at once
 * (pipelined); the copy of one message is never removed before its own republish was confirmed.
 * Never throws for a per-message problem; an error that is not a {@link ReplayItemError} stops
 * the run (that message stays in the source; republishes already sent finish first) and is
 * rethrown after the `done` event.
 * @throws RangeError for a `window` outside 1 … 1000 (before anything is opened)
 */
export async function replayDeadLetters(backend: ReplayBackend, options: ReplayOptions, onEvent: (event: ReplayEvent) => void): Promise<ReplaySummary> {
  checkKnownOptions('replayDeadLetters options', options, optionNames<ReplayOptions>()(['source', 'limit', 'dryRun', 'signal', 'window', 'progressEveryMs']));
  const window = options.window ?? DEFAULT_REPLAY_WINDOW;
  if (!Number.isInteger(window) || window < 1 || window > MAX_REPLAY_WINDOW) throw new RangeError(`window must be an integer in [1, ${MAX_REPLAY_WINDOW}], got ${String(window)}`);
  const progressEveryMs = options.progressEveryMs ?? DEFAULT_PROGRESS_EVERY_MS;
  const started = Date.now();
  const counts = { examined: 0, replayed: 0, wouldReplay: 0, skipped: 0, failed: 0 };
  let interrupted = false;
  let fatal: unknown;
  let available = 0;
  let planned = 0;
  let lastProgress = started;
  const progress = (): void => {
    const now = Date.now();
    if (now - lastProgress < progressEveryMs) return;
    lastProgress = now;
    const seconds = Math.max(0.001, (now - started) / 1000);
    onEvent({ type: 'progress', examined: counts.examined, planned, replayed: counts.replayed, skipped: counts.skipped, ratePerSec: Math.round(counts.replayed / seconds) });
  };
  const inFlight = new Set<Promise<void>>();
  /** Republish → (confirm) → remove, for one message; records the outcome. */
  const replayOne = async (item: ReplayItem, index: number): Promise<void> => {
    let destination: ReplayDestination;
    try {
      destination = await backend.republish(item);
    } catch (error) {
      await backend.release(item).catch(() => undefined);
      const message = error instanceof Error ? error.message : String(error);
      if (error instanceof ReplayItemError && !error.stopsRun) {
        counts.skipped++;
        onEvent({ type: 'message', index, planned, outcome: 'skipped', item, error: message });
        return;
      }
      counts.failed++;
      onEvent({ type: 'message', index, planned, outcome: 'failed', item, error: message });
      fatal ??= error;
      interrupted = true;
      return;
    }
    await backend.remove(item);
    counts.replayed++;
    onEvent({ type: 'message', index, planned, outcome: 'replayed', item, destination });
  };
  let opened = false;
  try {
    ({ available } = await backend.open(options.source, { notice: (notice) => onEvent({ type: 'notice', notice }), limit: options.limit }));
    opened = true;
    planned = Math.min(available, options.limit ?? Number.POSITIVE_INFINITY);
    onEvent({ type: 'start', source: options.source, available, planned, dryRun: options.dryRun });
    while (counts.examined < planned && fatal === undefined) {
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
        progress();
        continue;
      }
      const task: Promise<void> = replayOne(item, index).then(
        () => {
          inFlight.delete(task);
          progress();
        },
        (error: unknown) => {
          inFlight.delete(task);
          fatal ??= error;
          interrupted = true;
        },
      );
      inFlight.add(task);
      if (inFlight.size >= window) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
  } catch (error) {
    await Promise.all(inFlight);
    fatal ??= error;
    interrupted = true;
  } finally {
    await backend.close().catch(() => undefined);
  }
  // A source that could not be opened (no such queue): the error alone, no summary of a run that never began.
  if (!opened) throw fatal;
  const summary: ReplaySummary = { source: options.source, dryRun: options.dryRun, available, ...counts, interrupted, durationMs: Date.now() - started };
  onEvent({ type: 'done', summary });
  if (fatal !== undefined) throw fatal;
  return summary;
}
