/**
 * What a starting Kafka consumer waits for is logged with the default logger (info lines on
 * stderr): the group join it starts, the partitions it gets, and a record whose key is held by an
 * earlier owner's lease (here a claim made by "a process that crashed": claimed, never settled).
 */
import { Partitioners } from 'kafkajs';
import { ack } from '../../../src';
import { fastSource, kafkaSuite, TestConsumer, unique } from './support/kafka-helpers';
import { waitFor } from '../../support/wait';

interface LogLine {
  readonly level: string;
  readonly msg: string;
  readonly [field: string]: unknown;
}

/** Collects the JSON lines written to stderr while installed (the default loggers write there). */
function captureStderr(): { lines: LogLine[]; restore: () => void } {
  const lines: LogLine[] = [];
  const spy = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    for (const text of String(chunk).split('\n')) {
      if (!text.startsWith('{')) continue;
      try {
        lines.push(JSON.parse(text) as LogLine);
      } catch {
        // not a log line
      }
    }
    return true;
  });
  return { lines, restore: () => spy.mockRestore() };
}

describe('Kafka adapter: a start says what it waits for, with the default logger', () => {
  const { kafka, topics, redis, consumers } = kafkaSuite('twophase-wait-lines');

  beforeAll(async () => {
    await topics.connect();
  });

  test('a start logs the group join it begins and the partitions it was assigned', async () => {
    const topic = await topics.create('join-lines', 2);
    const groupId = unique('join-lines-group');
    const stderr = captureStderr();
    try {
      // No logger given to the source: its default.
      const source = fastSource(kafka, { topics: [topic], groupId, logger: undefined });
      const consumer = new TestConsumer({ name: groupId, claimer: await redis.claimer('join-lines'), source }, async () => ack());
      consumers.push(consumer);
      await consumer.start();
      const joining = stderr.lines.find((l) => l.msg.startsWith('twophase/kafka: joining consumer group'));
      expect(joining).toMatchObject({ level: 'info', groupId, topics: [topic] });
      const joined = stderr.lines.find((l) => l.msg.startsWith('twophase/kafka: joined consumer group'));
      expect(joined).toMatchObject({ level: 'info', groupId, partitions: 2, generation: 1, assignment: { [topic]: [0, 1] } });
      expect(joined?.msg).toContain('2 partitions assigned (generation 1');
      expect(stderr.lines.indexOf(joining!)).toBeLessThan(stderr.lines.indexOf(joined!));
    } finally {
      stderr.restore();
    }
  });

  test('a record whose key is held by a crashed owner logs that it waits for that lease; it runs once the lease is gone', async () => {
    const topic = await topics.create('wait-lines', 1);
    const groupId = unique('wait-lines-group');
    const claimer = await redis.claimer('wait-lines');
    // The crashed owner: it claimed the record's key and never committed nor released it.
    const held = await claimer.claim(`${groupId}:held-1`, { leaseTtlMs: 120_000, doneTtlMs: 600_000 });
    expect(held.state).toBe('acquired');
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    await producer.send({ topic, messages: [{ value: '{"seq":1}', headers: { 'idempotency-key': 'held-1' } }] });
    await producer.disconnect();

    const stderr = captureStderr();
    try {
      const effects: string[] = [];
      // No logger given to the source: its default.
      const source = fastSource(kafka, { topics: [topic], groupId, logger: undefined });
      const consumer = new TestConsumer({ name: groupId, claimer, source, leaseTtlMs: 30_000 }, async (message) => {
        effects.push(message.key);
        return ack();
      });
      consumers.push(consumer);
      await consumer.start();

      const waiting = await waitFor(() => stderr.lines.find((l) => l.reason === 'waiting_for_lease'), { what: 'the line saying the record waits for the lease' });
      expect(waiting).toMatchObject({ level: 'info', groupId, topic, partition: 0, offset: '0', leaseTtlMs: 30_000 });
      expect(waiting.msg).toContain('lease held by an earlier owner');
      expect(waiting.msg).toContain('at most 30000 ms');
      expect(effects).toEqual([]);

      // The earlier owner's lease ends (released here rather than waited for): the record runs.
      if (held.state === 'acquired') await held.receipt.release();
      await waitFor(() => topics.fullyCommitted(groupId, topic), { what: 'the offset committed' });
      expect(effects).toEqual([`${groupId}:held-1`]);
      // Rate-limited: one partition waiting a few seconds gives a few lines, not one per check.
      expect(stderr.lines.filter((l) => l.reason === 'waiting_for_lease').length).toBeLessThanOrEqual(5);
    } finally {
      stderr.restore();
    }
  });
});
