#!/usr/bin/env node
/**
 * Entry point of the `twophase` command (package.json `bin`). SIGINT and SIGTERM stop a replay
 * after the message in progress; messages not yet replayed stay in the dead-letter queue.
 */
import { runCli } from './program';

const controller = new AbortController();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    process.stderr.write(`${signal}: stopping after the messages in progress (republishes already sent wait for their confirms)\n`);
    controller.abort();
  });
}

runCli(process.argv.slice(2), { signal: controller.signal }).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
