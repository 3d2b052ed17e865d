/**
 * SIGKILL of a child-process consumer in transactional-inbox mode (RabbitMQ + PostgreSQL):
 * - between the effect's INSERT and the COMMIT: PostgreSQL rolls the transaction back when the
 *   connection drops, the redelivery books the key once;
 * - after the COMMIT, before the broker ack: the redelivery finds the key completed and acks it
 *   as a duplicate without running the handler.
 * Either way: every key booked exactly once in the ledger.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { PostgresClaimer } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { AMQP_URL, Harness, TEST_DELAY_TIERS_MS } from '../rabbitmq/support/harness';
import { waitFor } from '../../support/wait';
import { InboxConsumer, type InboxFixture, inboxFixture, ledgerHandler } from './support/inbox-fixture';
import { pgConfig } from './support/pg-helpers';

const KEYS = 20;

describeWithServices(['rabbitmq', 'postgres'], 'transactional inbox: SIGKILL of the consumer process (RabbitMQ + PostgreSQL)', () => {
  let h: Harness;
  let f: InboxFixture;
  let child: ChildProcess | undefined;
  let survivor: InboxConsumer | undefined;
  beforeEach(async () => {
    h = new Harness();
    await h.admin.open();
    f = await inboxFixture('crash');
    await f.pool.query(`CREATE TABLE ${f.schema}.markers (name text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`);
  });
  afterEach(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await survivor?.stop().catch(() => undefined);
    await h.cleanup();
    await f.cleanup();
  });

  async function run(mode: 'kill-before-commit' | 'kill-after-commit'): Promise<{ targetBeforeKill: number; targetAfterKill: number }> {
    const queue = h.queue(`crash-${mode}`);
    const target = 'inbox:k7';
    // Declare the topology first (the child and the survivor use the same options).
    const { RabbitMqSource } = await import('../../../adapters/rabbitmq');
    const probe = new RabbitMqSource({ url: AMQP_URL, queue, delayTiersMs: TEST_DELAY_TIERS_MS });
    await probe.start({ dispatch: async () => { throw new Error('unused'); }, claimBatch: async () => [] } as never, { concurrency: 1 });
    await probe.stopIntake();
    await probe.close();
    for (let i = 0; i < KEYS; i++) await h.admin.publish('', queue, { i }, { messageId: `k${i}` });

    const config = { amqpUrl: AMQP_URL, queue, delayTiersMs: [...TEST_DELAY_TIERS_MS], schema: f.schema, pg: pgConfig({ max: 6 }), mode, targetKey: target };
    child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, 'support', 'inbox-child.ts'), JSON.stringify(config)], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, TS_NODE_TRANSPILE_ONLY: 'true' },
    });
    const exited = new Promise<void>((resolve) => child!.once('exit', () => resolve()));
    let targetBeforeKill = -1;
    if (mode === 'kill-before-commit') {
      await waitFor(async () => (await f.pool.query(`SELECT 1 FROM ${f.schema}.markers WHERE name = 'inserted'`)).rowCount === 1, { what: 'the target effect inserted, not committed', timeoutMs: 60_000 });
      targetBeforeKill = (await f.counts()).get(target) ?? 0;
      child.kill('SIGKILL');
    }
    await exited;
    expect(child.signalCode).toBe('SIGKILL');
    // After the kill: PostgreSQL ended the dead session (rolling back anything uncommitted).
    await waitFor(async () => (await f.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND query LIKE '%${f.schema}%'`)).rows[0].n === 0, { what: 'no open transaction left', timeoutMs: 20_000 });
    const targetAfterKill = (await f.counts()).get(target) ?? 0;

    survivor = new InboxConsumer(
      { name: 'inbox', claimer: new PostgresClaimer({ pool: f.pool }, { schema: f.schema, mode: 'transactional' }), source: h.source({ queue }), concurrency: 4, leaseTtlMs: 30_000, logger: h.logger },
      ledgerHandler(f.ledger),
    );
    await survivor.start();
    await waitFor(async () => (await f.counts()).size === KEYS && (await h.admin.messageCount(queue)) === 0, { what: 'every key booked and the queue drained', timeoutMs: 60_000 });
    await survivor.stop();
    const counts = await f.counts();
    expect([...counts.entries()].filter(([, n]) => n !== 1)).toEqual([]);
    return { targetBeforeKill, targetAfterKill };
  }

  test('SIGKILL between the effect INSERT and the COMMIT: the effect rolls back, the redelivery books it once', async () => {
    const { targetBeforeKill, targetAfterKill } = await run('kill-before-commit');
    expect(targetBeforeKill).toBe(0); // not visible before COMMIT
    expect(targetAfterKill).toBe(0); // rolled back with the dead session
  }, 180_000);

  test('SIGKILL after the COMMIT, before the broker ack: the redelivery is a done duplicate, the effect stays once', async () => {
    const { targetAfterKill } = await run('kill-after-commit');
    expect(targetAfterKill).toBe(1); // committed before the kill
  }, 180_000);
});
