/**
 * Issue 12 item 3 with a real lost reply: a loopback TCP proxy lets the commit (or release)
 * script run on the shared Redis and then resets the client's connection instead of forwarding
 * the answer. The receipt must recognise its own landed commit: the consumer reports `committed`
 * (not `lease_lost`), a release after it is ReceiptStateError (never a silent success), and the
 * key stays done.
 */
import Redis, { type RedisOptions } from 'ioredis';
import { ack, ClaimerUnavailableError, type ClaimResult, ConsumerBase, type Disposition, ReceiptStateError, silentLogger } from '../../../src';
import { RedisClaimer } from '../../../adapters/redis';
import { SCRIPTS } from '../../../adapters/redis/script-loader';
import { describeWithServices } from '../../support/services';
import { ManualSource, recordingDelivery } from '../../unit/helpers';
import { deleteMatching, SHARED_REDIS, uniquePrefix } from './support/redis-helpers';
import { waitFor } from '../../support/wait';
import { ReplyResetProxy } from './support/reply-reset-proxy';

const opts = { leaseTtlMs: 10_000, doneTtlMs: 60_000 };

function acquired(result: ClaimResult) {
  if (result.state !== 'acquired') throw new Error(`expected acquired, got ${result.state}`);
  return result;
}

class AckingConsumer extends ConsumerBase<unknown> {
  runs = 0;
  handle(): Disposition {
    this.runs++;
    return ack({ paid: true });
  }
}

describeWithServices(['redis'], 'RedisClaimer: a commit whose reply was lost (real connection reset)', () => {
  let proxy: ReplyResetProxy;
  let client: Redis;
  let claimer: RedisClaimer;
  let prefix: string;

  /** ioredis resends nothing after the reset here, so the receipt sees the lost reply itself. */
  async function setup(clientOptions: RedisOptions = {}, coalesce = false) {
    proxy = new ReplyResetProxy(SHARED_REDIS.host, SHARED_REDIS.port);
    const port = await proxy.listen();
    client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => 50, autoResendUnfulfilledCommands: false, ...clientOptions });
    prefix = uniquePrefix('lost-reply');
    claimer = new RedisClaimer({ redis: client, logger: silentLogger }, { prefix, coalesce });
    await claimer.ready();
  }

  afterEach(async () => {
    await claimer.close();
    await deleteMatching(client, `${prefix}:*`).catch(() => undefined);
    await client.quit().catch(() => client.disconnect());
    await proxy.close();
  });

  test.each([
    ['no coalescing', false],
    ['coalescing (default)', true],
  ])('the consumer reports committed, not lease_lost; a redelivery is a done duplicate (%s)', async (_label, coalesce) => {
    await setup({}, coalesce);
    const consumer = new AckingConsumer({ name: 'pay', claimer, source: new ManualSource(), logger: silentLogger, commitDeadlineMs: 5_000 });
    proxy.dropReplyTo(SCRIPTS.commit.sha);
    const result = await consumer.dispatch(recordingDelivery({ key: 'order-1' }));
    expect(proxy.resets).toBe(1);
    expect(result).toMatchObject({ action: 'ack', outcome: 'committed' });
    const again = recordingDelivery({ key: 'order-1' });
    expect(await consumer.dispatch(again)).toMatchObject({ outcome: 'done_duplicate' });
    expect(consumer.runs).toBe(1);
  });

  test('a release after the commit landed (reply lost) is ReceiptStateError; the key stays done with its result', async () => {
    await setup();
    const r = acquired(await claimer.claim('order-2', opts));
    proxy.dropReplyTo(SCRIPTS.commit.sha);
    await expect(r.receipt.commit({ n: 2 })).rejects.toBeInstanceOf(ClaimerUnavailableError);
    expect(proxy.resets).toBe(1);
    await waitFor(() => client.status === 'ready');
    await expect(r.receipt.release()).rejects.toBeInstanceOf(ReceiptStateError);
    const again = await claimer.claim('order-2', opts);
    expect(again.state).toBe('done');
    expect(again.state === 'done' && again.result).toEqual({ n: 2 });
  });

  test('with ioredis resending the script after the reconnect (its default), the commit is still committed', async () => {
    await setup({ autoResendUnfulfilledCommands: true });
    const r = acquired(await claimer.claim('order-3', opts));
    proxy.dropReplyTo(SCRIPTS.commit.sha);
    let first: unknown;
    await r.receipt.commit().catch((error: unknown) => (first = error));
    if (first !== undefined) {
      expect(first).toBeInstanceOf(ClaimerUnavailableError);
      await waitFor(() => client.status === 'ready');
      await expect(r.receipt.commit()).resolves.toBeUndefined();
    }
    expect(proxy.resets).toBe(1);
    expect((await claimer.claim('order-3', opts)).state).toBe('done');
  });
});
