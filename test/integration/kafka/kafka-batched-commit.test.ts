/**
 * Batched commits on the real broker with the Redis claimer (`batchCommits: true`): the acked
 * records of one claimed chunk commit in ONE commitMany call, sent as ONE Redis script call, and
 * no Kafka offset is committed past a record before that record's claim commit was confirmed.
 */
import type { CommitManyEntry, CommitRequest } from '../../../src';
import { clients, describeEachClient } from './support/clients';
import { gate, waitFor } from '../../support/wait';
import { applying, EffectLog, fastSource, keyedProducer, kafkaSuite, messages, recordEvents, TestConsumer, unique } from './support/kafka-helpers';

describeEachClient(['kafka', 'redis'], 'Kafka adapter: batched claim commits with the Redis claimer', clients, (row) => {
  const { kafka, topics, redis, consumers } = kafkaSuite('twophase-batched-commit-suite');
  const client = row.make(`twophase-batched-commit-suite-${row.name}`);

  beforeAll(async () => {
    await topics.connect();
  });

  test('a chunk of acked records commits in one commitMany script call; offsets move only past confirmed commits', async () => {
    const count = 40;
    const topic = await topics.create('batched', 1);
    const groupId = unique('batched-group');
    const { producer, close } = await keyedProducer(kafka);
    await producer.send(topic, messages('b', count));
    await close();

    const claimer = await redis.claimer('batched');
    // Count each commitMany call: its keys, and the Redis script calls it sent (the claimer sends
    // them synchronously inside commitMany). Its answer is held while `held` is closed.
    const calls: Array<{ keys: string[]; scriptCalls: number }> = [];
    const confirmed = new Set<string>();
    const held = gate();
    const commitMany = claimer.commitMany.bind(claimer);
    claimer.commitMany = (requests: readonly CommitRequest[]): Promise<CommitManyEntry[]> => {
      const before = claimer.stats.scriptCalls;
      const answer = commitMany(requests);
      const keys = requests.map((r) => r.receipt.key);
      calls.push({ keys, scriptCalls: claimer.stats.scriptCalls - before });
      return answer.then(async (entries) => {
        await held.promise;
        entries.forEach((entry, i) => {
          if (entry.ok) confirmed.add(keys[i]!);
        });
        return entries;
      });
    };

    const log = new EffectLog();
    const source = fastSource(client, { topics: [topic], groupId });
    const events = recordEvents(source);
    // Each offset commit, with the claim commits confirmed when it was made.
    const offsetCommits: Array<{ offset: number; confirmed: Set<string> }> = [];
    source.on((event) => {
      if (event.type === 'committed') for (const o of event.offsets) if (o.topic === topic) offsetCommits.push({ offset: Number(o.offset), confirmed: new Set(confirmed) });
    });
    const consumer = new TestConsumer({ name: groupId, claimer, source, batchCommits: true }, applying(log));
    consumers.push(consumer);
    await consumer.start();

    // Every handler ran and every commit was sent, but no commit is confirmed yet: no offset moves.
    await waitFor(() => log.applied.size === count && calls.reduce((n, c) => n + c.keys.length, 0) === count, { what: 'every record handled and its commit sent', timeoutMs: 30_000 });
    await new Promise((resolve) => setTimeout(resolve, 800)); // four commitIntervalMs
    expect(offsetCommits.filter((c) => c.offset > 0)).toEqual([]);
    expect(await topics.committed(groupId, topic)).not.toEqual({ 0: String(count) });

    held.open();
    await waitFor(() => topics.fullyCommitted(groupId, topic), { what: 'the offsets committed once the claim commits were confirmed', timeoutMs: 30_000 });

    // Batching: fewer calls than records, some carrying many keys, each in exactly one script call.
    expect(calls.length).toBeLessThan(count);
    expect(Math.max(...calls.map((c) => c.keys.length))).toBeGreaterThanOrEqual(4);
    expect(calls.map((c) => c.scriptCalls)).toEqual(calls.map(() => 1));
    // Every offset commit covered only records whose claim commit was confirmed before it.
    const keyAt = new Map(log.order.map((e) => [Number(e.offset), e.key]));
    for (const commit of offsetCommits) {
      for (let offset = 0; offset < commit.offset; offset++) expect(commit.confirmed.has(keyAt.get(offset)!)).toBe(true);
    }
    expect(offsetCommits.some((c) => c.offset === count)).toBe(true);
    expect(log.duplicated()).toEqual([]);
    expect(events.filter((e) => e.type === 'committed').length).toBeGreaterThan(0);
  });
});
