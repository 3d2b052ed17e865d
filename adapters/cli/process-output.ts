/**
 * The CLI's stdout and stderr when the reader may go away: `twophase dlq replay --json | head -2`
 * closes the pipe after two lines, and the next write fails with EPIPE (Node ignores SIGPIPE and
 * emits an `error` event on the stream instead; unhandled, it ends the process at once, in the
 * middle of a replay).
 *
 * Here a failed write marks its stream closed: later output to it is dropped, and `onClosed` is
 * called once per stream so the caller can stop as after SIGINT (finish the messages in
 * progress, take no new ones) and exit with a non-zero code.
 */
import type { CliIo } from './reporters';

/** A stream the CLI writes to (process.stdout, process.stderr). */
export interface OutputStream {
  write(text: string): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

/** Which stream closed, and the error that showed it (usually `code` EPIPE). */
export interface OutputClosed {
  readonly stream: 'stdout' | 'stderr';
  readonly error: Error;
}

/** A {@link CliIo} over two streams that never throws and never emits an unhandled error. */
export interface ProcessOutput {
  readonly io: CliIo;
  /** The first stream that closed, once one did. */
  readonly closed: OutputClosed | undefined;
  /** True while `stream` accepts writes. */
  isOpen(stream: 'stdout' | 'stderr'): boolean;
}

/**
 * Wraps `streams` (listening for their `error` events from now on).
 * @param onClosed called once per stream, on its first failed write (synchronous throw or `error` event)
 */
export function processOutput(streams: { readonly stdout: OutputStream; readonly stderr: OutputStream }, onClosed: (closed: OutputClosed) => void): ProcessOutput {
  const open = { stdout: true, stderr: true };
  let first: OutputClosed | undefined;
  const close = (stream: 'stdout' | 'stderr', error: Error): void => {
    if (!open[stream]) return;
    open[stream] = false;
    const closed = { stream, error };
    first ??= closed;
    onClosed(closed);
  };
  const writer = (stream: 'stdout' | 'stderr') => {
    streams[stream].on('error', (error) => close(stream, error));
    return (text: string): void => {
      if (!open[stream]) return;
      try {
        streams[stream].write(text);
      } catch (error) {
        close(stream, error instanceof Error ? error : new Error(String(error)));
      }
    };
  };
  const io: CliIo = { stdout: writer('stdout'), stderr: writer('stderr') };
  return {
    io,
    get closed() {
      return first;
    },
    isOpen: (stream) => open[stream],
  };
}
