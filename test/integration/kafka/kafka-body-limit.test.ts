/**
 * `maxBodyBytes` on the real Kafka broker: a record value larger than the limit is written to the
 * dead-letter topic without being parsed (reason `invalid_body`, the sizes in the error header);
 * a value at the limit is handled.
 */
import { Partitioners } from 'kafkajs';
import { ack, InMemoryClaimer } from '../../../src';
import { HEADERS } from '../../../adapters/kafka';
import { describeWithServices } from '../../support/services';
import { fastSource, kafkaSuite, TestConsumer, unique } from './support/kafka-helpers';
import { waitFor } from '../../support/wait';

describeWithServices(['kafka'], 'Kafka: maxBodyBytes (real broker)', () => {
  const { kafka, topics, consumers } = kafkaSuite('twophase-body-limit');

  test('a value over maxBodyBytes goes to the dead-letter topic unparsed (invalid_body); one at the limit is handled', async () => {
    const topic = await topics.create('body-limit', 1);
    const groupId = unique('body-limit-group');
    const fits = JSON.stringify({ pad: 'y'.repeat(1024 - 10) });
    expect(Buffer.byteLength(fits)).toBe(1024);
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    await producer.send({
      topic,
      messages: [
        { value: 'x'.repeat(1025), headers: { 'idempotency-key': 'big' } },
        { value: fits, headers: { 'idempotency-key': 'fits' } },
      ],
    });
    await producer.disconnect();
    const handled: string[] = [];
    const source = fastSource(kafka, { topics: [topic], groupId });
    const consumer = new TestConsumer({ name: groupId, claimer: new InMemoryClaimer(), source, maxBodyBytes: 1024 }, async (m) => {
      handled.push(m.key);
      return ack();
    });
    consumers.push(consumer);
    await consumer.start();
    await waitFor(() => topics.fullyCommitted(groupId, topic), { what: 'both offsets committed', timeoutMs: 30_000 });
    expect(handled).toEqual([`${groupId}:fits`]);
    const reader = kafka.consumer({ groupId: unique('body-limit-reader') });
    await reader.connect();
    await reader.subscribe({ topics: [`${topic}.dlq`], fromBeginning: true });
    const dead: { reason?: string; error?: string; size: number }[] = [];
    await reader.run({
      eachMessage: async ({ message }) => {
        dead.push({ reason: message.headers?.[HEADERS.reason]?.toString(), error: message.headers?.[HEADERS.errorMessage]?.toString(), size: message.value?.length ?? 0 });
      },
    });
    await waitFor(() => dead.length === 1, { what: 'the dead letter read back', timeoutMs: 30_000 });
    await reader.disconnect();
    expect(dead).toEqual([{ reason: 'invalid_body', error: 'body is 1025 bytes, more than maxBodyBytes (1024); not parsed', size: 1025 }]);
  }, 60_000);
});
