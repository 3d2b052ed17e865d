/**
 * Moving one consumer group from kafkajs to @platformatic/kafka with the group running (real
 * broker, Redis claimer shared by every member):
 * - a rolling deploy from kafkajs (classic protocol) to @platformatic/kafka with `groupProtocol:
 *   'consumer'` (KIP-848): the broker moves the live classic group to the consumer protocol, both
 *   members share the partitions, and once the kafkajs member left the new one owns them all;
 *   nothing is lost, each key's effect happens once, order per partition and per entity holds;
 * - a kafkajs member and a @platformatic/kafka *classic* member in one group: the broker refuses
 *   the second one's JoinGroup (INCONSISTENT_GROUP_PROTOCOL) and its start fails with a
 *   {@link KafkaGroupProtocolError} naming the cause and the fixes; a classic member that finds
 *   a kafkajs member leading the group when it rejoins (its own session ran out meanwhile) crashes
 *   with the same error instead of rejoining forever.
 */
import { spawn } from 'node:child_process';
import type * as nodeModule from 'node:module';
import { join } from 'node:path';
import { ConfigResourceTypes } from 'kafkajs';
import { ack, InMemoryClaimer } from '../../../src';
import { KafkaGroupProtocolError, type KafkaSource } from '../../../adapters/kafka';
import { clientRows, describeEachClient } from './support/clients';
import { BROKERS, EffectLog, fastSource, keyedProducer, kafkaSuite, ownershipGuard, TestConsumer, unique } from './support/kafka-helpers';
import { waitFor } from '../../support/wait';
import { uniquePrefix } from '../redis/support/redis-helpers';

/** Entities (record keys): each has its own ordered stream of records. */
const ENTITIES = 24;

/**
 * The group's type as the broker lists it (`classic` or `consumer`; ListGroups v5, through
 * @platformatic/kafka's admin: kafkajs's ListGroups does not carry it). Platformatic rows only.
 */
async function groupType(groupId: string): Promise<string | undefined> {
  const native = process.getBuiltinModule!('node:module') as unknown as typeof nodeModule;
  const { Admin } = native.createRequire(__filename)('@platformatic/kafka') as typeof import('@platformatic/kafka');
  const admin = new Admin({ clientId: 'twophase-client-migration-admin', bootstrapBrokers: BROKERS });
  try {
    const groups = await admin.listGroups({ types: ['classic', 'consumer'] });
    return groups.get(groupId)?.groupType;
  } finally {
    await admin.close();
  }
}

describeEachClient(['kafka', 'redis'], 'Kafka rolling deploy: kafkajs (classic) → @platformatic/kafka (KIP-848) in one live group', clientRows('platformatic-kip848'), (row) => {
  const { kafka, topics, redis, consumers } = kafkaSuite('twophase-client-migration');

  test('the broker lets a KIP-848 member into a live classic group (group.consumer.migration.policy bidirectional)', async () => {
    const admin = kafka.admin();
    await admin.connect();
    try {
      const { brokers } = await admin.describeCluster();
      const { resources } = await admin.describeConfigs({
        resources: [{ type: ConfigResourceTypes.BROKER, name: String(brokers[0]!.nodeId), configNames: ['group.consumer.migration.policy'] }],
        includeSynonyms: false,
      });
      expect(resources[0]!.configEntries.map((e) => [e.configName, e.configValue])).toEqual([['group.consumer.migration.policy', 'bidirectional']]);
    } finally {
      await admin.disconnect();
    }
  });

  test('records flow while a KIP-848 member joins the kafkajs group and the kafkajs member leaves: each effect once, nothing lost, order held, offsets committed, the new member owns all 6 partitions', async () => {
    const topic = await topics.create('migration', 6);
    const groupId = unique('migration');
    const prefix = uniquePrefix('kafka-migration');
    const log = new EffectLog();
    /** Per entity, the sequence numbers in the order their effects were applied. */
    const perEntity = new Map<string, number[]>();
    const appliedBy = new Map<string, string>();
    /** Commits of a partition the member did not own at that moment. */
    const violations: string[][] = [];
    const member = async (label: string, source: KafkaSource): Promise<TestConsumer> => {
      violations.push(ownershipGuard(source));
      const claimer = await redis.claimer(`migration-${label}`, { prefix });
      const consumer = new TestConsumer({ name: groupId, claimer, source, busyRequeueDelayMs: 100, leaseTtlMs: 5000 }, async (message, context) => {
        await new Promise((resolve) => setTimeout(resolve, message.body.seq % 3));
        const entity = String(context.metadata.attributes?.key);
        log.apply(message.key, Number(context.metadata.attributes?.partition), String(context.metadata.attributes?.offset), message.body.seq);
        perEntity.set(entity, [...(perEntity.get(entity) ?? []), message.body.seq]);
        appliedBy.set(message.key, label);
        return ack();
      });
      consumers.push(consumer);
      await consumer.start();
      return consumer;
    };

    // One record per entity every 40 ms; seq counts each entity's records.
    const { producer, close } = await keyedProducer(kafka);
    const produced = new Set<string>();
    let round = 0;
    let producing = true;
    const production = (async () => {
      while (producing) {
        const batch = Array.from({ length: ENTITIES }, (_, e) => ({ idempotencyKey: `e${e}-s${round}`, key: `entity-${e}`, value: JSON.stringify({ id: `e${e}-s${round}`, seq: round }) }));
        await producer.send(topic, batch);
        for (const m of batch) produced.add(`${groupId}:${m.idempotencyKey}`);
        round++;
        await new Promise((resolve) => setTimeout(resolve, 40));
      }
    })();

    const oldSource = fastSource(kafka, { topics: [topic], groupId });
    const oldMember = await member('kafkajs', oldSource);
    await waitFor(() => log.applied.size >= 150, { what: 'the kafkajs member consuming', timeoutMs: 60_000 });
    const typeBefore = await groupType(groupId);

    const newSource = fastSource(row.make('twophase-client-migration-new'), { topics: [topic], groupId });
    await member('platformatic', newSource);
    await waitFor(() => newSource.assignment.length > 0 && oldSource.assignment.length > 0 && newSource.assignment.length + oldSource.assignment.length === 6, {
      what: 'both members owning partitions of the one group',
      timeoutMs: 60_000,
      intervalMs: 50,
    });
    // The broker converted the live classic group: the kafkajs member stays in it (classic
    // JoinGroup/SyncGroup/Heartbeat), the new one heartbeats with ConsumerGroupHeartbeat.
    const typeShared = await groupType(groupId);
    const appliedBeforeHandOver = log.applied.size;
    await waitFor(() => [...appliedBy.values()].filter((m) => m === 'platformatic').length >= 50, { what: 'the new member applying records', timeoutMs: 60_000 });

    await oldMember.stop();
    await waitFor(() => newSource.assignment.length === 6, { what: 'the new member owning all 6 partitions', timeoutMs: 60_000, intervalMs: 50 });
    const roundAtHandOver = round;
    await waitFor(() => round >= roundAtHandOver + 20, { what: 'more records produced after the kafkajs member left', timeoutMs: 60_000 });
    producing = false;
    await production;
    await close();

    await waitFor(async () => [...produced].every((k) => log.applied.has(k)) && (await topics.fullyCommitted(groupId, topic)), {
      what: 'every produced key applied and the group committed to the high watermarks',
      timeoutMs: 90_000,
      intervalMs: 200,
    });
    expect(log.duplicated()).toEqual([]);
    expect(violations.flat()).toEqual([]);
    expect(log.applied.size).toBe(produced.size);
    expect(log.applied.size).toBeGreaterThan(appliedBeforeHandOver);
    // Order: per partition, offsets applied in increasing order; per entity, its records in the order produced.
    const byPartition = new Map<number, bigint[]>();
    for (const entry of log.order) byPartition.set(entry.partition, [...(byPartition.get(entry.partition) ?? []), BigInt(entry.offset)]);
    for (const [partition, offsets] of byPartition) expect({ partition, ordered: offsets.every((o, i) => i === 0 || o > offsets[i - 1]!) }).toEqual({ partition, ordered: true });
    expect(perEntity.size).toBe(ENTITIES);
    for (const [entity, seqs] of perEntity) expect({ entity, seqs }).toEqual({ entity, seqs: Array.from({ length: round }, (_, i) => i) });
    expect(byPartition.size).toBe(6);
    expect(newSource.assignment.map((p) => p.partition).sort()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(new Set(appliedBy.values())).toEqual(new Set(['kafkajs', 'platformatic']));
    expect({ typeBefore, typeShared, typeAfter: await groupType(groupId) }).toEqual({ typeBefore: 'classic', typeShared: 'consumer', typeAfter: 'consumer' });
  });
});

describeEachClient(['kafka'], 'Kafka: a kafkajs member and a @platformatic/kafka classic member in one group', clientRows('platformatic-classic'), (row) => {
  const { kafka, topics, consumers } = kafkaSuite('twophase-client-mix');

  test('the broker refuses the classic @platformatic/kafka member (INCONSISTENT_GROUP_PROTOCOL): its start fails with KafkaGroupProtocolError naming the cause and the fixes; the kafkajs member keeps consuming', async () => {
    const topic = await topics.create('mix', 3);
    const groupId = unique('mix');
    const oldSource = fastSource(kafka, { topics: [topic], groupId });
    const oldMember = new TestConsumer({ name: groupId, claimer: new InMemoryClaimer(), source: oldSource }, async () => ack());
    consumers.push(oldMember);
    await oldMember.start();
    await waitFor(() => oldSource.assignment.length === 3, { what: 'the kafkajs member owning the partitions', timeoutMs: 60_000 });

    const newSource = fastSource(row.make('twophase-client-mix-new'), { topics: [topic], groupId });
    const newMember = new TestConsumer({ name: groupId, claimer: new InMemoryClaimer(), source: newSource }, async () => ack());
    const error = await newMember.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    await newMember.stop().catch(() => undefined);
    expect(error).toBeInstanceOf(KafkaGroupProtocolError);
    const refusal = error as KafkaGroupProtocolError;
    expect(refusal.code).toBe('GROUP_PROTOCOL_MISMATCH');
    expect(refusal.groupId).toBe(groupId);
    expect(refusal.retriable).toBe(true);
    expect(refusal.message).toContain(`group ${groupId}`);
    expect(refusal.message).toContain('INCONSISTENT_GROUP_PROTOCOL');
    expect(refusal.message).toContain('RoundRobinAssigner');
    expect(refusal.message).toContain("groupProtocol: 'consumer'");
    expect(refusal.message).toMatch(/session timeout/);
    expect(newSource.state).toBe('closed');
    expect(oldSource.assignment.length).toBe(3);
    expect(oldSource.isConsuming()).toBe(true);
  });

  test('a classic @platformatic/kafka member whose session ran out while a kafkajs member took the group: its rejoin is refused and the client port reports KafkaGroupProtocolError (no restart) instead of an uncaught exception ending the process', async () => {
    const topic = await topics.create('mix-rejoin', 3);
    const groupId = unique('mix-rejoin');
    // The classic member in a process of its own, so it can be frozen (SIGSTOP) past its session.
    const member = { client: row.name, clientId: 'classic-rejoin', groupId, topic, sessionTimeout: 6000 };
    const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, 'support', 'group-member-child.ts'), JSON.stringify(member)], {
      cwd: join(__dirname, '..', '..', '..'),
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, TS_NODE_TRANSPILE_ONLY: 'true' },
    });
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => void (output += chunk.toString()));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const admin = kafka.admin();
    await admin.connect();
    try {
      await waitFor(() => output.includes('joined') || child.exitCode !== null, { what: 'the classic member joined', timeoutMs: 60_000 });
      expect(child.exitCode).toBeNull();

      child.kill('SIGSTOP');
      await waitFor(async () => (await admin.describeGroups([groupId])).groups[0]?.state === 'Empty', { what: 'the broker dropped the frozen member (session timeout)', timeoutMs: 30_000, intervalMs: 250 });
      const oldSource = fastSource(kafka, { topics: [topic], groupId });
      const oldMember = new TestConsumer({ name: groupId, claimer: new InMemoryClaimer(), source: oldSource }, async () => ack());
      consumers.push(oldMember);
      await oldMember.start();
      await waitFor(() => oldSource.assignment.length === 3, { what: 'the kafkajs member owning the partitions', timeoutMs: 60_000 });

      child.kill('SIGCONT');
      await waitFor(() => output.includes('"crash"') || child.exitCode !== null, { what: 'the classic member reporting its refused rejoin', timeoutMs: 60_000, intervalMs: 100 });
      // The process lives on: the crash reached the port's listener, not the process's uncaught handler.
      expect(child.exitCode).toBeNull();
      const line = output.split('\n').find((l) => l.startsWith('{"crash"'));
      expect(line).toBeDefined();
      const crash = (JSON.parse(line!) as { crash: { name: string; code: string; groupId: string; message: string; restart: boolean } }).crash;
      expect(crash).toMatchObject({ name: 'KafkaGroupProtocolError', code: 'GROUP_PROTOCOL_MISMATCH', groupId, restart: false });
      expect(crash.message).toContain('INCONSISTENT_GROUP_PROTOCOL');
      expect(crash.message).toContain("groupProtocol: 'consumer'");
      expect(oldSource.assignment.length).toBe(3);
      expect(oldSource.isConsuming()).toBe(true);
    } finally {
      child.kill('SIGKILL');
      await exited;
      await admin.disconnect();
    }
  }, 180_000);
});
