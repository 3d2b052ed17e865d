#!/usr/bin/env node
/**
 * Entry point of the `twophase` command (package.json `bin`). SIGINT and SIGTERM stop a replay
 * after the messages in progress (messages not yet replayed stay in the dead-letter queue) and a
 * relay after its publishes in flight; the line written says which (stop-notice.ts).
 *
 * A closed stdout or stderr (EPIPE: `twophase dlq replay --json | head -2`) is a stop request
 * too for a replay and a relay: the messages in progress finish (republish confirmed, then
 * removed from the DLQ), no new ones are taken. Any other command runs to its end. Either way
 * later output is dropped, and the command exits with code 1 without a stack trace; the line on
 * stderr says which (stop-notice.ts).
 */
import { EXIT, runCli } from './program';
import { processOutput } from './process-output';
import { closedNotice, stopNotice } from './stop-notice';

const args = process.argv.slice(2);

const controller = new AbortController();
const output = processOutput(process, ({ stream, error }) => {
  const code = (error as NodeJS.ErrnoException).code ?? error.message;
  if (!controller.signal.aborted) {
    controller.abort();
    if (output.isOpen('stderr')) output.io.stderr(closedNotice(args, stream, String(code)));
  }
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    output.io.stderr(stopNotice(args, signal));
    controller.abort();
  });
}

runCli(args, { io: output.io, signal: controller.signal }).then(
  (code) => {
    process.exitCode = output.closed && code === EXIT.ok ? EXIT.failed : code;
  },
  (error: unknown) => {
    output.io.stderr(`error: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = EXIT.failed;
  },
);
