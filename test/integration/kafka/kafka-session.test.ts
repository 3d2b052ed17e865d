/**
 * S09: a handler longer than the session timeout. (a) With the adapter's heartbeats the member
 * stays in the group; (b) with heartbeats off and a handler that blocks the event loop, the
 * broker evicts the member, its offset commit fails and is handled, and the record delivered
 * again after the rejoin is skipped as a duplicate. The effect happens once either way. (a) runs
 * on every client row; (b) on the rows whose member sets its own session timeout.
 */
import { ack } from '../../../src';
import type { KafkaSourceEvent } from '../../../adapters/kafka';
import { clientRows, clients, describeEachClient, type ClientRow } from './support/clients';
import { fastSource, keyedProducer, kafkaSuite, messages, recordEvents, TestConsumer, unique } from './support/kafka-helpers';
import { waitFor } from '../../support/wait';

/** `sessionTimeout` at the broker's minimum (`group.min.session.timeout.ms`), heartbeats every 2 s. */
const SESSION = { sessionTimeout: 6000, heartbeatInterval: 2000, rebalanceTimeout: 8000 } as const;

/** The suite's fixtures and one topic holding one record, with a group for it. */
function sessionSuite(row: ClientRow) {
  const suite = kafkaSuite('twophase-session-suite');
  const client = row.make(`twophase-session-suite-${row.name}`);
  async function setup(label: string) {
    const topic = await suite.topics.create(label, 1);
    const groupId = unique(`${label}-group`);
    const { producer, close } = await keyedProducer(suite.kafka);
    await producer.send(topic, messages(label, 1));
    await close();
    return { topic, groupId };
  }
  return { ...suite, client, setup };
}

describeEachClient(['kafka', 'redis'], 'Kafka adapter: S09 session timeout with long processing', clients, (row) => {
  const { topics, redis, consumers, client, setup } = sessionSuite(row);

  test('S09 (a): a 10 s handler with sessionTimeout 6 s: heartbeats keep the member in the group, the effect applies once', async () => {
    const { topic, groupId } = await setup('s09a');
    let runs = 0;
    const source = fastSource(client, { topics: [topic], groupId, consumer: SESSION });
    const events = recordEvents(source);
    const consumer = new TestConsumer({ name: groupId, claimer: await redis.claimer('s09a'), source }, async () => {
      runs++;
      await new Promise((resolve) => setTimeout(resolve, 10_000));
      return ack();
    });
    consumers.push(consumer);
    await consumer.start();
    await waitFor(() => topics.fullyCommitted(groupId, topic), { what: 'offset 1 committed', timeoutMs: 25_000, intervalMs: 200 });
    expect(runs).toBe(1);
    expect(source.stats.groupJoins).toBe(1);
    expect(events.filter((e) => e.type === 'rebalancing' || e.type === 'crash' || e.type === 'commit_failed')).toEqual([]);
    expect(consumer.count('committed')).toBe(1);
  }, 40_000);
});

// Under KIP-848 the session timeout is the broker's (`group.consumer.session.timeout.ms`, 45 s
// at least), not the member's: a 10 s block evicts no one there, so (b) runs on the clients whose
// members set their own session timeout.
describeEachClient(['kafka', 'redis'], 'Kafka adapter: S09 eviction after a blocked event loop', clientRows('kafkajs', 'platformatic-classic'), (row) => {
  const { topics, redis, consumers, client, setup } = sessionSuite(row);

  test('S09 (b): heartbeats off and a handler blocking the event loop 10 s: evicted, the commit fails gracefully, the redelivery is skipped, the effect applies once', async () => {
    const { topic, groupId } = await setup('s09b');
    let runs = 0;
    const warnings: string[] = [];
    const logger = { debug: () => undefined, info: () => undefined, error: () => undefined, warn: (_: object, msg?: string) => void warnings.push(msg ?? '') };
    const source = fastSource(client, { topics: [topic], groupId, consumer: SESSION, heartbeatWhileProcessing: false, logger });
    const events = recordEvents(source);
    const consumer = new TestConsumer({ name: groupId, claimer: await redis.claimer('s09b'), source }, async () => {
      runs++;
      const until = Date.now() + 10_000;
      while (Date.now() < until) {
        // a CPU-bound handler: no timer, no socket, no heartbeat runs meanwhile
      }
      return ack();
    });
    consumers.push(consumer);
    await consumer.start();
    expect(warnings.some((w) => /heartbeatWhileProcessing is off.*exceeds sessionTimeout/.test(w))).toBe(true);
    await waitFor(() => source.stats.groupJoins >= 2, { what: 'the member rejoined after its eviction', timeoutMs: 30_000, intervalMs: 200 });
    await waitFor(() => topics.fullyCommitted(groupId, topic), { what: 'offset 1 committed after the rejoin', timeoutMs: 20_000, intervalMs: 200 });
    expect(runs).toBe(1);
    expect(consumer.count('committed')).toBe(1);
    // The client fetches the record again after the rejoin; the source skips it without a dispatch
    // (this member's previous worker of the partition settled it), and commits past it.
    expect(consumer.count('acquired')).toBe(1);
    expect(consumer.count('done_duplicate')).toBe(0);
    const joins = events.filter((e): e is Extract<KafkaSourceEvent, { type: 'group_join' }> => e.type === 'group_join');
    expect(new Set(joins.map((j) => j.memberId)).size).toBeGreaterThanOrEqual(2);
    expect(consumer.health().live).toBe(true);
  }, 60_000);
});
