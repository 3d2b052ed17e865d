/**
 * The Kafka adapter on each client of the table (kafkajs; @platformatic/kafka with the classic
 * group protocol and with KIP-848's `consumer` protocol), on the real broker, one code path per
 * row: the source consumes and commits, the dead-letter writer keeps headers (repeated names,
 * binary values), `KeyedProducer` produces through the client, and a group of three members
 * joining and leaving under load loses nothing, repeats no effect and keeps per-partition order.
 */
import { ack, InMemoryClaimer, reject, silentLogger } from '../../../src';
import { type FetchedBatch, HEADERS, KafkaSource, KeyedProducer, type KafkaClient } from '../../../adapters/kafka';
import { EXIT, runCli } from '../../../adapters/cli';
import { waitFor } from '../../support/wait';
import { clientRows, clients, describeEachClient } from './support/clients';
import { BROKERS, EffectLog, FAST_GROUP, kafkaSuite, messages, ownershipGuard, recordEvents, TestConsumer, unique } from './support/kafka-helpers';

function sourceOn(client: KafkaClient, topic: string, groupId: string, extra: Partial<ConstructorParameters<typeof KafkaSource>[1]> = {}): KafkaSource {
  return new KafkaSource({ client }, { topics: [topic], groupId, fromBeginning: true, commitIntervalMs: 200, logger: silentLogger, consumer: { ...FAST_GROUP }, ...extra });
}

describeEachClient(['kafka'], 'Kafka adapter on each client', clients, (row) => {
  const { topics, consumers } = kafkaSuite(`twophase-clients-${row.name}`);
  const client = row.make(`twophase-clients-${row.name}`);

  test('KeyedProducer and the source: every key applied once in partition order, offsets committed to the high watermark', async () => {
    const topic = await topics.create(`cl-${row.name}`, 3);
    const groupId = unique(`cl-${row.name}`);
    const producer = new KeyedProducer({ client });
    await producer.connect();
    const sent = await producer.send(topic, messages('k', 60));
    await producer.disconnect();
    expect(sent.length).toBeGreaterThan(0);

    const log = new EffectLog();
    const source = sourceOn(client, topic, groupId);
    const guard = ownershipGuard(source);
    const consumer = new TestConsumer({ name: groupId, claimer: new InMemoryClaimer(), source }, async (message, context) => {
      log.apply(message.key, Number(context.metadata.attributes?.partition), String(context.metadata.attributes?.offset), message.body.seq);
      return ack();
    });
    consumers.push(consumer);
    await consumer.start();
    await waitFor(async () => log.applied.size === 60 && (await topics.fullyCommitted(groupId, topic)), { what: '60 keys applied and committed', timeoutMs: 30_000, intervalMs: 100 });
    expect(log.duplicated()).toEqual([]);
    for (const partition of [0, 1, 2]) {
      const offsets = log.order.filter((e) => e.partition === partition).map((e) => BigInt(e.offset));
      expect(offsets).toEqual([...offsets].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    }
    expect(guard).toEqual([]);
  });

  test('header fidelity: repeated headers and binary values reach the handler and survive the dead-letter topic', async () => {
    const topic = await topics.create(`hd-${row.name}`, 1);
    const groupId = unique(`hd-${row.name}`);
    const binary = Buffer.from([0x00, 0xff, 0x80, 0x0a]);
    const raw = client.producer();
    await raw.connect();
    await raw.send({ topic, acks: -1, records: [{ key: 'hd-1', value: JSON.stringify({ id: 'hd-1', seq: 0 }), headers: { 'idempotency-key': 'hd-1', 'x-repeated': ['first', 'second'], 'x-binary': binary } }] });
    await raw.disconnect();

    const seen: Array<Readonly<Record<string, unknown>>> = [];
    const source = sourceOn(client, topic, groupId);
    const events = recordEvents(source);
    const consumer = new TestConsumer({ name: groupId, claimer: new InMemoryClaimer(), source }, async (message) => {
      seen.push(message.headers);
      return reject('poison');
    });
    consumers.push(consumer);
    await consumer.start();
    await waitFor(() => source.stats.deadLettered === 1, { what: 'the record dead-lettered', timeoutMs: 30_000 });

    expect(events.filter((e) => e.type === 'dead_lettered').map((e) => (e.type === 'dead_lettered' ? e.reason : ''))).toEqual(['poison']);
    expect(seen).toHaveLength(1);
    const asText = (v: unknown): unknown => (Array.isArray(v) ? v.map(asText) : Buffer.isBuffer(v) ? v.toString('utf8') : v);
    expect(asText(seen[0]?.['x-repeated'])).toEqual(['first', 'second']);
    expect(Buffer.from(seen[0]?.['x-binary'] as Buffer).equals(binary)).toBe(true);

    // Read the dead-letter topic with the same client.
    const dlqSeen: Array<Readonly<Record<string, unknown>>> = [];
    const dlqSource = sourceOn(client, `${topic}.dlq`, unique(`hd-dlq-${row.name}`), { deadLetterTopicCheck: 'none' });
    const dlqConsumer = new TestConsumer({ name: `dlq-${groupId}`, claimer: new InMemoryClaimer(), source: dlqSource }, async (message) => {
      dlqSeen.push(message.headers);
      return ack();
    });
    consumers.push(dlqConsumer);
    await dlqConsumer.start();
    await waitFor(() => dlqSeen.length === 1, { what: 'the dead letter read back', timeoutMs: 30_000 });
    expect(asText(dlqSeen[0]?.['x-repeated'])).toEqual(['first', 'second']);
    expect(Buffer.from(dlqSeen[0]?.['x-binary'] as Buffer).equals(binary)).toBe(true);
    expect(asText(dlqSeen[0]?.['twophase-original-offset'])).toBe('0');
  });

  test('a group offset moved back by a late commit (a former owner\'s, landing under a newer generation) is committed again by the owner', async () => {
    const topic = await topics.create(`rc-${row.name}`, 1);
    const groupId = unique(`rc-${row.name}`);
    const producer = new KeyedProducer({ client });
    await producer.connect();
    await producer.send(topic, messages('rc', 10));
    await producer.disconnect();

    // The member's own commit handle, to send the late commit with the current generation, as
    // @platformatic/kafka does when it sends a former owner's commit again after a rejoin.
    let lastBatch: FetchedBatch | undefined;
    const watched: KafkaClient = {
      ...client,
      consumer: (config) => {
        const inner = client.consumer(config);
        return new Proxy(inner, {
          get(target, property) {
            if (property === 'run') return (eachBatch: (batch: FetchedBatch) => Promise<void>) => target.run((batch) => ((lastBatch = batch), eachBatch(batch)));
            const value = Reflect.get(target, property, target) as unknown;
            return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
          },
        });
      },
    };
    const source = sourceOn(watched, topic, groupId);
    const consumer = new TestConsumer({ name: groupId, claimer: new InMemoryClaimer(), source }, async () => ack());
    consumers.push(consumer);
    await consumer.start();
    await waitFor(async () => (await topics.committed(groupId, topic))[0] === '10', { what: 'offset 10 committed', timeoutMs: 30_000, intervalMs: 100 });

    await lastBatch!.commit([{ topic, partition: 0, offset: '3' }]);
    expect((await topics.committed(groupId, topic))[0]).toBe('3');
    // commitIntervalMs 200: the unchanged offset is committed again within 5 × 200 ms.
    await waitFor(async () => (await topics.committed(groupId, topic))[0] === '10', { what: 'offset 10 committed again', timeoutMs: 10_000, intervalMs: 100 });
  });

  test('three members joining and leaving under load: nothing lost, no effect repeated, per-partition order held, no commit of a partition not owned', async () => {
    const topic = await topics.create(`gr-${row.name}`, 6);
    const groupId = unique(`gr-${row.name}`);
    const claimer = new InMemoryClaimer();
    const log = new EffectLog();
    const guards: string[][] = [];
    const started: KafkaSource[] = [];
    const member = async (): Promise<{ consumer: TestConsumer; source: KafkaSource }> => {
      const source = sourceOn(client, topic, groupId);
      guards.push(ownershipGuard(source));
      const consumer = new TestConsumer({ name: groupId, claimer, source, busyRequeueDelayMs: 100, leaseTtlMs: 3000 }, async (message, context) => {
        await new Promise((resolve) => setTimeout(resolve, message.body.seq % 3));
        log.apply(message.key, Number(context.metadata.attributes?.partition), String(context.metadata.attributes?.offset), message.body.seq);
        return ack();
      });
      consumers.push(consumer);
      started.push(source);
      await consumer.start();
      return { consumer, source };
    };

    const producer = new KeyedProducer({ client });
    await producer.connect();
    const produced = new Set<string>();
    let round = 0;
    let producing = true;
    const production = (async () => {
      while (producing) {
        const batch = messages(`r${round}`, 20).map((m, i) => ({ ...m, value: JSON.stringify({ id: m.idempotencyKey, seq: round * 20 + i }) }));
        await producer.send(topic, batch);
        for (const m of batch) produced.add(`${groupId}:${m.idempotencyKey}`);
        round++;
        await new Promise((resolve) => setTimeout(resolve, 40));
      }
    })();

    const progress = () => `applied ${log.applied.size}/${produced.size}; partitions per member ${started.map((s) => s.assignment.length).join(',')}`;
    const waitWithProgress = async (condition: () => boolean | Promise<boolean>, what: string, timeoutMs: number): Promise<void> => {
      try {
        await waitFor(condition, { what, timeoutMs, intervalMs: 100 });
      } catch (error) {
        throw new Error(`${(error as Error).message} (${progress()})`);
      }
    };
    const a = await member();
    await waitWithProgress(() => log.applied.size >= 100, 'one member consuming', 30_000);
    const b = await member();
    const c = await member();
    await waitWithProgress(() => b.source.assignment.length > 0 && c.source.assignment.length > 0 && log.applied.size >= 400, 'three members consuming', 45_000);
    await b.consumer.stop();
    await waitWithProgress(() => a.source.assignment.length + c.source.assignment.length === 6 && log.applied.size >= 700, 'two members after one left', 45_000);
    producing = false;
    await production;
    await producer.disconnect();

    await waitWithProgress(async () => [...produced].every((k) => log.applied.has(k)) && (await topics.fullyCommitted(groupId, topic)), 'every produced key applied and committed', 45_000);
    expect(log.duplicated()).toEqual([]);
    expect(log.applied.size).toBe(produced.size);
    expect(guards.flat()).toEqual([]);
    // Per-partition order: each partition's effects in increasing offset order, across owners.
    for (let partition = 0; partition < 6; partition++) {
      const offsets = log.order.filter((e) => e.partition === partition).map((e) => BigInt(e.offset));
      expect(offsets).toEqual([...offsets].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)));
    }
    expect(a.source.stats.groupJoins).toBeGreaterThanOrEqual(2);
  }, 150_000);
});

describeEachClient(['kafka'], 'twophase dlq replay --client', clientRows('kafkajs', 'platformatic-classic'), (row) => {
  const { topics } = kafkaSuite(`twophase-replay-${row.name}`);
  const library = row.name === 'kafkajs' ? 'kafkajs' : 'platformatic';

  test(`--client ${library} moves a dead letter back to its original topic and commits past it`, async () => {
    const topic = await topics.create(`rp-${row.name}`, 1);
    const dlq = `${topic}.dlq`;
    const raw = row.make(`twophase-replay-${row.name}`).producer();
    await raw.connect();
    await raw.send({ topic: dlq, acks: -1, records: [{ key: 'k', value: '{}', headers: { [HEADERS.originalTopic]: topic, 'idempotency-key': unique('rp'), [HEADERS.reason]: 'permanent_error' } }] });
    await raw.disconnect();
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(['dlq', 'replay', dlq, '--broker', 'kafka', '--client', library, '--url', BROKERS.join(',')], { io: { stdout: (t) => out.push(t), stderr: (t) => err.push(t) }, env: {} });
    expect({ code, err: err.join('') }).toMatchObject({ code: EXIT.ok });
    expect(out.join('')).toMatch(/^1 replayed/);
    expect(await topics.highWatermarks(topic)).toEqual({ 0: '1' });
    expect(await topics.committed(`twophase-dlq-replay.${dlq}`, dlq)).toEqual({ 0: '1' });
  }, 60_000);
});
