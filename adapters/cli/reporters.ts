/**
 * Output of `twophase dlq replay`: human progress on stderr and a summary on stdout, or one JSON
 * object per line on stdout with `--json`.
 */
import type { ReplayEvent } from './replay';

/** Where the CLI writes. */
export interface CliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
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
          destination: destination?.description,
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

function shorten(label: string): string {
  return label.length <= MAX_LABEL_CHARS ? label : `${label.slice(0, MAX_LABEL_CHARS)}… (${label.length} characters)`;
}

/** Progress lines on stderr (keys over 80 characters shortened), a summary line on stdout. */
export function humanReporter(io: CliIo): (event: ReplayEvent) => void {
  return (event) => {
    switch (event.type) {
      case 'start':
        io.stderr(`${event.dryRun ? 'dry run: ' : ''}${event.available} message(s) in "${event.source}", examining ${event.planned}\n`);
        return;
      case 'message': {
        const who = shorten(event.item.key ?? event.item.messageId ?? '(no id)') + (event.item.keyError ? ` [${shorten(event.item.keyError)}]` : '');
        const why = event.item.reason ? ` (${event.item.reason}${event.item.attempts !== undefined ? `, ${event.item.attempts} attempt(s)` : ''})` : '';
        const verb = { replayed: 'replayed', would_replay: 'would replay', skipped: 'skipped', failed: 'FAILED' }[event.outcome];
        const where = event.destination ? ` → ${event.destination.description}` : '';
        const error = event.error ? `: ${event.error}` : '';
        io.stderr(`[${event.index}/${event.planned}] ${verb} ${who}${why}${where}${error}\n`);
        return;
      }
      case 'done': {
        const s = event.summary;
        const main = s.dryRun ? `${s.wouldReplay} would be replayed` : `${s.replayed} replayed`;
        io.stdout(
          `${main}, ${s.skipped} skipped, ${s.failed} failed, of ${s.examined} examined (${s.available} were in "${s.source}")${s.interrupted ? ', interrupted' : ''} in ${s.durationMs} ms\n`,
        );
      }
    }
  };
}
