/**
 * `twophase outbox status | list | show | requeue | purge | relay` against real PostgreSQL and
 * RabbitMQ, in process (runCli), each with `--json`: stable JSON for scripts, exit codes.
 */
import { spawn } from 'node:child_process';
import { runCli } from '../../../adapters/cli';
import { transactionOutbox } from '../../../adapters/postgres';
import { cliNodeArgs } from '../../support/cli-process';
import { describeWithServices } from '../../support/services';
import { waitFor } from '../../support/wait';
import { AMQP_URL } from '../rabbitmq/support/amqp';
import { OutboxFixture } from './support/outbox-fixture';
import { pgUrl } from './support/pg-helpers';

function capture(): { io: { stdout: (t: string) => void; stderr: (t: string) => void }; out: string[]; err: string[]; json: () => unknown[] } {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: { stdout: (t) => void out.push(t), stderr: (t) => void err.push(t) },
    out,
    err,
    json: () => out.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l) as unknown),
  };
}

describeWithServices(['rabbitmq', 'postgres'], 'twophase outbox CLI', () => {
  let f: OutboxFixture;
  beforeEach(async () => {
    f = await OutboxFixture.create('outbox_cli');
  });
  afterEach(async () => {
    await f.cleanup();
  });

  const cli = async (...args: string[]) => {
    const c = capture();
    const code = await runCli(['outbox', ...args, '--url', pgUrl(), '--schema', f.schema], { io: c.io, env: {} });
    return { code, ...c };
  };

  /** One dead message (unroutable, maxAttempts 1) and one pending one behind it (same key). */
  async function deadAndPending(): Promise<string[]> {
    const ids = await f.inTransaction((c) =>
      transactionOutbox(c, { schema: f.schema }).stageMany([
        { to: { exchange: f.exchange, routingKey: 'nobody-bound' }, body: 'poison', orderingKey: 'k' },
        { to: { exchange: f.exchange, routingKey: 'placed' }, body: { ok: true }, orderingKey: 'k', headers: { h: 'v' } },
      ]),
    );
    const relay = f.relay({}, { maxAttempts: 1 });
    await relay.start();
    await waitFor(async () => (await f.rows())[0]?.state === 'dead', { what: 'the first message dead' });
    await relay.stop();
    return ids;
  }

  test('status, list and show --json describe the table; show of an unknown id exits 1', async () => {
    const [dead, pending] = await deadAndPending();
    const status = await cli('status', '--json');
    expect(status.code).toBe(0);
    expect(status.json()[0]).toMatchObject({ pending: 1, leased: 0, dead: { unroutable: 1 } });
    const list = await cli('list', '--json');
    expect(list.code).toBe(0);
    expect(list.json()[0]).toEqual([
      expect.objectContaining({ id: dead, state: 'dead', deadReason: 'unroutable', attempts: 1, orderingKey: 'k', system: 'rabbitmq' }),
      expect.objectContaining({ id: pending, state: 'pending', attempts: 0, bodyBytes: 11 }),
    ]);
    expect((await cli('list', '--state', 'dead', '--json')).json()[0]).toHaveLength(1);
    const show = await cli('show', pending!, '--json');
    expect(show.code).toBe(0);
    expect(show.json()[0]).toMatchObject({ id: pending, headers: { h: 'v' }, bodyText: '{"ok":true}', properties: { contentType: 'application/json' }, destination: { exchange: f.exchange, routingKey: 'placed' } });
    const missing = await cli('show', '00000000-0000-8000-8000-000000000000', '--json');
    expect(missing.code).toBe(1);
    expect(missing.json()[0]).toEqual({ id: '00000000-0000-8000-8000-000000000000', found: false });
    const human = await cli('status');
    expect(human.out.join('')).toMatch(/pending 1 .*\ndead unroutable=1/);
  });

  test('requeue keeps the id and resets the attempts; purge deletes dead messages only; usage errors exit 2', async () => {
    const [dead, pending] = await deadAndPending();
    expect((await cli('requeue', '--json')).code).toBe(2);
    const notDead = await cli('requeue', pending!, '--json');
    expect(notDead.code).toBe(1);
    expect(notDead.json()[0]).toEqual({ ids: [], notDead: [pending] });
    const requeued = await cli('requeue', dead!, '--json');
    expect(requeued.code).toBe(0);
    expect(requeued.json()[0]).toEqual({ ids: [dead], notDead: [] });
    expect((await f.rows()).map((r) => [r.id, r.state, r.attempts])).toEqual([
      [dead, 'pending', 0],
      [pending, 'pending', 0],
    ]);
    // Dead again, then purged: the pending message stays.
    const relay = f.relay({}, { maxAttempts: 1 });
    await relay.start();
    await waitFor(async () => (await f.rows())[0]?.state === 'dead');
    await relay.stop();
    const purged = await cli('purge', '--all-dead', '--reason', 'unroutable', '--json');
    expect(purged.code).toBe(0);
    expect(purged.json()[0]).toEqual({ ids: [dead], notDead: [] });
    expect((await f.rows()).map((r) => r.id)).toEqual([pending]);
  });

  test('relay --json publishes until the signal, then stops gracefully and reports its counts', async () => {
    await f.inTransaction((c) => transactionOutbox(c, { schema: f.schema }).stage({ to: { exchange: f.exchange, routingKey: 'placed' }, body: { n: 1 } }));
    const c = capture();
    const controller = new AbortController();
    const running = runCli(['outbox', 'relay', '--url', pgUrl(), '--schema', f.schema, '--rabbitmq-url', AMQP_URL, '--poll-interval', '50', '--json'], { io: c.io, env: {}, signal: controller.signal });
    const got = await waitFor(async () => {
      const m = await f.drain();
      return m.length > 0 ? m : undefined;
    }, { what: 'the relayed message' });
    expect(JSON.parse(got[0]!.content.toString())).toEqual({ n: 1 });
    await waitFor(async () => (await f.rows()).length === 0);
    controller.abort();
    expect(await running).toBe(0);
    const time = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(c.json()).toEqual([
      { type: 'started', name: 'outbox-relay', schema: f.schema, systems: ['rabbitmq'], listening: true, time, relay: 'outbox-relay' },
      // Right after start, before the first claim could finish: the counts as the relay found them.
      { type: 'stats', pending: expect.any(Number), oldestPendingAgeMs: expect.any(Number), leased: expect.any(Number), dead: {}, published: expect.any(Number), publishFailures: 0, listening: true, time, relay: 'outbox-relay' },
      { type: 'stopped', published: 1, publishFailures: 0, time, relay: 'outbox-relay' },
    ]);
    // One start line: the relay's own (`twophase: outbox relay started`) is not printed as well.
    expect(c.err.join('')).not.toMatch(/started/);
  });

  test('relay as a process: SIGTERM writes a line about stopping the relay (not the DLQ replay), then it stops with its counts and exit code 0', async () => {
    const { argv, env } = cliNodeArgs(['outbox', 'relay', '--url', pgUrl(), '--schema', f.schema, '--rabbitmq-url', AMQP_URL, '--poll-interval', '50', '--name', 'sig-relay']);
    const child = spawn(process.execPath, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const closed = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
    try {
      await waitFor(() => / sig-relay: relay sig-relay started/.test(stdout), { what: 'the relay start line', timeoutMs: 30_000 });
      child.kill('SIGTERM');
      expect(await closed).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
    expect(stderr).toMatch(/^SIGTERM: stopping the relay: no new claims; publishes in flight finish \(up to --shutdown-timeout\), then the leases of messages not published are given back/m);
    expect(stderr).not.toMatch(/replay|republish/);
    expect(stdout).toMatch(/ sig-relay: relay stopped: 0 published, 0 failed publishes/);
  });

  test('relay log lines carry the time and the relay name; a stats line follows the start and repeats every --stats-interval', async () => {
    await f.inTransaction((c) => transactionOutbox(c, { schema: f.schema }).stage({ to: { exchange: f.exchange, routingKey: 'nobody-bound' }, body: 'poison' }));
    const c = capture();
    const controller = new AbortController();
    const args = ['outbox', 'relay', '--url', pgUrl(), '--schema', f.schema, '--rabbitmq-url', AMQP_URL, '--poll-interval', '50', '--max-attempts', '1', '--name', 'relay-a', '--stats-interval', '100'];
    const running = runCli(args, { io: c.io, env: {}, signal: controller.signal });
    await waitFor(async () => (await f.rows())[0]?.state === 'dead', { what: 'the unroutable message dead' });
    await waitFor(async () => c.out.join('').includes('dead: 1 unroutable'), { what: 'a stats line counting the dead message' });
    controller.abort();
    expect(await running).toBe(0);
    const lines = c.out.join('').split('\n').filter(Boolean);
    for (const l of lines) expect(l).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z relay-a: /);
    expect(lines[0]).toMatch(/relay relay-a started/);
    // The first stats line is written as soon as the relay's counts arrive; the dead message's own line may come first.
    const stats = / relay-a: \d+ pending \(oldest \d+ ms\), \d+ leased, dead: (none|1 unroutable); 0 published/;
    const firstStats = lines.findIndex((l) => stats.test(l));
    expect(firstStats).toBeGreaterThan(0);
    for (const l of lines.slice(1, firstStats)) expect(l).toMatch(/ relay-a: dead /);
    const logged = c.err.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
    const dead = logged.find((l) => typeof l.msg === 'string' && l.msg.startsWith('outbox message is dead'));
    expect(dead).toMatchObject({ level: 'error', relay: 'relay-a', reason: 'unroutable' });
    expect(dead!.time).toEqual(expect.stringMatching(/^\d{4}-\d\d-\d\dT/));
    expect(Date.now() - Date.parse(dead!.time as string)).toBeLessThan(60_000);
  });

  test('relay without a broker is a usage error (exit 2)', async () => {
    const c = capture();
    expect(await runCli(['outbox', 'relay', '--url', pgUrl()], { io: c.io, env: {} })).toBe(2);
    expect(c.err.join('')).toMatch(/--rabbitmq-url, --kafka-brokers/);
  });
});
