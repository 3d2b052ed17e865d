/**
 * `ctx.outbox`: stages messages into the run's transaction, with deterministic ids.
 */
import { OutboxNotAvailableError } from '../util/errors';
import { outboxMessageId, randomOutboxMessageId } from './outbox-id';
import { type OutboxMessage, toOutboxEnvelope } from './outbox-message';
import type { OutboxWriter } from './ports';

/**
 * Stages messages in the transaction of the current run: they are published by an
 * `OutboxRelay` once that transaction committed, and never if it rolled back.
 */
export interface Outbox {
  /**
   * Stages one message; resolves with its outbox id once the row is written in the transaction
   * (not yet committed). The id is the message's `idempotency-key` header and broker message id.
   * @throws InvalidOutboxMessageError for a malformed message (nothing staged)
   * @throws OutboxNotAvailableError when the run has no transaction to stage into
   * @throws OutboxTransactionError when the transaction already ended
   */
  stage(message: OutboxMessage): Promise<string>;
  /** Stages several messages in one statement, in order; resolves with their ids. Same errors as {@link Outbox.stage}. */
  stageMany(messages: readonly OutboxMessage[]): Promise<string[]>;
  /**
   * The ids staged so far by this run, in order: a new array at each read, so a handler can return
   * it in its result (a `runOnce` result is a JSON value).
   */
  readonly stagedIds: string[];
}

/**
 * An {@link Outbox} over a writer. Ids come from `scope` and each message's position in call
 * order (`outboxMessageId`), or are random without a scope. Positions are taken when `stage` is
 * called, before any await, so concurrent calls keep their call order.
 */
export class ScopedOutbox implements Outbox {
  private position = 0;
  private readonly ids: string[] = [];

  constructor(
    private readonly writer: OutboxWriter,
    private readonly scope: string | undefined,
  ) {}

  get stagedIds(): string[] {
    return [...this.ids];
  }

  async stage(message: OutboxMessage): Promise<string> {
    const [id] = await this.stageMany([message]);
    return id!;
  }

  async stageMany(messages: readonly OutboxMessage[]): Promise<string[]> {
    const envelopes = messages.map((message) => toOutboxEnvelope(this.nextId(), message));
    await this.writer.stage(envelopes);
    const ids = envelopes.map((e) => e.id);
    this.ids.push(...ids);
    return ids;
  }

  private nextId(): string {
    const position = this.position++;
    return this.scope === undefined ? randomOutboxMessageId() : outboxMessageId(this.scope, position);
  }
}

/** The `ctx.outbox` of a run without a transaction: every call rejects with the fix. */
export class UnavailableOutbox implements Outbox {
  constructor(private readonly why: string) {}

  get stagedIds(): string[] {
    return [];
  }

  stage(): Promise<string> {
    return Promise.reject(this.error());
  }

  stageMany(): Promise<string[]> {
    return Promise.reject(this.error());
  }

  private error(): OutboxNotAvailableError {
    return new OutboxNotAvailableError(
      `ctx.outbox cannot stage here: ${this.why}. Stage with a transactional claimer (new PostgresClaimer({ pool }, { mode: 'transactional' })), ` +
        'or into a transaction of your own with stageOutbox(client, messages) from twophase/postgres',
    );
  }
}
