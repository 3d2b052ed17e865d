/**
 * The Kafka offset committer alone (no broker): it commits only the workers of the current
 * generation for partitions in the current assignment (kafkajs issue #1046: the coordinator does
 * not check partition ownership), only offsets that moved, one commit at a time, and reports a
 * failed commit without throwing.
 */
import type { FetchedBatch, TopicPartitionOffset } from '../../adapters/kafka';
import { type CommitGeneration, OffsetCommitter } from '../../adapters/kafka/offset-committer';
import type { PartitionWorker } from '../../adapters/kafka/partition-worker';
import { silentLogger } from '../../src';

/** The parts of a worker the committer reads and writes. */
function worker(topic: string, partition: number, epoch: number, committable: string | undefined): PartitionWorker {
  return { topic, partition, epoch, committable, committed: undefined } as unknown as PartitionWorker;
}

function setup(options: { fail?: Error; gate?: Promise<void>; recommitAfterMs?: number; now?: () => number } = {}) {
  const sent: TopicPartitionOffset[][] = [];
  const reported: { committed: TopicPartitionOffset[][]; failed: unknown[] } = { committed: [], failed: [] };
  const controls = {
    commit: async (offsets: readonly TopicPartitionOffset[]) => {
      sent.push([...offsets]);
      await options.gate;
      if (options.fail) throw options.fail;
    },
  } as unknown as FetchedBatch;
  let generation: CommitGeneration | undefined = { epoch: 2, owned: new Set(['t\u00000', 't\u00001']), controls };
  const workers = new Map<string, PartitionWorker>();
  const committer = new OffsetCommitter({
    logger: silentLogger,
    groupId: 'g',
    mayCommit: () => true,
    generation: () => generation,
    workers: () => workers,
    committed: (offsets) => void reported.committed.push([...offsets]),
    commitFailed: (_offsets, error) => void reported.failed.push(error),
    ...(options.now ? { now: options.now } : {}),
  }, options.recommitAfterMs);
  return { committer, workers, sent, reported, setGeneration: (g: CommitGeneration | undefined) => (generation = g) };
}

test('commits the settled prefix of owned partitions of the current generation only, and only once it moved', async () => {
  const s = setup();
  s.workers.set('t\u00000', worker('t', 0, 2, '5'));
  s.workers.set('t\u00001', worker('t', 1, 1, '9')); // an older generation's worker
  s.workers.set('t\u00002', worker('t', 2, 2, '3')); // not in the assignment
  s.workers.set('t\u00003', worker('t', 3, 2, undefined)); // nothing settled yet
  await expect(s.committer.flush()).resolves.toBe(true);
  expect(s.sent).toEqual([[{ topic: 't', partition: 0, offset: '5' }]]);
  expect(s.workers.get('t\u00000')!.committed).toBe('5');
  await s.committer.flush();
  expect(s.sent).toHaveLength(1); // nothing moved
  expect(s.reported.committed).toEqual(s.sent);
});

test('a failed commit resolves false and is reported; the offset stays uncommitted for the next flush', async () => {
  const error = new Error('REBALANCE_IN_PROGRESS');
  const s = setup({ fail: error });
  s.workers.set('t\u00000', worker('t', 0, 2, '5'));
  await expect(s.committer.flush()).resolves.toBe(false);
  expect(s.reported.failed).toEqual([error]);
  expect(s.workers.get('t\u00000')!.committed).toBeUndefined();
});

test('between generations (none current) nothing is committed', async () => {
  const s = setup();
  s.workers.set('t\u00000', worker('t', 0, 2, '5'));
  s.setGeneration(undefined);
  await expect(s.committer.flush()).resolves.toBe(true);
  expect(s.sent).toEqual([]);
});

test('one commit in flight at a time: flushes asked for during one run once more after it', async () => {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const s = setup({ gate });
  const w = worker('t', 0, 2, '5');
  s.workers.set('t\u00000', w);
  const first = s.committer.flush();
  (w as unknown as { committable: string }).committable = '8';
  const second = s.committer.flush();
  const third = s.committer.flush();
  expect(s.sent).toHaveLength(1);
  open();
  await Promise.all([first, second, third]);
  expect(s.sent).toEqual([[{ topic: 't', partition: 0, offset: '5' }], [{ topic: 't', partition: 0, offset: '8' }]]);
});

test('an offset that did not move is committed again once recommitAfterMs passed since its last commit, so a late commit by a former owner cannot hold the group behind', async () => {
  // A former owner's commit can land after the new owner's (@platformatic/kafka sends a commit
  // that met a rejoin error again under the newer generation): the broker's offset moves back,
  // and an owner that commits only offsets that moved would never put it right.
  let now = 1_000;
  const s = setup({ recommitAfterMs: 5_000, now: () => now });
  s.workers.set('t\u00000', worker('t', 0, 2, '5'));
  await s.committer.flush();
  now += 4_999;
  await s.committer.flush();
  expect(s.sent).toHaveLength(1); // not moved, not due yet
  now += 1;
  await s.committer.flush();
  expect(s.sent).toEqual([[{ topic: 't', partition: 0, offset: '5' }], [{ topic: 't', partition: 0, offset: '5' }]]);
  await s.committer.flush();
  expect(s.sent).toHaveLength(2); // the clock starts again at each commit
});
