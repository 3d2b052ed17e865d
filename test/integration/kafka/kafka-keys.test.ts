/**
 * Issue 12 item 1 on the real broker with the Redis claimer: binary `idempotency-key` header
 * values never share a claim, repeated headers (kafkajs gives an array) are one key only when
 * the values agree, and the DLQ replay tool prints the key the consumer derives.
 */
import { type IHeaders, type Kafka, Partitioners } from 'kafkajs';
import { ack } from '../../../src';
import { runCli } from '../../../adapters/cli';
import type { KafkaSourceEvent } from '../../../adapters/kafka';
import { clients, describeEachClient } from './support/clients';
import { fastSource, kafkaSuite, recordEvents, TestConsumer, unique } from './support/kafka-helpers';
import { waitFor } from '../../support/wait';

async function produce(kafka: Kafka, topic: string, records: { value: string; headers: IHeaders }[]): Promise<void> {
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  try {
    await producer.send({ topic, messages: records });
  } finally {
    await producer.disconnect();
  }
}

describeEachClient(['kafka', 'redis'], 'Kafka adapter: idempotency keys from foreign producers (issue 12 item 1)', clients, (row) => {
  const { kafka, topics, redis, consumers } = kafkaSuite('twophase-keys-suite');
  const client = row.make(`twophase-keys-suite-${row.name}`);

  beforeAll(async () => {
    await topics.connect();
  });

  test('header values [0xff,0x41], [0xfe,0x41], [0xc3,0x28] are three keys: three effects; a copy of one is a duplicate', async () => {
    const topic = await topics.create('bin-keys', 1);
    const groupId = unique('bin-keys-group');
    const bytes = [[0xff, 0x41], [0xfe, 0x41], [0xc3, 0x28], [0xff, 0x41]];
    await produce(kafka, topic, bytes.map((b, i) => ({ value: JSON.stringify({ i }), headers: { 'idempotency-key': Buffer.from(b) } })));

    const effects: string[] = [];
    const source = fastSource(client, { topics: [topic], groupId });
    const consumer = new TestConsumer({ name: groupId, claimer: await redis.claimer('bin-keys'), source }, async (message) => {
      effects.push(message.key);
      return ack();
    });
    consumers.push(consumer);
    await consumer.start();
    await waitFor(() => topics.fullyCommitted(groupId, topic), { what: 'all 4 offsets committed', timeoutMs: 30_000 });
    expect(effects).toHaveLength(3);
    expect(new Set(effects).size).toBe(3);
    expect(consumer.count('done_duplicate')).toBe(1);
    expect(consumer.count('rejected')).toBe(0);
  });

  test('a repeated header: identical values are one key; differing values are dead-lettered as invalid_key, and replay prints why', async () => {
    const topic = await topics.create('rep-keys', 1);
    const groupId = unique('rep-keys-group');
    await produce(kafka, topic, [
      { value: '{"n":1}', headers: { 'idempotency-key': [Buffer.from('same-1'), Buffer.from('same-1')] } },
      { value: '{"n":2}', headers: { 'idempotency-key': 'same-1' } },
      { value: '{"n":3}', headers: { 'idempotency-key': [Buffer.from('left'), Buffer.from('right')] } },
    ]);

    const effects: string[] = [];
    const source = fastSource(client, { topics: [topic], groupId });
    const events = recordEvents(source);
    const consumer = new TestConsumer({ name: groupId, claimer: await redis.claimer('rep-keys'), source }, async (message) => {
      effects.push(message.key);
      return ack();
    });
    consumers.push(consumer);
    await consumer.start();
    await waitFor(() => topics.fullyCommitted(groupId, topic), { what: 'all 3 offsets committed', timeoutMs: 30_000 });
    expect(effects).toEqual([`${groupId}:same-1`]);
    expect(consumer.count('done_duplicate')).toBe(1);
    const dead = events.filter((e): e is Extract<KafkaSourceEvent, { type: 'dead_lettered' }> => e.type === 'dead_lettered');
    expect(dead.map((e) => [e.offset, e.reason])).toEqual([['2', 'invalid_key']]);
    await consumer.stop();

    // The replay tool derives keys with the consumer's function: no key, and the reason it will be refused.
    const out: string[] = [];
    const code = await runCli(['dlq', 'replay', `${topic}.dlq`, '--broker', 'kafka', '--url', 'kafka://127.0.0.1:9092', '--json', '--dry-run'], {
      io: { stdout: (t) => void out.push(t), stderr: () => undefined },
      env: {},
    });
    expect(code).toBe(0);
    const items = out.map((l) => JSON.parse(l) as { type: string; key?: string; keyError?: string; reason?: string }).filter((e) => e.type === 'message');
    expect(items).toHaveLength(1);
    expect(items[0]!.key).toBeUndefined();
    expect(items[0]!.keyError).toMatch(/^invalid_key: header "idempotency-key" is repeated 2 times with differing values/);
    expect(items[0]!.reason).toBe('invalid_key');
  });
});
