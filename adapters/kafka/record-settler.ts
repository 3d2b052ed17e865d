/**
 * The settler of one dispatch of one Kafka record, and the record's fate as its dispatch ends.
 *
 * Kafka has no per-message ack: the settler records how the pipeline settled the record (a dead
 * letter is written first, through the source's dead-letter writer), and the partition worker
 * moves the partition's committable offset from that. A repeat settle is ignored (it would write
 * a second dead letter).
 */
import type { RejectInfo, RequeueCause, RequeueInfo, Settler } from '../../src';
import { type SharedTransaction } from '../../src/adapter-kit';
import type { KafkaRecord } from './client';
import { ChunkRolledBackError } from './errors';

/**
 * How a dispatch ended for its record: acked or dead-lettered (`settled`: its offset may be
 * committed), requeued (dispatched again in place), or not settled at all (`unsettled`: the
 * settle failed, e.g. a dead letter not written before a revoke or the shutdown deadline).
 */
export type RecordFate =
  | { readonly kind: 'ack' }
  | { readonly kind: 'reject' }
  | { readonly kind: 'requeue'; readonly delayMs: number; readonly cause: RequeueCause }
  | { readonly kind: 'unsettled' };

/** What a record's settler needs of its partition. */
export interface RecordSettlerHost {
  readonly topic: string;
  readonly partition: number;
  /** Writes the dead letter; resolves once the broker acknowledged it. */
  deadLetter(record: KafkaRecord, info: RejectInfo): Promise<void>;
  /** Counts a repeated settle, ignored. */
  repeatedSettle(): void;
}

const RESOLVED: Promise<void> = Promise.resolve();
export const ACKED: RecordFate = Object.freeze({ kind: 'ack' });
const REJECTED: RecordFate = Object.freeze({ kind: 'reject' });
export const UNSETTLED: RecordFate = Object.freeze({ kind: 'unsettled' });

/**
 * The settler of one dispatch of one record: records how the pipeline settled it (a dead letter
 * is written first). When the worker moves on is told by the submission, not by this settler.
 */
export class RecordSettler implements Settler {
  private settlement: RecordFate | undefined;
  /** Set when the record's claim shares its chunk's transaction: the ack waits for its COMMIT. */
  shared: SharedTransaction | undefined;
  /** True once a settle was called: a repeat is ignored (it would write a second dead letter). */
  private called = false;

  constructor(
    private readonly host: RecordSettlerHost,
    private readonly record: KafkaRecord,
  ) {}

  /** The record's fate, read once its dispatch ended (`settled` resolved). */
  get fate(): RecordFate {
    return this.settlement ?? UNSETTLED;
  }

  ack(): Promise<void> {
    if (this.repeated()) return RESOLVED;
    const shared = this.shared;
    if (!shared) {
      this.settlement = ACKED;
      return RESOLVED;
    }
    // The effect is durable only with the chunk's COMMIT, which waits for the later members (the
    // worker runs them already: this member's `handled` moment came with its recorded commit):
    // count the ack made only once the chunk committed.
    return shared.outcome.then((committed) => {
      if (!committed) throw new ChunkRolledBackError(this.host.topic, this.host.partition, this.record.offset);
      this.settlement = ACKED;
    });
  }

  requeue(delayMs: number, info: RequeueInfo): Promise<void> {
    if (this.repeated()) return RESOLVED;
    this.settlement = { kind: 'requeue', delayMs, cause: info.cause };
    return RESOLVED;
  }

  async reject(info: RejectInfo): Promise<void> {
    if (this.repeated()) return;
    await this.host.deadLetter(this.record, info);
    this.settlement = REJECTED;
  }

  private repeated(): boolean {
    if (!this.called) {
      this.called = true;
      return false;
    }
    this.host.repeatedSettle();
    return true;
  }
}
