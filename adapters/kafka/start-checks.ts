/**
 * What a {@link KafkaSource} checks through one short-lived admin client before its consumer
 * exists: the source and dead-letter topics ({@link checkDeadLetterTopics}) and, with
 * `fromBeginning: false`, the partitions whose records the group would skip.
 */
import type { Logger } from '../../src';
import type { ClusterAdmin, KafkaClient } from './client';
import { checkDeadLetterTopics } from './dead-letter-topics';
import type { ResolvedKafkaSourceOptions } from './options';

type StartOptions = Pick<ResolvedKafkaSourceOptions, 'deadLetterTopicCheck' | 'topics' | 'deadLetterTopic' | 'groupId' | 'fromBeginning'>;

/**
 * Runs the start-up checks on one admin client, disconnected before it returns. No admin is
 * opened when `deadLetterTopicCheck` is `none` and `fromBeginning` is true.
 * @throws what {@link checkDeadLetterTopics} throws; the start-position read never throws
 */
export async function runStartChecks(client: KafkaClient, options: StartOptions, logger: Logger): Promise<void> {
  if (options.deadLetterTopicCheck === 'none' && options.fromBeginning) return;
  const admin = client.admin();
  try {
    await admin.connect();
    await checkDeadLetterTopics(admin, options, logger);
    if (!options.fromBeginning) await noteStartAtLogEnd(admin, options, logger);
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/**
 * With `fromBeginning: false`, a partition the group has no committed offset for starts at the
 * log end (Kafka's `auto.offset.reset=latest`): the records already in it are never read by this
 * group. One info line per topic names those partitions, how many records they hold and the
 * option. Read before this member joins (OffsetFetch and ListOffsets); a member of the same group
 * that commits in between makes the line stale, never wrong about records skipped by nobody. A
 * failed read is logged at debug and changes nothing.
 */
export async function noteStartAtLogEnd(admin: ClusterAdmin, options: Pick<StartOptions, 'topics' | 'groupId'>, logger: Logger): Promise<void> {
  try {
    for (const topic of options.topics) {
      const [committed, marks] = await Promise.all([admin.committedOffsets(options.groupId, topic), admin.watermarks(topic)]);
      const started = new Set(committed.filter((c) => BigInt(c.offset) >= 0n).map((c) => c.partition));
      const skipped = marks.filter((m) => !started.has(m.partition) && BigInt(m.high) > BigInt(m.low));
      if (skipped.length === 0) continue;
      const partitions = skipped.map((m) => m.partition);
      const records = skipped.reduce((sum, m) => sum + (BigInt(m.high) - BigInt(m.low)), 0n);
      const plural = partitions.length !== 1;
      logger.info(
        { groupId: options.groupId, topic, partitions, records: records.toString(), fromBeginning: false },
        `twophase/kafka: group ${options.groupId} has no committed offset for ${topic} partition${plural ? 's' : ''} ${partitions.join(', ')} ` +
          `(${records} record${records === 1n ? '' : 's'} in ${plural ? 'them' : 'it'}): with fromBeginning: false ${plural ? 'they start' : 'it starts'} at the log end, ` +
          'so those records are skipped; set fromBeginning: true to read them',
      );
    }
  } catch (error) {
    logger.debug({ err: error, groupId: options.groupId }, 'twophase/kafka: reading the committed offsets and watermarks at start failed');
  }
}
