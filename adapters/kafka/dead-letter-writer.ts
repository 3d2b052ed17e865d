/**
 * The dead-letter writer of a {@link KafkaSource}: a reject becomes a copy of the record on
 * `<topic>.dlq` (or the configured `deadLetterTopic`), written with acks = all and headers naming
 * the original topic, partition, offset, group, reason and attempts. Only once the broker
 * acknowledged the copy does the record count as settled, so its offset may be committed.
 *
 * A failed write is retried with `deadLetterBackoff` while the partition stays this member's
 * (the partition waits meanwhile: nothing after the record is dispatched, nothing is skipped).
 * It gives up with {@link PartitionRevokedError} when the partition is revoked or the source
 * crashed (the next owner gets the record again), and with {@link DeadLetterError} when a
 * shutdown's deadline passed.
 */
import type { Logger, RejectInfo } from '../../src';
import { retry } from '../../src/adapter-kit';
import type { KafkaRecord, RecordProducer } from './client';
import { DeadLetterError, PartitionRevokedError } from './errors';
import { deadLetterRecord } from './headers';
import type { ResolvedKafkaSourceOptions } from './options';
import type { PartitionWorker } from './partition-worker';

/** What the writer needs from its source. */
export interface DeadLetterHost {
  readonly logger: Logger;
  /** The connected dead-letter producer, or undefined once disconnected. */
  producer(): RecordProducer | undefined;
  /** True once the source crashed: nothing more is written. */
  crashed(): boolean;
  /** While stopping, the Unix ms after which a failed write gives up; undefined otherwise. */
  stopDeadline(): number | undefined;
  /** A dead letter was acknowledged by the broker (for counters and events). */
  written(worker: PartitionWorker, record: KafkaRecord, deadLetterTopic: string, info: RejectInfo): void;
  /** One write attempt failed (already logged). */
  failed(): void;
}

type WriterOptions = Pick<ResolvedKafkaSourceOptions, 'deadLetterTopic' | 'groupId' | 'deadLetterTimeoutMs' | 'deadLetterBackoff'>;

export class DeadLetterWriter {
  constructor(
    private readonly options: WriterOptions,
    private readonly host: DeadLetterHost,
  ) {}

  /**
   * Writes the dead letter of `record` and resolves once the broker acknowledged it.
   * @throws PartitionRevokedError when the partition was revoked or the source crashed first
   * @throws DeadLetterError when the source is stopping and its deadline passed
   */
  async write(worker: PartitionWorker, record: KafkaRecord, info: RejectInfo): Promise<void> {
    const topic = this.options.deadLetterTopic(worker.topic);
    const copy = deadLetterRecord(record, { topic: worker.topic, partition: worker.partition, groupId: this.options.groupId }, info, Date.now());
    const logger = this.host.logger;
    const revoked = () => new PartitionRevokedError(worker.topic, worker.partition, record.offset);
    const final = (error: unknown) => error instanceof PartitionRevokedError || error instanceof DeadLetterError;
    try {
      await retry(
        async (attempt) => {
          const producer = this.host.producer();
          if (worker.reason === 'revoked' || worker.reason === 'crashed' || this.host.crashed() || !producer) throw revoked();
          try {
            await producer.send({ topic, records: [copy], acks: -1, timeoutMs: this.options.deadLetterTimeoutMs });
          } catch (error) {
            if ((error as { retriable?: unknown } | undefined)?.retriable === false) {
              // The broker refuses this record for good (for example MESSAGE_TOO_LARGE: the copy with
              // the reason headers is over the dead-letter topic's max.message.bytes). Skipping it
              // would lose it, so the partition keeps waiting, and says why loudly.
              logger.error(
                { err: error, topic, attempt, offset: record.offset, errorType: (error as { type?: unknown }).type },
                'twophase/kafka: the dead-letter topic refuses this record and will until its configuration changes; the partition waits (nothing is skipped)',
              );
            } else {
              logger.warn({ err: error, topic, attempt, offset: record.offset }, 'twophase/kafka: writing a dead letter failed; retrying (the partition waits)');
            }
            this.host.failed();
            const deadline = this.host.stopDeadline();
            if (deadline !== undefined && Date.now() > deadline) {
              throw new DeadLetterError(topic, `dead letter of ${worker.topic}[${worker.partition}]@${record.offset} not written before the shutdown deadline`, { cause: error });
            }
            throw error;
          }
          this.host.written(worker, record, topic, info);
        },
        // Every failed write is retried (the partition waits) until revoked or past the stop deadline.
        { backoff: this.options.deadLetterBackoff, signal: worker.revokedSignal, retryIf: (error) => !final(error) },
      );
    } catch (error) {
      // Otherwise a pause was cut short: the partition was revoked or the source crashed.
      throw final(error) ? error : revoked();
    }
  }
}
