/**
 * Errors of the Kafka adapter. All extend the core {@link TwophaseError}, so `isRetriable` and
 * `code` work as for core errors. Option problems are the core's {@link ConfigurationError}.
 */
import { TwophaseError, type TwophaseErrorCode } from '../../src';

/** Codes of the adapter's errors. */
export type KafkaErrorCode = 'DEAD_LETTER_FAILED' | 'PARTITION_REVOKED' | 'SOURCE_STOPPED' | 'CHUNK_ROLLED_BACK' | 'BROKER_UNAVAILABLE' | 'GROUP_PROTOCOL_MISMATCH';

/**
 * Base of the adapter's errors. The core's `TwophaseErrorCode` union does not list adapter codes;
 * the cast keeps the adapter's codes stable strings until the core opens the union.
 */
export class KafkaAdapterError extends TwophaseError {
  constructor(code: KafkaErrorCode, message: string, options?: { cause?: unknown; retriable?: boolean }) {
    super(code as unknown as TwophaseErrorCode, message, options);
  }
}

/**
 * A dead letter could not be written before the partition was revoked or the source stopped.
 * The offset was not committed: the record is delivered again (to this member or the partition's
 * next owner), and its claim, released before the dead-letter, lets it be handled again.
 */
export class DeadLetterError extends KafkaAdapterError {
  constructor(
    readonly topic: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super('DEAD_LETTER_FAILED', message, { cause: options?.cause, retriable: true });
  }
}

/**
 * A settle of a record whose partition this member no longer owns (a rebalance moved it, or the
 * source stopped or crashed). Nothing was sent to Kafka: the partition's current owner delivers
 * the record again and the claim decides (a committed key is skipped as a duplicate).
 */
export class PartitionRevokedError extends KafkaAdapterError {
  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly offset: string,
  ) {
    super('PARTITION_REVOKED', `settle of ${topic}[${partition}]@${offset} skipped: this member no longer owns the partition`, { retriable: true });
  }

  /** Left undone on purpose: the partition's next owner gets the record (see `IntendedRedelivery` in twophase/adapter-kit). */
  readonly intendedRedelivery = true as const;
}

/**
 * The ack of a record whose claim shares a chunk's transaction (see `SharedTransaction`) was not
 * made: the chunk's transaction rolled back, so the record's effect was not applied. Its offset
 * does not move; the worker runs the record again, in its own transaction.
 */
export class ChunkRolledBackError extends KafkaAdapterError {
  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly offset: string,
  ) {
    super('CHUNK_ROLLED_BACK', `ack of ${topic}[${partition}]@${offset} not made: the transaction its chunk shared rolled back; the record runs again`, { retriable: true });
  }

  /** Left undone on purpose: the record runs again in its own transaction (see `IntendedRedelivery` in twophase/adapter-kit). */
  readonly intendedRedelivery = true as const;
}

/**
 * `start()` could not reach any Kafka broker (wrong address, refused, unresolvable, timed out).
 * Names the brokers kafkajs tried and the network cause, from under kafkajs's retry errors. How
 * long it took is the kafkajs client's `retry` and `connectionTimeout`. Retriable.
 */
export class KafkaUnavailableError extends KafkaAdapterError {
  constructor(
    readonly brokers: readonly string[],
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super('BROKER_UNAVAILABLE', `could not reach the Kafka brokers ${brokers.length > 0 ? brokers.join(', ') : '(unknown)'}: ${reason}`, { cause: options?.cause, retriable: true });
  }
}

/**
 * The broker refused this member's join of a classic consumer group with
 * `INCONSISTENT_GROUP_PROTOCOL`: a member already in the group (a live one, or one killed whose
 * session has not timed out) offers none of the assignor names this member offers. kafkajs names
 * its assignor `RoundRobinAssigner` and @platformatic/kafka `roundrobin`, so members of the two
 * clients cannot share a classic group. Thrown by `KafkaSource.start()` (through `ConsumerBase.start()`)
 * on @platformatic/kafka with `groupProtocol: 'classic'`; the source is closed.
 *
 * Retriable: the same start succeeds once the group's other members are gone. The message names
 * the fixes: stop the other client's members first (or wait out a killed member's session
 * timeout), or start the new members with `groupProtocol: 'consumer'` (KIP-848), which the broker
 * lets join a classic group that has members (it converts the group; docs/kafka.md).
 */
export class KafkaGroupProtocolError extends KafkaAdapterError {
  constructor(
    /** The group whose join was refused. */
    readonly groupId: string,
    options?: { cause?: unknown },
  ) {
    super(
      'GROUP_PROTOCOL_MISMATCH',
      `the broker refused this member's join of consumer group ${groupId} (INCONSISTENT_GROUP_PROTOCOL): a member of the group offers none of this member's ` +
        'assignor names under the classic protocol (this @platformatic/kafka member offers roundrobin, a kafkajs member RoundRobinAssigner); ' +
        'a member that died counts until its session timeout ends. Fix: stop the group\'s members of the other client first (or wait out the session timeout ' +
        "of a killed one), or, for a rolling deploy from kafkajs, start the new members with groupProtocol: 'consumer' " +
        "(platformaticClient(connection, { groupProtocol: 'consumer' }); Kafka 4.0 or later, with the broker's group.consumer.migration.policy allowing upgrades, as its default does)",
      { cause: options?.cause, retriable: true },
    );
  }
}

/**
 * The {@link KafkaUnavailableError} for a kafkajs connection failure (a KafkaJSConnectionError,
 * alone or under KafkaJSNumberOfRetriesExceeded), or undefined for any other error.
 */
export function asUnavailable(error: unknown): KafkaUnavailableError | undefined {
  const brokers = new Set<string>();
  let reason: string | undefined;
  let connectionError = false;
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 10; e = (e as { cause?: unknown; originalError?: unknown }).cause ?? (e as { originalError?: unknown }).originalError, depth++) {
    const fields = e as Error & { broker?: unknown; code?: unknown };
    if (e.name === 'KafkaJSConnectionError') connectionError = true;
    if (typeof fields.broker === 'string') brokers.add(fields.broker);
    if (typeof fields.code === 'string' && /^E[A-Z]+$/.test(fields.code)) reason = e.message;
    else if (e.name === 'KafkaJSConnectionError' && reason === undefined) reason = e.message;
  }
  if (!connectionError) return undefined;
  return new KafkaUnavailableError([...brokers], reason ?? (error as Error).message, { cause: error });
}
