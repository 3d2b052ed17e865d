/**
 * `twophase dlq replay` of a dead-letter queue that does not exist prints the error alone: no
 * "0 replayed … of 0 examined" summary first, as if a run had happened.
 */
import { replayDeadLetters, type ReplayEvent } from '../../adapters/cli/replay';
import type { ReplayBackend } from '../../adapters/cli/replay-backend';

test('a source that cannot be opened: the error is thrown, and no start or done event is reported', async () => {
  const events: ReplayEvent[] = [];
  const missing = new Error('queue "nosuch.dlq" does not exist');
  const backend = {
    open: async () => {
      throw missing;
    },
    next: async () => undefined,
    release: async () => undefined,
    remove: async () => undefined,
    close: async () => undefined,
  } as unknown as ReplayBackend;
  await expect(replayDeadLetters(backend, { source: 'nosuch.dlq', dryRun: false }, (e) => void events.push(e))).rejects.toBe(missing);
  expect(events.map((e) => e.type)).toEqual([]);
});
