/**
 * The replay loop's pipelining rules, with a scripted in-memory backend whose confirms arrive
 * when the test says: at most `window` republishes unconfirmed at once, a message's dead-letter
 * copy is removed only after its own republish was confirmed (never another's), a refusal that
 * stops the run lets the republishes already sent finish, and progress events come.
 */
import { replayDeadLetters, ReplayItemError, type ReplayBackend, type ReplayEvent, type ReplayItem } from '../../adapters/cli';

interface Item extends ReplayItem {
  readonly n: number;
}

class ScriptedBackend implements ReplayBackend<Item> {
  readonly name = 'scripted';
  readonly log: string[] = [];
  readonly pending = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  maxUnconfirmed = 0;
  private next_ = 0;
  constructor(private readonly count: number) {}
  async open(): Promise<{ available: number }> {
    return { available: this.count };
  }
  async next(): Promise<Item | undefined> {
    if (this.next_ >= this.count) return undefined;
    const n = this.next_++;
    return { n, messageId: `m${n}`, destination: { description: 'q' } };
  }
  republish(item: Item): Promise<{ description: string }> {
    this.log.push(`publish ${item.n}`);
    return new Promise((resolve, reject) => {
      this.pending.set(item.n, { resolve: () => resolve({ description: 'q' }), reject });
      this.maxUnconfirmed = Math.max(this.maxUnconfirmed, this.pending.size);
    });
  }
  confirm(n: number, error?: Error): void {
    const p = this.pending.get(n)!;
    this.pending.delete(n);
    this.log.push(`${error ? 'nack' : 'confirm'} ${n}`);
    if (error) p.reject(error);
    else p.resolve();
  }
  async remove(item: Item): Promise<void> {
    this.log.push(`remove ${item.n}`);
  }
  async release(item: Item): Promise<void> {
    this.log.push(`release ${item.n}`);
  }
  async close(): Promise<void> {
    this.log.push('close');
  }
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

test('at most `window` republishes await their confirms; each copy is removed only after its own confirm, in any confirm order', async () => {
  const backend = new ScriptedBackend(10);
  const events: ReplayEvent[] = [];
  const run = replayDeadLetters(backend, { source: 'dlq', dryRun: false, window: 3, progressEveryMs: 0 }, (e) => events.push(e));
  for (let round = 0; round < 20 && (backend.pending.size > 0 || round === 0); round++) {
    await tick();
    // Confirm the newest first: out of publish order.
    const newest = Math.max(...backend.pending.keys());
    if (Number.isFinite(newest)) backend.confirm(newest);
  }
  while (backend.pending.size > 0) {
    backend.confirm([...backend.pending.keys()][0]!);
    await tick();
  }
  const summary = await run;
  expect(summary).toMatchObject({ replayed: 10, failed: 0, interrupted: false });
  expect(backend.maxUnconfirmed).toBe(3);
  for (let n = 0; n < 10; n++) {
    expect(backend.log.indexOf(`remove ${n}`)).toBeGreaterThan(backend.log.indexOf(`confirm ${n}`));
  }
  expect(events.some((e) => e.type === 'progress')).toBe(true);
  expect(backend.log.at(-1)).toBe('close');
});

test('a refusal that stops the run: no new publish, the ones in flight finish (removed after their confirms), the refused one is released', async () => {
  const backend = new ScriptedBackend(10);
  const run = replayDeadLetters(backend, { source: 'dlq', dryRun: false, window: 3 }, () => undefined);
  await tick();
  expect([...backend.pending.keys()]).toEqual([0, 1, 2]);
  backend.confirm(1, new ReplayItemError('nacked by the broker: queue full', { stopsRun: true }));
  await tick();
  backend.confirm(0);
  backend.confirm(2);
  await expect(run).rejects.toThrow(/queue full/);
  expect(backend.log.filter((l) => l.startsWith('publish'))).toEqual(['publish 0', 'publish 1', 'publish 2']);
  expect(backend.log).toEqual(expect.arrayContaining(['release 1', 'remove 0', 'remove 2']));
  expect(backend.log).not.toContain('remove 1');
});

test('window outside 1 … 1000 is refused before anything is opened', async () => {
  await expect(replayDeadLetters(new ScriptedBackend(1), { source: 'dlq', dryRun: false, window: 0 }, () => undefined)).rejects.toThrow(RangeError);
});
