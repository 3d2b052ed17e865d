/**
 * Output of `twophase dlq replay`: human progress on stderr and a summary on stdout, or one JSON
 * object per line on stdout with `--json`.
 */
import { printable } from './printable';
import type { ReplayEvent } from './replay';

/** Where the CLI writes. */
export interface CliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

/**
 * Prints a command's failure: `{ type: 'error', error }` on stdout with `--json`, else `error: …`
 * on stderr (control and bidi characters escaped).
 */
export function printCommandError(io: CliIo, json: boolean, error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  if (json) io.stdout(`${JSON.stringify({ type: 'error', error: message })}\n`);
  else io.stderr(`error: ${printable(message)}\n`);
}

/** Newline-delimited JSON: `{"type":"start",…}`, `{"type":"message",…}` per message, `{"type":"done","summary":…}`. */
export function jsonReporter(io: CliIo): (event: ReplayEvent) => void {
  return (event) => {
    if (event.type === 'message') {
      const { item, destination } = event;
      io.stdout(
        `${JSON.stringify({
          type: 'message',
          index: event.index,
          planned: event.planned,
          outcome: event.outcome,
          messageId: item.messageId,
          key: item.key,
          keyError: item.keyError,
          reason: item.reason,
          attempts: item.attempts,
          errorMessage: item.errorMessage,
          destination: destination?.description,
          refusedRoute: item.refusedRoute,
          error: event.error,
        })}\n`,
      );
      return;
    }
    io.stdout(`${JSON.stringify(event)}\n`);
  };
}

/** Longest key or message id shown whole on a progress line (the JSON output keeps them whole). */
const MAX_LABEL_CHARS = 80;

/** A key or message id, shortened, control and bidi characters escaped. */
function shorten(label: string): string {
  return printable(label.length <= MAX_LABEL_CHARS ? label : `${label.slice(0, MAX_LABEL_CHARS)}… (${label.length} characters)`);
}

/** The dead-letter error text of a message, on one line (newlines folded, the rest escaped), or a note that there is none. */
function errorText(text: string | undefined): string {
  if (text === undefined) return ' — no error text recorded';
  return ` — error: ${printable(text.replace(/\s*\n\s*/g, ' ⏎ '))}`;
}

/** Above this many planned messages, replayed ones get no line of their own (progress lines instead). */
export const MAX_MESSAGE_LINES = 1000;

/**
 * Progress on stderr, a summary line on stdout. One line per message (keys over 80 characters
 * shortened; a dry run adds the recorded error text), except that in a run of more than 1000
 * messages replayed ones are counted in a progress line every 2 s instead (skipped and failed
 * ones keep their lines). Notices (warnings) as `warning: …`. Every text that came from a
 * message or a broker has its control and bidi characters escaped: one message, one line.
 */
export function humanReporter(io: CliIo): (event: ReplayEvent) => void {
  let quiet = false;
  return (event) => {
    switch (event.type) {
      case 'start':
        quiet = !event.dryRun && event.planned > MAX_MESSAGE_LINES;
        io.stderr(
          `${event.dryRun ? 'dry run: ' : ''}${event.available} message(s) in "${printable(event.source)}", examining ${event.planned}${quiet ? ' (progress every 2 s; skipped and failed messages listed)' : ''}\n`,
        );
        return;
      case 'notice':
        io.stderr(`${event.notice.level === 'warn' ? 'warning' : 'note'}: ${printable(event.notice.text)}\n`);
        return;
      case 'progress': {
        const percent = event.planned > 0 ? Math.floor((event.examined / event.planned) * 100) : 100;
        io.stderr(`progress: ${event.examined}/${event.planned} examined (${percent}%), ${event.replayed} replayed, ${event.skipped} skipped, ${event.ratePerSec} msg/s\n`);
        return;
      }
      case 'message': {
        if (quiet && event.outcome === 'replayed') return;
        const who = shorten(event.item.key ?? event.item.messageId ?? '(no id)') + (event.item.keyError ? ` [${shorten(event.item.keyError)}]` : '');
        const why = event.item.reason ? ` (${printable(event.item.reason)}${event.item.attempts !== undefined ? `, ${event.item.attempts} attempt(s)` : ''})` : '';
        const verb = { replayed: 'replayed', would_replay: 'would replay', skipped: 'skipped', failed: 'FAILED' }[event.outcome];
        const where = event.destination ? ` → ${printable(event.destination.description)}` : '';
        const error = event.error ? `: ${printable(event.error)}` : '';
        const recorded = event.outcome === 'would_replay' || (event.outcome === 'skipped' && event.item.errorMessage !== undefined) ? errorText(event.item.errorMessage) : '';
        const refused = event.item.refusedRoute !== undefined ? ` — recorded route refused: ${printable(event.item.refusedRoute)}` : '';
        io.stderr(`[${event.index}/${event.planned}] ${verb} ${who}${why}${where}${refused}${error}${recorded}\n`);
        return;
      }
      case 'done': {
        const s = event.summary;
        const main = s.dryRun ? `${s.wouldReplay} would be replayed` : `${s.replayed} replayed`;
        io.stdout(
          `${main}, ${s.skipped} skipped, ${s.failed} failed, of ${s.examined} examined (${s.available} were in "${printable(s.source)}")${s.interrupted ? ', interrupted' : ''} in ${s.durationMs} ms\n`,
        );
      }
    }
  };
}
