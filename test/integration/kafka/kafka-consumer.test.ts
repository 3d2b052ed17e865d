/**
 * The Kafka adapter on the real broker with the Redis claimer: duplicates, order within a
 * partition, dead-lettering and replay, offsets never past an unsettled record (S10), and
 * pause-and-resume in place (S12).
 */
import { ConfigResourceTypes, type IHeaders, type Kafka } from 'kafkajs';
import { ack, PermanentError, RetryableError, silentLogger } from '../../../src';
import { runCli } from '../../../adapters/cli';
import { HEADERS, type KafkaSourceEvent, readHeader } from '../../../adapters/kafka';
import { clients, describeEachClient } from './support/clients';
import { applying, BROKERS, EffectLog, fastSource, keyedProducer, kafkaSuite, messages, recordEvents, TestConsumer, unique } from './support/kafka-helpers';
import { waitFor } from '../../support/wait';

describeEachClient(['kafka', 'redis'], 'Kafka adapter: consuming with the Redis claimer', clients, (row) => {
  const { kafka, topics, redis, consumers } = kafkaSuite('twophase-consumer-suite');
  const client = row.make(`twophase-consumer-suite-${row.name}`);

  beforeAll(async () => {
    await topics.connect();
  });

  test('duplicates with the same key apply one effect; offsets reach the high watermarks', async () => {
    const topic = await topics.create('dup', 3);
    const groupId = unique('dup-group');
    const { producer, close } = await keyedProducer(kafka);
    // 150 keys, each sent three times: twice in a row to its key's partition, once to another
    // partition, so a copy is also claimed concurrently by another partition's worker.
    const batch = messages('order', 150);
    await producer.send(topic, [...batch, ...batch]);
    await producer.send(
      topic,
      batch.map((m, i) => ({ ...m, key: `other-${i}` })),
    );
    await close();

    const log = new EffectLog();
    const source = fastSource(client, { topics: [topic], groupId });
    const consumer = new TestConsumer({ name: groupId, claimer: await redis.claimer('dup'), source, busyRequeueDelayMs: 100 }, applying(log));
    consumers.push(consumer);
    await consumer.start();

    await waitFor(() => source.stats.settled >= 450 && topics.fullyCommitted(groupId, topic), { what: 'every record settled and committed', timeoutMs: 30_000 });
    expect(log.applied.size).toBe(150);
    expect(log.duplicated()).toEqual([]);
    expect(consumer.count('done_duplicate')).toBe(300);
    expect(consumer.count('rejected')).toBe(0);
  });

  test('order within a partition holds, also across in-place retries; partitions run concurrently', async () => {
    const topic = await topics.create('order', 2);
    const groupId = unique('order-group');
    const { producer, close } = await keyedProducer(kafka);
    const perPartition = 60;
    for (const partition of [0, 1]) {
      await producer.send(
        topic,
        messages(`p${partition}`, perPartition).map((m) => ({ ...m, partition })),
      );
    }
    await close();

    const log = new EffectLog();
    const failedOnce = new Set<string>();
    let concurrent = 0;
    let maxConcurrent = 0;
    const source = fastSource(client, { topics: [topic], groupId });
    const consumer = new TestConsumer(
      { name: groupId, claimer: await redis.claimer('order'), source, retryBackoff: { initialDelayMs: 50, maxDelayMs: 50, jitter: 0 } },
      async (message, context) => {
        concurrent++;
        maxConcurrent = Math.max(maxConcurrent, concurrent);
        try {
          await new Promise((resolve) => setTimeout(resolve, 1 + (message.body.seq % 3)));
          // Every seventh record fails once: it is retried in place before the next one runs.
          if (message.body.seq % 7 === 3 && !failedOnce.has(message.key)) {
            failedOnce.add(message.key);
            throw new RetryableError('first attempt fails');
          }
          log.apply(message.key, Number(context.metadata.attributes?.partition), String(context.metadata.attributes?.offset), message.body.seq);
          return ack();
        } finally {
          concurrent--;
        }
      },
    );
    consumers.push(consumer);
    await consumer.start();

    await waitFor(() => log.applied.size === 2 * perPartition && topics.fullyCommitted(groupId, topic), { what: 'every record applied and committed', timeoutMs: 30_000 });
    for (const partition of [0, 1]) {
      const seqs = log.order.filter((e) => e.partition === partition).map((e) => e.seq);
      expect(seqs).toEqual(Array.from({ length: perPartition }, (_, i) => i));
    }
    expect(failedOnce.size).toBeGreaterThan(0);
    expect(maxConcurrent).toBe(2);
    expect(log.duplicated()).toEqual([]);
  });

  test('a poison record goes to <topic>.dlq with its headers, then the offset moves on; replay brings it back once', async () => {
    const topic = await topics.create('poison', 1);
    const groupId = unique('poison-group');
    const { producer, close } = await keyedProducer(kafka);
    await producer.send(topic, [
      ...messages('ok-a', 2),
      { idempotencyKey: 'bad-permanent', value: JSON.stringify({ id: 'bad-permanent', seq: 100, poison: true }) },
      { idempotencyKey: 'bad-retry', value: JSON.stringify({ id: 'bad-retry', seq: 101, poison: true }) },
      { idempotencyKey: 'bad-json', value: '{not json' },
      ...messages('ok-b', 2),
    ]);
    await close();

    const log = new EffectLog();
    let fixed = false;
    const claimer = await redis.claimer('poison');
    const makeConsumer = () => {
      const source = fastSource(client, { topics: [topic], groupId });
      const events = recordEvents(source);
      const consumer = new TestConsumer(
        { name: groupId, claimer, source, maxAttempts: 3, retryBackoff: { initialDelayMs: 20, maxDelayMs: 20, jitter: 0 } },
        async (message, context) => {
          if (message.body.poison && !fixed) {
            if (message.body.id === 'bad-permanent') throw new PermanentError('cannot handle this one');
            throw new RetryableError('downstream keeps failing');
          }
          log.apply(message.key, 0, String(context.metadata.attributes?.offset), message.body.seq);
          return ack();
        },
      );
      consumers.push(consumer);
      return { consumer, source, events };
    };

    const first = makeConsumer();
    await first.consumer.start();
    await waitFor(() => topics.fullyCommitted(groupId, topic), { what: 'all 7 offsets committed', timeoutMs: 30_000 });
    expect([...log.applied.keys()].sort()).toEqual([`${groupId}:ok-a-0`, `${groupId}:ok-a-1`, `${groupId}:ok-b-0`, `${groupId}:ok-b-1`].sort());
    const dead = first.events.filter((e): e is Extract<KafkaSourceEvent, { type: 'dead_lettered' }> => e.type === 'dead_lettered');
    expect(dead.map((e) => [e.offset, e.reason])).toEqual([
      ['2', 'permanent_error'],
      ['3', 'retry_exhausted'],
      ['4', 'invalid_body'],
    ]);
    await first.consumer.stop();

    // The dead letters, as written.
    const dlq = await readAll(kafka, `${topic}.dlq`, 3);
    const byReason = Object.fromEntries(dlq.map((r) => [readHeader(r.headers, HEADERS.reason), r]));
    const retry = byReason.retry_exhausted!;
    expect(readHeader(retry.headers, HEADERS.originalTopic)).toBe(topic);
    expect(readHeader(retry.headers, HEADERS.originalPartition)).toBe('0');
    expect(readHeader(retry.headers, HEADERS.originalOffset)).toBe('3');
    expect(readHeader(retry.headers, HEADERS.attempts)).toBe('3');
    expect(readHeader(retry.headers, HEADERS.errorType)).toBe('RetryableError');
    expect(readHeader(retry.headers, HEADERS.errorMessage)).toBe('downstream keeps failing');
    expect(readHeader(retry.headers, HEADERS.consumerGroup)).toBe(groupId);
    expect(readHeader(retry.headers, 'idempotency-key')).toBe('bad-retry');
    expect(readHeader(byReason.permanent_error!.headers, HEADERS.attempts)).toBe('1');
    expect(readHeader(byReason.invalid_body!.headers, HEADERS.attempts)).toBe('0');

    // Fix the handler, replay with the CLI, consume again: each replayed record applies once.
    fixed = true;
    const out: string[] = [];
    const io = { stdout: (t: string) => void out.push(t), stderr: () => undefined };
    const code = await runCli(['dlq', 'replay', `${topic}.dlq`, '--broker', 'kafka', '--url', `kafka://${BROKERS.join(',')}`, '--json'], { io, env: {} });
    expect(code).toBe(0);
    const summary = out.map((l) => JSON.parse(l) as { type: string; summary?: { replayed: number } }).find((e) => e.type === 'done')!.summary!;
    expect(summary.replayed).toBe(3);
    const again = await runCli(['dlq', 'replay', `${topic}.dlq`, '--broker', 'kafka', '--url', `kafka://${BROKERS.join(',')}`, '--json'], {
      io: { stdout: () => undefined, stderr: () => undefined },
      env: {},
    });
    expect(again).toBe(0);

    const second = makeConsumer();
    await second.consumer.start();
    // The dead-letter reset the attempt count, so the replayed retry_exhausted record runs again.
    await waitFor(() => log.applied.has(`${groupId}:bad-permanent`) && log.applied.has(`${groupId}:bad-retry`), { what: 'the replayed records applied', timeoutMs: 30_000 });
    await waitFor(() => topics.fullyCommitted(groupId, topic), { what: 'the replayed records committed', timeoutMs: 30_000 });
    // The undecodable one is dead-lettered again (replay does not fix a body); nothing is lost.
    expect(second.events.filter((e) => e.type === 'dead_lettered').map((e) => (e as { reason: string }).reason)).toEqual(['invalid_body']);
    expect(log.duplicated()).toEqual([]);
    expect(log.applied.size).toBe(6);
  });

  test('a dead-letter topic that refuses the record for good (MESSAGE_TOO_LARGE) blocks the partition loudly, loses nothing, and resumes once fixed', async () => {
    const topic = await topics.create('dlq-refuse', 1);
    const groupId = unique('dlq-refuse-group');
    const admin = await topics.connect();
    const setMaxBytes = (value: string) =>
      admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: `${topic}.dlq`, configEntries: [{ name: 'max.message.bytes', value }] }] });
    await setMaxBytes('1024');
    const { producer, close } = await keyedProducer(kafka);
    await producer.send(topic, [
      { idempotencyKey: 'big-poison', value: JSON.stringify({ id: 'big-poison', seq: 0, poison: true, pad: 'p'.repeat(2000) }) },
      ...messages('after', 2),
    ]);
    await close();

    const errors: string[] = [];
    const logger = { ...silentLogger, error: (_o: object, msg?: string) => void errors.push(msg ?? '') };
    const log = new EffectLog();
    const source = fastSource(client, { topics: [topic], groupId, logger, deadLetterBackoff: { initialDelayMs: 50, maxDelayMs: 200 } });
    const consumer = new TestConsumer({ name: groupId, claimer: await redis.claimer('dlq-refuse'), source }, async (message, context) => {
      if (message.body.poison) throw new PermanentError('cannot handle this one');
      return applying(log)(message, context);
    });
    consumers.push(consumer);
    await consumer.start();

    await waitFor(() => source.stats.deadLetterFailures >= 3, { what: 'the dead-letter write refused several times', timeoutMs: 30_000 });
    expect(errors.some((m) => m.includes('the dead-letter topic refuses this record'))).toBe(true);
    expect(log.applied.size).toBe(0); // the records behind it wait: order within the partition holds
    expect((await topics.committed(groupId, topic))[0]).toBe('-1');

    await setMaxBytes('1048588');
    await waitFor(() => topics.fullyCommitted(groupId, topic), { what: 'dead letter written and every offset committed', timeoutMs: 30_000 });
    expect(source.stats.deadLettered).toBe(1);
    expect([...log.applied.keys()].sort()).toEqual([`${groupId}:after-0`, `${groupId}:after-1`]);
    const [dead] = await readAll(kafka, `${topic}.dlq`, 1);
    expect(readHeader(dead!.headers, HEADERS.reason)).toBe('permanent_error');
  });

  test('S10: an offset is never committed past a record whose claim is not committed or dead-lettered', async () => {
    const topic = await topics.create('s10', 1);
    const groupId = unique('s10-group');
    const { producer, close } = await keyedProducer(kafka);
    await producer.send(topic, messages('s10', 3));
    await close();

    const log = new EffectLog();
    let broken = true;
    const attempts: number[] = [];
    const source = fastSource(client, { topics: [topic], groupId });
    const events = recordEvents(source);
    // Guard: every committed offset covers only records whose effect was applied.
    const violations: string[] = [];
    source.on((event) => {
      if (event.type !== 'committed') return;
      for (const o of event.offsets) {
        for (let i = 0; i < Number(o.offset); i++) if (!log.applied.has(`${groupId}:s10-${i}`)) violations.push(`${o.offset} commits unapplied s10-${i}`);
      }
    });
    const consumer = new TestConsumer(
      { name: groupId, claimer: await redis.claimer('s10'), source, maxAttempts: 100, retryBackoff: { initialDelayMs: 100, maxDelayMs: 100, jitter: 0 } },
      async (message, context) => {
        if (message.body.seq === 0 && broken) {
          attempts.push(context.attempt);
          throw new RetryableError('handler fails at offset 0');
        }
        log.apply(message.key, 0, String(context.metadata.attributes?.offset), message.body.seq);
        return ack();
      },
    );
    consumers.push(consumer);
    await consumer.start();

    await waitFor(() => attempts.length >= 4, { what: 'four failed attempts at offset 0' });
    // Commits ran meanwhile (every 200 ms) and committed nothing: the group has no offset yet.
    expect((await topics.committed(groupId, topic))[0]).toBe('-1');
    expect(attempts.slice(0, 4)).toEqual([1, 2, 3, 4]);
    expect(log.applied.size).toBe(0);

    broken = false;
    await waitFor(() => topics.fullyCommitted(groupId, topic), { what: 'offset 3 committed after the fix' });
    expect(log.order.map((e) => e.seq)).toEqual([0, 1, 2]);
    // The admin can read the offset before the member has handled the OffsetCommit answer.
    await waitFor(() => events.some((e) => e.type === 'committed'), { what: 'the committed event' });
    expect(violations).toEqual([]);
  });

  test('S12: a partition paused in place is not handled while paused, resumes at the same offset, and a re-received committed record is skipped', async () => {
    const topic = await topics.create('s12', 2);
    const groupId = unique('s12-group');
    const { producer, close } = await keyedProducer(kafka);
    for (const partition of [0, 1]) await producer.send(topic, messages(`p${partition}`, 20).map((m) => ({ ...m, partition })));
    await close();

    const log = new EffectLog();
    const calls: Array<{ partition: number; at: number }> = [];
    let thrown = false;
    const claimer = await redis.claimer('s12');
    const source = fastSource(client, { topics: [topic], groupId });
    const pauses: Array<{ type: string; partition: number; at: number }> = [];
    source.on((e) => {
      if ((e.type === 'paused' || e.type === 'resumed') && e.partition === 0) pauses.push({ type: e.type, partition: e.partition, at: Date.now() });
    });
    const consumer = new TestConsumer(
      { name: groupId, claimer, source, retryBackoff: { initialDelayMs: 1000, maxDelayMs: 1000, jitter: 0 } },
      async (message, context) => {
        const partition = Number(context.metadata.attributes?.partition);
        calls.push({ partition, at: Date.now() });
        await new Promise((resolve) => setTimeout(resolve, 20));
        if (partition === 0 && message.body.seq === 5 && !thrown) {
          thrown = true;
          throw new RetryableError('throw on p0 offset 5: the adapter pauses p0 and retries in 1 s');
        }
        log.apply(message.key, partition, String(context.metadata.attributes?.offset), message.body.seq);
        return ack();
      },
    );
    consumers.push(consumer);
    await consumer.start();
    await waitFor(() => log.applied.size === 40 && topics.fullyCommitted(groupId, topic), { what: 'all 40 applied and committed', timeoutMs: 30_000 });

    const paused = pauses.find((p) => p.type === 'paused')!;
    const resumed = pauses.find((p) => p.type === 'resumed' && p.at >= paused.at)!;
    expect(resumed.at - paused.at).toBeGreaterThanOrEqual(900);
    // No handler call for p0 while it was paused; p1 went on meanwhile.
    expect(calls.filter((c) => c.partition === 0 && c.at > paused.at && c.at < resumed.at)).toEqual([]);
    expect(calls.filter((c) => c.partition === 1 && c.at > paused.at && c.at < resumed.at).length).toBeGreaterThan(0);
    // Nothing skipped, nothing repeated.
    expect(log.order.filter((e) => e.partition === 0).map((e) => e.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    await consumer.stop();

    // Re-receive everything (the group's offsets reset to the start): every record is a
    // committed claim, skipped as a duplicate, and the effect stays applied once.
    const admin = await topics.connect();
    await admin.resetOffsets({ groupId, topic, earliest: true });
    const again = new TestConsumer({ name: groupId, claimer, source: fastSource(client, { topics: [topic], groupId }) }, applying(log));
    consumers.push(again);
    await again.start();
    await waitFor(() => again.count('done_duplicate') === 40 && topics.fullyCommitted(groupId, topic), { what: 'all 40 re-received as duplicates', timeoutMs: 30_000 });
    expect(log.duplicated()).toEqual([]);
  });
});

/** Reads `count` records of `topic` from the beginning with a throwaway group. */
async function readAll(kafka: Kafka, topic: string, count: number): Promise<Array<{ headers?: IHeaders; value: Buffer | null; offset: string }>> {
  const consumer = kafka.consumer({ groupId: unique('reader'), sessionTimeout: 6000, heartbeatInterval: 500, maxWaitTimeInMs: 100 });
  const out: Array<{ headers?: IHeaders; value: Buffer | null; offset: string }> = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({ eachMessage: async ({ message }) => void out.push({ headers: message.headers, value: message.value, offset: message.offset }) });
    await waitFor(() => out.length >= count, { what: `${count} records of ${topic}` });
  } finally {
    await consumer.disconnect();
  }
  return out;
}
