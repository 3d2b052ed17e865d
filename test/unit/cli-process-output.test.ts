/**
 * processOutput (adapters/cli/process-output.ts): a stream whose write fails, by an `error`
 * event (EPIPE from a closed pipe) or by a synchronous throw, is closed once: `onClosed` is
 * called once for it, later output to it is dropped, and the other stream keeps working.
 */
import { EventEmitter } from 'node:events';
import { type OutputClosed, processOutput } from '../../adapters/cli/process-output';

class FakeStream extends EventEmitter {
  readonly written: string[] = [];
  throwOnWrite: Error | undefined;
  write(text: string): boolean {
    if (this.throwOnWrite) throw this.throwOnWrite;
    this.written.push(text);
    return true;
  }
}

function epipe(): Error {
  return Object.assign(new Error('write EPIPE'), { code: 'EPIPE', errno: -32, syscall: 'write' });
}

test('an EPIPE error event closes stdout once; stderr keeps working', () => {
  const stdout = new FakeStream();
  const stderr = new FakeStream();
  const closed: OutputClosed[] = [];
  const output = processOutput({ stdout, stderr }, (c) => closed.push(c));
  output.io.stdout('one\n');
  expect(output.closed).toBeUndefined();
  // Without a listener this emit would throw (an unhandled 'error' event ends the process).
  expect(() => stdout.emit('error', epipe())).not.toThrow();
  expect(() => stdout.emit('error', epipe())).not.toThrow();
  output.io.stdout('two\n');
  output.io.stderr('note\n');
  expect(stdout.written).toEqual(['one\n']);
  expect(stderr.written).toEqual(['note\n']);
  expect(closed.map((c) => [c.stream, (c.error as NodeJS.ErrnoException).code])).toEqual([['stdout', 'EPIPE']]);
  expect(output.closed?.stream).toBe('stdout');
  expect(output.isOpen('stdout')).toBe(false);
  expect(output.isOpen('stderr')).toBe(true);
});

test('a write that throws closes its stream without throwing; the first stream closed stays reported', () => {
  const stdout = new FakeStream();
  const stderr = new FakeStream();
  const closed: string[] = [];
  const output = processOutput({ stdout, stderr }, (c) => closed.push(c.stream));
  stderr.throwOnWrite = epipe();
  expect(() => output.io.stderr('progress\n')).not.toThrow();
  output.io.stderr('more\n');
  stdout.emit('error', epipe());
  expect(closed).toEqual(['stderr', 'stdout']);
  expect(output.closed?.stream).toBe('stderr');
  expect(stderr.written).toEqual([]);
});
