/**
 * The line `twophase` writes to stderr when SIGINT or SIGTERM asks it to stop: what the running
 * command does then. Read from the command words (the CLI has no option before them).
 */

/** The stop line for `signal` while `twophase <args>` runs, ending in a newline. */
export function stopNotice(args: readonly string[], signal: NodeJS.Signals): string {
  const [group, command] = args;
  if (group === 'outbox' && command === 'relay') {
    return `${signal}: stopping the relay: no new claims; publishes in flight finish (up to --shutdown-timeout), then the leases of messages not published are given back for the next relay; a second signal exits at once\n`;
  }
  if (group === 'dlq' && command === 'replay') {
    return `${signal}: stopping the replay after the messages in progress (republishes already sent wait for their confirms); a second signal exits at once\n`;
  }
  return `${signal}: stopping when the command ends; a second signal exits at once\n`;
}

/**
 * The line written to the stream still open when `stream` closed (EPIPE: `twophase … | head -1`)
 * while `twophase <args>` runs, ending in a newline. A replay and a relay stop as on a signal; the
 * other commands run to their end, their later output dropped.
 */
export function closedNotice(args: readonly string[], stream: 'stdout' | 'stderr', code: string): string {
  const [group, command] = args;
  if (group === 'dlq' && command === 'replay') return `${stream} closed (${code}): stopping after the messages in progress; output dropped\n`;
  if (group === 'outbox' && command === 'relay') return `${stream} closed (${code}): stopping the relay as on SIGTERM; output dropped\n`;
  return `${stream} closed (${code}): the command runs to its end; its output is dropped\n`;
}
