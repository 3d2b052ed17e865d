/**
 * PostgreSQL down and back, on a PRIVATE server this test starts (initdb + pg_ctl on a free
 * port): the claimer fails closed with ClaimerUnavailableError within its deadline, never
 * guesses a state, and works again once the server is back, without being re-created.
 */
import { Pool } from 'pg';
import { ClaimerUnavailableError } from '../../../src';
import { migrate, PostgresClaimer } from '../../../adapters/postgres';
import { describeWithServices } from '../../support/services';
import { postgresBinDir, PostgresServerProcess } from './support/pg-process';

const opts = { leaseTtlMs: 5000, doneTtlMs: 60_000 };

const suite = postgresBinDir() ? 'PostgresClaimer outage (private server)' : 'PostgresClaimer outage [no PostgreSQL binaries under /usr/lib/postgresql]';
describeWithServices(['postgres'], suite, () => {
  if (!postgresBinDir()) {
    // Under CI every service is required: missing server binaries fail the run instead of skipping.
    if (process.env.CI) {
      test('initdb and pg_ctl are installed (required under CI)', () => {
        throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql/*/bin: install the postgresql package');
      });
    } else {
      test.skip('needs initdb and pg_ctl', () => undefined);
    }
    return;
  }
  let server: PostgresServerProcess;
  let pool: Pool;
  beforeAll(async () => {
    server = await PostgresServerProcess.create();
    pool = new Pool({ host: '127.0.0.1', port: server.port, user: 'postgres', database: 'postgres', max: 5, connectionTimeoutMillis: 500 });
    pool.on('error', () => undefined);
    await migrate(pool);
  }, 120_000);
  afterAll(async () => {
    await pool?.end().catch(() => undefined);
    await server?.destroy();
  });

  test('down: claim, claimMany and commit reject with ClaimerUnavailableError within the deadline; back up: claims work again', async () => {
    const claimer = new PostgresClaimer({ pool }, { operationTimeoutMs: 1000 });
    await claimer.ready();
    const held = await claimer.claim('outage-held', opts);
    expect(held.state).toBe('acquired');

    await server.stop('fast');
    const started = performance.now();
    await expect(claimer.claim('outage-1', opts)).rejects.toBeInstanceOf(ClaimerUnavailableError);
    expect(performance.now() - started).toBeLessThan(1500);
    await expect(claimer.claimMany!([{ key: 'outage-2', options: opts }])).rejects.toBeInstanceOf(ClaimerUnavailableError);
    if (held.state === 'acquired') await expect(held.receipt.commit('x')).rejects.toBeInstanceOf(ClaimerUnavailableError);
    await expect(claimer.ready()).rejects.toBeInstanceOf(ClaimerUnavailableError);

    await server.start();
    const after = await claimer.claim('outage-1', opts);
    expect(after.state).toBe('acquired');
    // the receipt survived the outage: its commit lands now
    if (held.state === 'acquired') await held.receipt.commit('x');
    const done = await claimer.claim('outage-held', opts);
    expect(done.state === 'done' && done.result).toBe('x');
  }, 120_000);

  test('transactional mode: a claim while the server is down rejects with ClaimerUnavailableError; after restart it works', async () => {
    const claimer = new PostgresClaimer({ pool }, { mode: 'transactional', operationTimeoutMs: 1000 });
    await server.stop('fast');
    await expect(claimer.claim('tx-outage', opts)).rejects.toBeInstanceOf(ClaimerUnavailableError);
    await server.start();
    const r = await claimer.claim('tx-outage', opts);
    expect(r.state).toBe('acquired');
    if (r.state === 'acquired') await r.receipt.commit();
    expect((await claimer.claim('tx-outage', opts)).state).toBe('done');
  }, 120_000);
});
