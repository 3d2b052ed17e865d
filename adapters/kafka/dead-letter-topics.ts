/**
 * The start-up check of a {@link KafkaSource}'s topics: every source topic must exist, and each
 * one's dead-letter topic must exist (`deadLetterTopicCheck: 'exists'`) or is created with the
 * source topic's partition count (`'create'`, the default); `'none'` skips the check.
 */
import { ConfigurationError, type Logger } from '../../src';
import type { ClusterAdmin } from './client';
import type { ResolvedKafkaSourceOptions } from './options';

type CheckOptions = Pick<ResolvedKafkaSourceOptions, 'deadLetterTopicCheck' | 'topics' | 'deadLetterTopic'>;

/**
 * Checks (or creates) the dead-letter topics through `admin` (connected; the caller disconnects it).
 * @throws ConfigurationError when a source topic is missing, or a dead-letter topic is missing
 *   and the check is `exists`
 * @throws the client's error when the broker cannot be reached
 */
export async function checkDeadLetterTopics(admin: ClusterAdmin, options: CheckOptions, logger: Logger): Promise<void> {
  if (options.deadLetterTopicCheck === 'none') return;
  const existing = new Set(await admin.listTopics());
  // A missing source topic: subscribing would fail later with a protocol error naming no
  // topic, and 'create' would make a dead-letter topic for a topic that is not there.
  const absent = options.topics.filter((topic) => !existing.has(topic));
  if (absent.length > 0) {
    throw new ConfigurationError(
      `source topic(s) missing: ${absent.map((t) => `"${t}"`).join(', ')}; create them first (for example kafka-topics.sh --create --topic ${absent[0]} ` +
        "--partitions <n>). deadLetterTopicCheck: 'create' creates dead-letter topics only, never source topics",
    );
  }
  const wanted = options.topics.map((topic) => ({ topic, dlq: options.deadLetterTopic(topic) }));
  const missing = wanted.filter((w) => !existing.has(w.dlq));
  if (missing.length === 0) return;
  if (options.deadLetterTopicCheck === 'exists') {
    throw new ConfigurationError(
      `dead-letter topic(s) missing: ${missing.map((m) => `"${m.dlq}" (for "${m.topic}")`).join(', ')}; ` +
        "create them, or set deadLetterTopicCheck: 'create' (or 'none' to skip this check)",
    );
  }
  const sources = missing.map((m) => m.topic);
  const counts = await admin.partitionCounts(sources);
  await admin.createTopics(missing.map((m) => ({ topic: m.dlq, numPartitions: counts[m.topic] ?? 1 })));
  logger.info({ topics: missing.map((m) => m.dlq) }, 'twophase/kafka: created dead-letter topics');
}
