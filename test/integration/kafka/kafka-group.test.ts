/**
 * Group membership changes on the real broker with the Redis claimer: members joining and
 * leaving while records are produced (2 → 3 → 1), and a rebalance in the middle of a long
 * handler (S08). Nothing is lost, each key's effect happens once, and no member commits a
 * partition it does not own.
 */
import { ack } from '../../../src';
import type { KafkaSource } from '../../../adapters/kafka';
import { clients, describeEachClient } from './support/clients';
import { EffectLog, fastSource, keyedProducer, kafkaSuite, messages, ownershipGuard, recordEvents, TestConsumer, unique } from './support/kafka-helpers';
import { waitFor } from '../../support/wait';
import { uniquePrefix } from '../redis/support/redis-helpers';

describeEachClient(['kafka', 'redis'], 'Kafka adapter: group membership changes', clients, (row) => {
  const { kafka, topics, redis, consumers } = kafkaSuite('twophase-group-suite');
  const client = row.make(`twophase-group-suite-${row.name}`);

  test('members 2 → 3 → 1 while producing: nothing lost, exactly one effect per key, no commit of a partition not owned', async () => {
    const topic = await topics.create('group', 6);
    const groupId = unique('group');
    const log = new EffectLog();
    const prefix = uniquePrefix('kafka-group');
    const member = async (label: string): Promise<{ consumer: TestConsumer; source: KafkaSource }> => {
      const source = fastSource(client, { topics: [topic], groupId });
      const guard = ownershipGuard(source);
      const consumer = new TestConsumer({ name: groupId, claimer: await redis.claimer(`group-${label}`, { prefix }), source, busyRequeueDelayMs: 100, leaseTtlMs: 3000 }, async (message, context) => {
        await new Promise((resolve) => setTimeout(resolve, message.body.seq % 4));
        log.apply(message.key, Number(context.metadata.attributes?.partition), String(context.metadata.attributes?.offset), message.body.seq);
        return ack();
      });
      consumers.push(consumer);
      guards.push(guard);
      await consumer.start();
      return { consumer, source };
    };
    const guards: string[][] = [];

    // Produce 25 records every 50 ms; every fourth round also re-sends the previous round.
    const { producer, close } = await keyedProducer(kafka);
    const produced = new Set<string>();
    let round = 0;
    let producing = true;
    const production = (async () => {
      let previous: ReturnType<typeof messages> = [];
      while (producing) {
        const batch = messages(`r${round}`, 25).map((m, i) => ({ ...m, value: JSON.stringify({ id: m.idempotencyKey, seq: round * 25 + i }) }));
        await producer.send(topic, round % 4 === 3 ? [...batch, ...previous] : batch);
        for (const m of batch) produced.add(`${groupId}:${m.idempotencyKey}`);
        previous = batch;
        round++;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();

    const a = await member('a');
    const b = await member('b');
    await waitFor(() => log.applied.size >= 200, { what: 'two members consuming' });
    const c = await member('c');
    await waitFor(() => c.source.assignment.length > 0 && log.applied.size >= 600, { what: 'three members consuming' });
    // A leaves gracefully; B crashes: its claims (in flight and made ahead of dispatch) stay
    // until their 3 s lease ends, and C waits on them (busy) before it takes them over.
    await Promise.all([a.consumer.stop(), b.source.crash()]);
    await waitFor(() => c.source.assignment.length === 6 && log.applied.size >= 1000, { what: 'one member consuming everything' });
    producing = false;
    await production;
    await close();

    await waitFor(async () => [...produced].every((k) => log.applied.has(k)) && (await topics.fullyCommitted(groupId, topic)), { what: 'every produced key applied and committed', timeoutMs: 45_000, intervalMs: 100 });
    expect(log.duplicated()).toEqual([]);
    expect(log.applied.size).toBe(produced.size);
    expect(guards.flat()).toEqual([]);
    expect(c.source.stats.groupJoins).toBeGreaterThanOrEqual(2);
    expect(b.consumer.health().state).not.toBe('failed');
  });

  test('S08: a rebalance in the middle of a 3 s handler; the new owner waits on the claim, skips what A committed, and A never commits a partition it lost', async () => {
    const topic = await topics.create('s08', 2);
    const groupId = unique('s08-group');
    const { producer, close } = await keyedProducer(kafka);
    for (const partition of [0, 1]) await producer.send(topic, messages(`p${partition}`, 5).map((m) => ({ ...m, partition })));
    await close();

    const runs = new Map<string, number>();
    const active = new Set<string>();
    const overlaps: string[] = [];
    const handler = (member: string) => async (message: { key: string }) => {
      if (active.has(message.key)) overlaps.push(message.key);
      active.add(message.key);
      runs.set(message.key, (runs.get(message.key) ?? 0) + 1);
      handlerStarted.push(member);
      await new Promise((resolve) => setTimeout(resolve, 3000));
      active.delete(message.key);
      return ack();
    };
    const handlerStarted: string[] = [];
    const sourceA = fastSource(client, { topics: [topic], groupId });
    const sourceB = fastSource(client, { topics: [topic], groupId });
    const guardA = ownershipGuard(sourceA);
    const guardB = ownershipGuard(sourceB);
    // Two claimers (two Redis clients), one namespace: what two processes of one group share.
    const prefix = uniquePrefix('kafka-s08');
    const a = new TestConsumer({ name: groupId, claimer: await redis.claimer('s08-a', { prefix }), source: sourceA, busyRequeueDelayMs: 300 }, handler('a'));
    const b = new TestConsumer({ name: groupId, claimer: await redis.claimer('s08-b', { prefix }), source: sourceB, busyRequeueDelayMs: 300 }, handler('b'));
    consumers.push(a, b);
    await a.start();
    await waitFor(() => handlerStarted.length >= 2, { what: 'A mid-handler on both partitions' });
    await b.start();

    await waitFor(async () => runs.size === 10 && active.size === 0 && (await topics.fullyCommitted(groupId, topic)), { what: 'all 10 handled and committed', timeoutMs: 45_000, intervalMs: 100 });
    expect([...runs.values()]).toEqual(Array(10).fill(1));
    expect(overlaps).toEqual([]);
    expect(guardA).toEqual([]);
    expect(guardB).toEqual([]);
    // B took a partition over while A still ran its first record: it waited on A's claim
    // (busy), then skipped it as done.
    expect(b.count('busy')).toBeGreaterThanOrEqual(1);
    expect(b.count('done_duplicate')).toBeGreaterThanOrEqual(1);
    expect(sourceA.stats.groupJoins).toBeGreaterThanOrEqual(2);
  });

  test('a partition kept across a rebalance: records its previous worker settled after the last commit are not dispatched again', async () => {
    // A runs the first record of each partition past the rebalance B's arrival starts (A's next
    // group join). Those records settle in A's old generation, after its last commit; the
    // partition A keeps then starts again at that commit (the client fetches it again). They were
    // settled by this very member: dispatching them again is a claimer round trip for a handled
    // record, and a second copy in the dead-letter topic for a rejected one.
    const topic = await topics.create('kept', 2);
    const groupId = unique('kept-group');
    const { producer, close } = await keyedProducer(kafka);
    for (const partition of [0, 1]) await producer.send(topic, messages(`k${partition}`, 3).map((m) => ({ ...m, partition })));
    await close();

    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const started = new Set<string>();
    const handler = async (message: { key: string }) => {
      started.add(message.key);
      if (message.key.endsWith('-0')) await released;
      return ack();
    };
    const sourceA = fastSource(client, { topics: [topic], groupId });
    const sourceB = fastSource(client, { topics: [topic], groupId });
    const eventsA = recordEvents(sourceA);
    const prefix = uniquePrefix('kafka-kept');
    const a = new TestConsumer({ name: groupId, claimer: await redis.claimer('kept-a', { prefix }), source: sourceA, busyRequeueDelayMs: 300 }, handler);
    const b = new TestConsumer({ name: groupId, claimer: await redis.claimer('kept-b', { prefix }), source: sourceB, busyRequeueDelayMs: 300 }, handler);
    consumers.push(a, b);
    await a.start();
    await waitFor(() => started.size === 2, { what: 'A mid-handler on the first record of both partitions' });
    await b.start();
    await waitFor(() => sourceA.stats.groupJoins >= 2, { what: "A's group join after B arrived", timeoutMs: 30_000 });
    const kept = eventsA.filter((e) => e.type === 'group_join').at(-1)!;
    expect(kept.type === 'group_join' && (kept.assignment[topic] ?? []).length).toBe(1);
    release();
    await waitFor(async () => started.size === 6 && (await topics.fullyCommitted(groupId, topic)), { what: 'all 6 handled and committed', timeoutMs: 45_000, intervalMs: 100 });

    // Each (partition, offset) reached A's pipeline once: acquired, never again as a done duplicate.
    const seen = new Map<string, string[]>();
    for (const e of a.events) {
      if (e.type !== 'acquired' && e.type !== 'done_duplicate' && e.type !== 'busy') continue;
      const at = `${String(e.metadata.attributes?.partition)}@${String(e.metadata.attributes?.offset)}`;
      seen.set(at, [...(seen.get(at) ?? []), e.type]);
    }
    expect([...seen].filter(([, types]) => types.length > 1)).toEqual([]);
  });
});
