/**
 * End to end on RabbitMQ: two consumers on one queue with a GatedClaimer (a RedisClaimer gate on
 * a private redis-server, a transactional PostgresClaimer truth). Duplicates are published
 * concurrently before, during and after a Redis outage: every key is booked exactly once in the
 * ledger (written through `ctx.transaction`), every duplicate is acked with the stored result, and
 * after the outage the duplicates are answered by the gate again.
 */
import Redis from 'ioredis';
import type { ConsumerOptions } from '../../../src';
import { GatedClaimer } from '../../../adapters/gated';
import { PostgresClaimer } from '../../../adapters/postgres';
import { RedisClaimer } from '../../../adapters/redis';
import { describeWithServices } from '../../support/services';
import { Harness } from '../rabbitmq/support/harness';
import { waitFor } from '../../support/wait';
import { silentLogger, uniquePrefix } from '../redis/support/redis-helpers';
import { RedisServerProcess } from '../redis/support/redis-process';
import { type InboxFixture, InboxConsumer, inboxFixture, ledgerHandler } from './support/inbox-fixture';

describeWithServices(['rabbitmq', 'postgres', 'redis'], 'GatedClaimer end to end: RabbitMQ + Redis gate + PostgreSQL inbox', () => {
  let h: Harness;
  let f: InboxFixture;
  let server: RedisServerProcess;
  const clients: Redis[] = [];
  const gates: RedisClaimer[] = [];
  const consumers: InboxConsumer[] = [];

  beforeEach(async () => {
    h = new Harness();
    await h.admin.open();
    f = await inboxFixture('rgated');
    server = await RedisServerProcess.start();
  }, 30_000);
  afterEach(async () => {
    for (const c of consumers.splice(0)) await c.stop().catch(() => undefined);
    for (const g of gates.splice(0)) await g.close();
    for (const c of clients.splice(0)) c.disconnect();
    await server.destroy();
    await h.cleanup();
    await f.cleanup();
  });

  test('duplicates before, during and after a Redis outage: one ledger row per key, every duplicate acked with the stored result', async () => {
    const queue = h.queue('gated-e2e');
    const prefix = uniquePrefix('rgated');
    const replies: unknown[] = [];
    class Replying extends InboxConsumer {
      protected override onDuplicate(_m: unknown, result: unknown): void {
        replies.push(result);
      }
    }
    const claimers: GatedClaimer[] = [];
    const make = (): InboxConsumer => {
      const client = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true, retryStrategy: () => 100 });
      clients.push(client);
      const gate = new RedisClaimer({ redis: client, logger: silentLogger }, { prefix, operationTimeoutMs: 200 });
      gates.push(gate);
      const truth = new PostgresClaimer({ pool: f.pool, logger: silentLogger }, { schema: f.schema, mode: 'transactional' });
      const claimer = new GatedClaimer({ gate, truth, logger: silentLogger }, { gateRetryMs: 200 });
      claimers.push(claimer);
      const options: ConsumerOptions = { name: 'gated', claimer, source: h.source({ queue }), concurrency: 5, leaseTtlMs: 5000, busyRequeueDelayMs: 50, logger: h.logger };
      return new Replying(options, ledgerHandler(f.ledger));
    };
    for (let i = 0; i < 2; i++) {
      const c = make();
      consumers.push(c);
      await c.start();
    }
    const publish = (from: number, keys: number, copies: number) =>
      Promise.all(
        Array.from({ length: keys * copies }, (_, n) =>
          h.admin.publish('', queue, { n }, { messageId: `m-${from}-${n}`, headers: { 'idempotency-key': `pay-${from + (n % keys)}` } }),
        ),
      );
    const settled = (keys: number, duplicates: number, what: string) =>
      waitFor(async () => (await f.counts()).size === keys && replies.length === duplicates && (await h.admin.messageCount(queue)) === 0, { what: what, timeoutMs: 60_000 });

    // 1. Redis up: 20 keys, 3 copies each.
    await publish(0, 20, 3);
    await settled(20, 40, 'phase 1 booked, duplicates acked');
    const gateAnswers = claimers.reduce((n, c) => n + c.stats.gateAnswers, 0);
    expect(gateAnswers).toBeGreaterThan(0);

    // 2. Redis down: 20 new keys, 3 copies each, and the first 20 again.
    await server.stop();
    await publish(20, 20, 3);
    await publish(0, 20, 1);
    await settled(40, 40 + 40 + 20, 'phase 2 booked on PostgreSQL alone');
    expect(claimers.some((c) => c.stats.fallbackClaims > 0)).toBe(true);

    // 3. Redis back (empty): every key again; answered from PostgreSQL, repopulated, then by the gate.
    await server.startAgain();
    await waitFor(() => clients.every((c) => c.status === 'ready'), { what: 'gate clients reconnected', timeoutMs: 10_000 });
    const answersBefore = claimers.reduce((n, c) => n + c.stats.gateAnswers, 0);
    await publish(0, 40, 2);
    await settled(40, 100 + 80, 'phase 3 duplicates acked');
    // Back on the gate without a restart: duplicates are answered by Redis again. A claimer tries
    // the gate again only on a claim made `gateRetryMs` after it went down, so keep duplicates
    // coming until one is answered by the gate.
    let probe = 0;
    await waitFor(
      async () => {
        await h.admin.publish('', queue, { n: 0 }, { messageId: `m-probe-${probe++}`, headers: { 'idempotency-key': 'pay-0' } });
        return claimers.reduce((n, c) => n + c.stats.gateAnswers, 0) > answersBefore;
      },
      { what: 'a duplicate answered by the gate again', timeoutMs: 20_000, intervalMs: 200 },
    );
    await waitFor(async () => (await h.admin.messageCount(queue)) === 0 && replies.length === 180 + probe, { what: 'probes acked', timeoutMs: 20_000 });

    const counts = await f.counts();
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect(replies.every((r) => typeof r === 'object' && r !== null && 'booked' in r)).toBe(true);
    expect(claimers.reduce((n, c) => n + c.stats.repopulated, 0)).toBeGreaterThan(0);
  });
});
