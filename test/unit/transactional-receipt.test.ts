/**
 * The core's transactional seam (Receipt.transaction): the claimer's per-delivery resource
 * reaches the handler as ctx.transaction; the delivery is acked only after such a receipt's
 * commit succeeded (no early `handled` signal); a failed commit means the effect was rolled back,
 * so the delivery is requeued, never acked. Receipts without a transaction keep today's rule.
 */
import { Pool } from 'pg';
import { ack, ConfigurationError, InMemoryClaimer, type HandlerContext, type JsonValue, type MessageSource, type Receipt, TwophaseError } from '../../src';
import { GatedClaimer } from '../../adapters/gated';
import { Kafka } from 'kafkajs';
import { KafkaSource } from '../../adapters/kafka';
import { PostgresClaimer } from '../../adapters/postgres';
import Redis from 'ioredis';
import { RedisClaimer } from '../../adapters/redis';
import { RabbitMqSource } from '../../adapters/rabbitmq';
import { FnConsumer, fastOptions, recordingDelivery, WrappingClaimer } from './helpers';

const TX = { id: 'tx-1' };

/** Receipts carry a transaction; commits fail while `failCommits` is set. */
class TransactionalClaimer extends WrappingClaimer {
  failCommits = false;
  protected wrap(receipt: Receipt): Receipt {
    const commit = async (value?: JsonValue) => {
      if (this.failCommits) throw new TwophaseError('TRANSACTION_ABORTED', 'rolled back');
      return receipt.commit(value);
    };
    return { ...receipt, commit, transaction: TX };
  }
}

describe('Receipt.transaction (transactional claimers)', () => {
  test('the handler gets the receipt’s transaction as ctx.transaction; other claimers give undefined', async () => {
    const seen: unknown[] = [];
    const handler = async (_m: unknown, ctx: HandlerContext) => {
      seen.push(ctx.transaction);
      return ack();
    };
    await new FnConsumer(fastOptions(new TransactionalClaimer(new InMemoryClaimer())), handler).dispatch(recordingDelivery({ key: 'a' }));
    await new FnConsumer(fastOptions(new InMemoryClaimer()), handler).dispatch(recordingDelivery({ key: 'a' }));
    expect(seen).toEqual([TX, undefined]);
  });

  test('a failed commit of a transactional receipt requeues (the effect was rolled back); never acks', async () => {
    const claimer = new TransactionalClaimer(new InMemoryClaimer());
    claimer.failCommits = true;
    const consumer = new FnConsumer(fastOptions(claimer), async () => ack({ v: 1 }));
    const delivery = recordingDelivery({ key: 'pay-1' });
    const result = await consumer.dispatch(delivery);
    expect(result).toMatchObject({ action: 'requeue', outcome: 'commit_failed', handled: true });
    expect(delivery.calls.map((c) => c.op)).toEqual(['requeue']);
    // the redelivery claims again (the attempt was counted) and, once commits work, acks
    claimer.failCommits = false;
    const again = recordingDelivery({ key: 'pay-1' });
    expect(await consumer.dispatch(again)).toMatchObject({ action: 'ack', outcome: 'committed', attempt: 2 });
  });

  test('a failed transactional commit is logged once, as transaction_rolled_back (not also as a handler failure)', async () => {
    const claimer = new TransactionalClaimer(new InMemoryClaimer());
    claimer.failCommits = true;
    const lines: { level: string; msg?: string; obj: Record<string, unknown> }[] = [];
    const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, msg, obj: obj as Record<string, unknown> });
    const logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
    const consumer = new FnConsumer({ ...fastOptions(claimer), logger }, async () => ack({ v: 1 }));
    await consumer.dispatch(recordingDelivery({ key: 'pay-9' }));
    const failures = lines.filter((l) => l.level === 'warn' || l.level === 'error');
    expect(failures.map((l) => [l.level, l.obj.reason])).toEqual([['error', 'transaction_rolled_back']]);
    expect(failures[0]!.obj).toMatchObject({ destination: 'requeue', attempt: 1 });
  });

  test('the handled hook waits for a transactional commit; a failed one never signals handled', async () => {
    const claimer = new TransactionalClaimer(new InMemoryClaimer());
    const consumer = new FnConsumer(fastOptions(claimer), async () => ack());
    const order: string[] = [];
    claimer.failCommits = true;
    await consumer.dispatch(recordingDelivery({ key: 'b' }, { handled: () => order.push('handled'), onSettle: (c) => order.push(c.op) }));
    expect(order).toEqual(['requeue']);
  });

  test('without a transaction, a failed commit still acks (the effect happened): unchanged rule', async () => {
    class FailingCommits extends WrappingClaimer {
      protected wrap(receipt: Receipt): Receipt {
        return { ...receipt, commit: async () => Promise.reject(new TwophaseError('X', 'store down')) };
      }
    }
    const consumer = new FnConsumer(fastOptions(new FailingCommits(new InMemoryClaimer())), async () => ack());
    const delivery = recordingDelivery({ key: 'c' });
    expect(await consumer.dispatch(delivery)).toMatchObject({ action: 'ack', outcome: 'commit_failed' });
  });
});

describe('failOpen with a transactional claimer', () => {
  class DeclaredTransactional extends TransactionalClaimer {
    readonly transactional = true;
  }

  test('a claimer that declares itself transactional: failOpen: true is refused at construction', () => {
    expect(() => new FnConsumer({ ...fastOptions(new DeclaredTransactional(new InMemoryClaimer())), failOpen: true }, async () => ack())).toThrow(ConfigurationError);
    expect(() => new FnConsumer({ ...fastOptions(new DeclaredTransactional(new InMemoryClaimer())), failOpen: true }, async () => ack())).toThrow(/failOpen cannot be used with a transactional claimer/);
    // failOpen off, or a claimer that is not transactional: accepted
    expect(() => new FnConsumer(fastOptions(new DeclaredTransactional(new InMemoryClaimer())), async () => ack())).not.toThrow();
    expect(() => new FnConsumer({ ...fastOptions(new InMemoryClaimer()), failOpen: true }, async () => ack())).not.toThrow();
  });

  test('PostgresClaimer: refused in transactional mode, accepted in standalone mode (no connection is opened)', () => {
    const pool = new Pool({ host: '127.0.0.1', port: 1 });
    const transactional = new PostgresClaimer({ pool }, { mode: 'transactional' });
    const standalone = new PostgresClaimer({ pool });
    expect(transactional.transactional).toBe(true);
    expect(standalone.transactional).toBe(false);
    expect(() => new FnConsumer({ ...fastOptions(transactional), failOpen: true }, async () => ack())).toThrow(ConfigurationError);
    expect(() => new FnConsumer({ ...fastOptions(standalone), failOpen: true }, async () => ack())).not.toThrow();
  });

  test('GatedClaimer takes its truth\'s transactional flag: failOpen refused in front of a transactional truth', () => {
    const pool = new Pool({ host: '127.0.0.1', port: 1 });
    const gated = (truth: PostgresClaimer) => new GatedClaimer({ gate: new InMemoryClaimer(), truth });
    expect(gated(new PostgresClaimer({ pool }, { mode: 'transactional' })).transactional).toBe(true);
    expect(gated(new PostgresClaimer({ pool })).transactional).toBe(false);
    expect(() => new FnConsumer({ ...fastOptions(gated(new PostgresClaimer({ pool }, { mode: 'transactional' }))), failOpen: true }, async () => ack())).toThrow(
      /failOpen cannot be used with a transactional claimer/,
    );
  });
});

describe('per-chunk transactions need a source that adopts them or dispatches a batch together', () => {
  const pool = new Pool({ host: '127.0.0.1', port: 1 });
  const chunked = () => new PostgresClaimer({ pool }, { mode: 'transactional', transactionBatch: 'per-chunk' });
  const consumer = (claimer: PostgresClaimer, source: MessageSource) => new FnConsumer({ ...fastOptions(claimer), source }, async () => ack());

  test('a source that claims ahead, neither adopting the chunk nor dispatching a batch together, is refused at construction', () => {
    expect(chunked().sharesTransactions).toBe(true);
    const rabbit = new RabbitMqSource({ url: 'amqp://localhost', queue: 'q', batchClaims: true });
    // The same source without the trait that lets it run a shared transaction's members together.
    const sequential = Object.create(rabbit, { dispatchesBatchesTogether: { value: false } }) as MessageSource;
    expect(() => consumer(chunked(), sequential)).toThrow(ConfigurationError);
    expect(() => consumer(chunked(), sequential)).toThrow(/claims ahead without adopting it/);
  });

  test('accepted: RabbitMQ with or without claims ahead (a claim window runs together), the Kafka source (it adopts the chunk), and per-record transactions', () => {
    expect(() => consumer(chunked(), new RabbitMqSource({ url: 'amqp://localhost', queue: 'q', batchClaims: true }))).not.toThrow();
    expect(() => consumer(chunked(), new RabbitMqSource({ url: 'amqp://localhost', queue: 'q' }))).not.toThrow();
    expect(() => consumer(chunked(), new KafkaSource({ kafka: new Kafka({ brokers: ['127.0.0.1:1'] }) }, { topics: ['t'], groupId: 'g' }))).not.toThrow();
    const perRecord = new PostgresClaimer({ pool }, { mode: 'transactional' });
    expect(perRecord.sharesTransactions).toBe(false);
    expect(() => consumer(perRecord, new RabbitMqSource({ url: 'amqp://localhost', queue: 'q', batchClaims: true }))).not.toThrow();
  });
});

describe('GatedClaimer: the transaction is the truth\'s', () => {
  const pool = new Pool({ host: '127.0.0.1', port: 1 });
  afterAll(() => pool.end());

  test('a transactional or per-chunk claimer as the gate is refused (gate and truth swapped): the handler would never run in its transaction', () => {
    const swapped = () => new GatedClaimer({ gate: new PostgresClaimer({ pool }, { mode: 'transactional' }), truth: new InMemoryClaimer() });
    expect(swapped).toThrow(ConfigurationError);
    expect(swapped).toThrow(/gate is a transactional claimer.*PostgresClaimer \{ mode: 'transactional' \} goes in truth; gate and truth swapped\?/);
    const perChunk = () => new GatedClaimer({ gate: new PostgresClaimer({ pool }, { mode: 'transactional', transactionBatch: 'per-chunk' }), truth: new InMemoryClaimer() });
    expect(perChunk).toThrow(/gate is a transactional claimer/);
    expect(() => new GatedClaimer({ gate: new InMemoryClaimer(), truth: new PostgresClaimer({ pool }, { mode: 'transactional' }) })).not.toThrow();
  });

  test('requireTransaction with a standalone truth: the refusal names what the claimer is and that the truth must be transactional', () => {
    const gated = new GatedClaimer({ gate: new InMemoryClaimer(), truth: new PostgresClaimer({ pool }) });
    expect(() => new FnConsumer({ ...fastOptions(gated), requireTransaction: true }, async () => ack())).toThrow(
      /claimer gives no transaction \(it says: store gated, gate in_memory, truth postgresql, truthMode standalone, truthSchema twophase\).*for a GatedClaimer, a transactional truth/,
    );
  });

  test('describe() names both parts for the consumer\'s start line', () => {
    const gated = new GatedClaimer({ gate: new InMemoryClaimer(), truth: new PostgresClaimer({ pool }, { mode: 'transactional', schema: 'billing' }) });
    expect(gated.describe()).toEqual({ store: 'gated', gate: 'in_memory', truth: 'postgresql', truthMode: 'transactional', truthSchema: 'billing' });
    const redis = new Redis({ lazyConnect: true });
    try {
      const withRedis = new GatedClaimer({ gate: new RedisClaimer({ redis }, { prefix: 'pay' }), truth: new PostgresClaimer({ pool }, { mode: 'transactional' }) });
      expect(withRedis.describe()).toEqual({ store: 'gated', gate: 'redis', gatePrefix: 'pay', truth: 'postgresql', truthMode: 'transactional', truthSchema: 'twophase' });
    } finally {
      redis.disconnect();
    }
  });
});
