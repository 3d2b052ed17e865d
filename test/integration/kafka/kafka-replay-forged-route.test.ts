/**
 * Kafka replay and a producer that writes twophase's route header itself: the consumer's
 * dead-letter copy overwrites `twophase-original-topic` with the topic it really consumed from,
 * so `twophase dlq replay --broker kafka` sends the record back there and never to the topic the
 * producer named (real broker).
 */
import { Partitioners } from 'kafkajs';
import { InMemoryClaimer, PermanentError } from '../../../src';
import { HEADERS } from '../../../adapters/kafka';
import { EXIT, runCli } from '../../../adapters/cli';
import { describeWithServices } from '../../support/services';
import { BROKERS, fastSource, kafkaSuite, TestConsumer, unique } from './support/kafka-helpers';
import { waitFor } from '../../support/wait';

describeWithServices(['kafka'], 'Kafka dlq replay: a producer cannot choose the destination (real broker)', () => {
  const { kafka, topics, consumers } = kafkaSuite('twophase-replay-forged');

  test('a forged twophase-original-topic is overwritten on the dead-letter copy; replay returns the record to its own topic, none to the victim', async () => {
    const topic = await topics.create('forged-work', 1);
    const victim = await topics.create('forged-victim', 1);
    const groupId = unique('forged-group');
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    await producer.send({ topic, messages: [{ value: '{}', headers: { 'idempotency-key': 'forged-1', [HEADERS.originalTopic]: victim, [HEADERS.originalPartition]: '0' } }] });
    await producer.disconnect();

    const source = fastSource(kafka, { topics: [topic], groupId });
    const consumer = new TestConsumer({ name: groupId, claimer: new InMemoryClaimer(), source }, async () => {
      throw new PermanentError('stop');
    });
    consumers.push(consumer);
    await consumer.start();
    await waitFor(async () => (await topics.highWatermarks(`${topic}.dlq`))[0] === '1', { what: 'the record dead-lettered', timeoutMs: 30_000 });
    await consumer.stop();

    const dry: string[] = [];
    expect(await runCli(['dlq', 'replay', `${topic}.dlq`, '--broker', 'kafka', '--url', BROKERS.join(','), '--dry-run'], { io: { stdout: () => undefined, stderr: (t) => void dry.push(t) }, env: {} })).toBe(EXIT.ok);
    expect(dry.join('')).toMatch(new RegExp(`would replay forged-1 \\(permanent_error.*\\) → topic "${topic.replace(/\./g, '\\.')}"`));

    const out: string[] = [];
    expect(await runCli(['dlq', 'replay', `${topic}.dlq`, '--broker', 'kafka', '--url', BROKERS.join(',')], { io: { stdout: (t) => void out.push(t), stderr: () => undefined }, env: {} })).toBe(EXIT.ok);
    expect(out.join('')).toMatch(/^1 replayed/);
    expect(await topics.highWatermarks(topic)).toEqual({ 0: '2' });
    expect(await topics.highWatermarks(victim)).toEqual({ 0: '0' });

    // The RabbitMQ route options mean nothing here and are refused, not ignored.
    for (const option of [['--queue', victim], ['--trust-recorded-route']]) {
      const err: string[] = [];
      expect(await runCli(['dlq', 'replay', `${topic}.dlq`, '--broker', 'kafka', '--url', BROKERS.join(','), ...option], { io: { stdout: () => undefined, stderr: (t) => void err.push(t) }, env: {} })).toBe(EXIT.failed);
      expect(err.join('')).toContain(`${option[0]} has no meaning for Kafka`);
    }
  }, 60_000);
});
