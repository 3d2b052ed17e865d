/**
 * Bad input through the real Kafka adapter (127.0.0.1:9092, `npm run kafka:start`) with the Redis
 * claimer (127.0.0.1:6379): fuzzed keys, headers and bodies produced raw with kafkajs, consumed
 * by two KafkaSource consumers in one group, on kafkajs, @platformatic/kafka classic and
 * @platformatic/kafka KIP-848 (rows of test/integration/kafka/support/clients.ts). Each bad
 * message is dead-lettered to `<topic>.dlq` with `twophase-reason` and `twophase-error-type:
 * InvalidMessageError` (once, or again by a member its partition moved to: see explainRepeat),
 * the handler never sees it, each good key is handled once, nothing is lost, and both consumers
 * stay up.
 *
 * Kafka headers are strings or bytes only (no numbers, tables or nulls), and a record without a
 * key header is keyed by its `topic:partition:offset`, so "missing key" cannot happen here; a
 * record is at most 1 MB by default, so huge bodies stay at 256 KiB.
 */
import fc from 'fast-check';
import Redis from 'ioredis';
import { type Consumer, Kafka, logLevel, Partitioners, type Producer } from 'kafkajs';
import { KafkaSource } from '../../adapters/kafka';
import { RedisClaimer } from '../../adapters/redis';
import { silentLogger } from '../../src';
import { SERVICES } from '../support/services';
import { clientRows, describeEachClient } from '../integration/kafka/support/clients';
import { type FuzzLimits, type FuzzMessage, fuzzMessage, headersOf, labelledReport, type HeaderValue, type Transport } from './support/bad-input';
import { checkBatch, FuzzRecorder, type ReadDeadLetter, RecordingConsumer, TRACKING_HEADER, trackingIdOf } from './support/adapter-fuzz';
import { waitFor } from '../support/wait';
import { createTopicsWithLeaders } from '../../adapters/kafka/kafkajs-client';

const BROKERS = [`${SERVICES.kafka.host}:${SERVICES.kafka.port}`];
const NAMESPACE = 'fuzz:kafka';
const FAST_GROUP = { sessionTimeout: 6000, rebalanceTimeout: 8000, heartbeatInterval: 500, maxWaitTimeInMs: 100 } as const;

/** Kafka carries header values as bytes: a string arrives as its UTF-8 Buffer. */
const KAFKA: Transport = {
  header: (v: HeaderValue) => (typeof v === 'string' ? Buffer.from(v, 'utf8') : v),
  messageId: () => undefined,
  brokerRecordIds: true,
};

/** What one member of the group did, from its source's events, in order. */
type MemberEvent = { readonly member: number; readonly at: number } & (
  | { readonly type: 'join'; readonly partitions: ReadonlySet<number> }
  | { readonly type: 'dead_lettered'; readonly origin: string }
);

/**
 * Dead letters are at-least-once across members, and only across members. Under KIP-848 the
 * second member gets its partitions at the first member's next heartbeat (the broker's 5 s
 * interval), mid-run; the client acknowledges the revocation on its own, without waiting for the
 * source: a record on a revoked partition that settled after the first member's last commit
 * (its dead letter in flight at the revocation, or a commit refused because the assignment was
 * changing) is fetched again by its new owner, which writes its dead letter again (an invalid
 * record has no claim that could say it is done). A repeat is accepted only when the log shows
 * exactly that: each copy written by a different member, the earlier writer lost the partition
 * in a group join, and the later writer's last join before its write gave it the partition. A member never
 * writes one record's dead letter twice (a partition it keeps skips what it settled).
 */
function explainRepeat(log: readonly MemberEvent[], origin: string | undefined, copies: number): string | undefined {
  if (origin === undefined) return 'the dead letters name no original partition and offset';
  const partition = Number(origin.split('@')[0]);
  const writes = log.filter((e) => e.type === 'dead_lettered' && e.origin === origin);
  if (writes.length !== copies) return `${copies} copies in the dead-letter topic, ${writes.length} written by the members`;
  for (let i = 1; i < writes.length; i++) {
    const before = writes[i - 1]!;
    const after = writes[i]!;
    if (writes.slice(0, i).some((w) => w.member === after.member)) return `member ${after.member} wrote ${origin} twice`;
    // Joins before the later write: the earlier writer's lost the partition, the later writer's last one holds it.
    const joins = (member: number) => log.filter((e): e is Extract<MemberEvent, { type: 'join' }> => e.type === 'join' && e.member === member && e.at <= after.at);
    const earlier = joins(before.member);
    const lost = earlier.some((j, k) => !j.partitions.has(partition) && earlier.slice(0, k).some((o) => o.partitions.has(partition)));
    const holds = joins(after.member).at(-1)?.partitions.has(partition) === true;
    if (!lost || !holds) return `no group join moved partition ${partition} from member ${before.member} to member ${after.member} before the second write`;
  }
  return undefined;
}

describeEachClient(['kafka', 'redis'], 'fuzz: bad input through the Kafka adapter (Redis claimer)', clientRows('kafkajs', 'platformatic-classic', 'platformatic-kip848'), (row) => {
  const tag = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6)}`;
  const topic = `tp-fuzz-${tag}`;
  const groupId = `tp-fuzz-${tag}`;
  const prefix = `tp-fuzz-kafka-${tag}`;
  const kafka = new Kafka({ clientId: 'twophase-fuzz', brokers: BROKERS, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  const recorder = new FuzzRecorder();
  const deadLetters = new Map<string, ReadDeadLetter[]>();
  let producer: Producer;
  let dlqReader: Consumer;
  let redis: Redis;
  let consumers: RecordingConsumer[] = [];
  let batch = 0;
  const members: MemberEvent[] = [];
  const repeated = (_id: string, copies: readonly ReadDeadLetter[]) => explainRepeat(members, copies[0]?.origin, copies.length);
  /** Every dead letter written is in the dead-letter topic (a reject whose write was cut short by a revocation wrote none). */
  const allArrived = (ids: readonly string[]) => ids.every((id) => (recorder.written.get(id) ?? 0) === (deadLetters.get(id)?.length ?? 0));

  const runBatch = async (messages: readonly FuzzMessage[]) => {
    const b = ++batch;
    const ids = messages.map((_, i) => `b${b}-${i}`);
    await producer.send({
      topic,
      messages: messages.map((m, i) => ({ value: m.body, headers: headersOf(m, TRACKING_HEADER, ids[i]!) as Record<string, string | Buffer> })),
    });
    await waitFor(() => recorder.settled(ids), { timeoutMs: 30_000, what: `batch ${b} to settle` });
    await waitFor(() => allArrived(ids), { timeoutMs: 15_000, what: `the dead letters of batch ${b}` });
    checkBatch(messages, ids, NAMESPACE, KAFKA, recorder, deadLetters, repeated);
    for (const c of consumers) expect(c.health()).toMatchObject({ live: true, state: 'running' });
  };

  beforeAll(async () => {
    await admin.connect();
    await createTopicsWithLeaders(admin, [{ topic, numPartitions: 4 }, { topic: `${topic}.dlq`, numPartitions: 4 }]);
    producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    dlqReader = kafka.consumer({ groupId: `${groupId}-dlq`, ...FAST_GROUP });
    await dlqReader.connect();
    await dlqReader.subscribe({ topics: [`${topic}.dlq`], fromBeginning: true });
    await dlqReader.run({
      eachMessage: async ({ message }) => {
        const h = message.headers ?? {};
        const id = trackingIdOf(h) ?? '?';
        const text = (v: unknown) => (Buffer.isBuffer(v) ? v.toString('utf8') : typeof v === 'string' ? v : undefined);
        const origin = `${text(h['twophase-original-partition'])}@${text(h['twophase-original-offset'])}`;
        deadLetters.set(id, [...(deadLetters.get(id) ?? []), { trackingId: id, reason: text(h['twophase-reason']), errorType: text(h['twophase-error-type']), origin }]);
      },
    });
    redis = new Redis({ host: SERVICES.redis.host, port: SERVICES.redis.port, maxRetriesPerRequest: 1 });
    consumers = [1, 2].map((member) => {
      const source = new KafkaSource({ client: row.make(`twophase-fuzz-${member}-${row.name}`) }, { topics: [topic], groupId, fromBeginning: true, consumer: FAST_GROUP, logger: silentLogger });
      source.on((e) => {
        if (e.type === 'group_join') members.push({ member, at: Date.now(), type: 'join', partitions: new Set(e.assignment[topic] ?? []) });
        else if (e.type === 'dead_lettered') members.push({ member, at: Date.now(), type: 'dead_lettered', origin: `${e.partition}@${e.offset}` });
      });
      return new RecordingConsumer(
        { name: NAMESPACE, claimer: new RedisClaimer({ redis, logger: silentLogger }, { prefix }), source, concurrency: 8, logger: silentLogger, observers: [recorder.observer] },
        recorder,
      );
    });
    for (const c of consumers) await c.start();
  }, 60_000);

  afterAll(async () => {
    await Promise.all(consumers.map((c) => c.stop()));
    await dlqReader?.disconnect().catch(() => undefined);
    await producer?.disconnect().catch(() => undefined);
    await admin.deleteTopics({ topics: [topic, `${topic}.dlq`], timeout: 10_000 }).catch(() => undefined);
    await admin.deleteGroups([groupId, `${groupId}-dlq`]).catch(() => undefined);
    await admin.disconnect();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
    await redis.quit();
  }, 60_000);

  test('keys, headers and bodies: typed dead-letters with the reason, nothing lost, consumers stay up', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.nat().chain(() => {
          const limits: FuzzLimits = { namespace: NAMESPACE, hugeHeaderBytes: 20 * 1024, hugeBodyBytes: 256 * 1024, structuredHeaders: false, typedHeaders: false, runTag: `${prefix}-r${++run}-` };
          return fc.array(fuzzMessage(limits), { minLength: 1, maxLength: 15 });
        }),
        (messages) => runBatch(messages),
      ),
      { numRuns: 20, endOnFailure: true, ...labelledReport<FuzzMessage[]>() },
    );
    // A record of an earlier batch may be dead-lettered again after its batch was checked (its
    // partition's new owner fetched it later): every copy written arrived, and each repeat is explained.
    const all = [...recorder.finals.keys()];
    await waitFor(() => allArrived(all), { timeoutMs: 15_000, what: 'every dead letter written' });
    for (const [id, copies] of deadLetters) if (copies.length > 1) expect({ id, unexplained: repeated(id, copies) }).toEqual({ id, unexplained: undefined });
  }, 240_000);
});
