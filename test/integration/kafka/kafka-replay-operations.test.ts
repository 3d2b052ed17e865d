/**
 * `twophase dlq replay --broker kafka` right after a killed run (real broker): the dead member
 * keeps the replay's consumer group until its session timeout, so the join waits; the tool says
 * so at once (the group's members) and again while it waits, then replays as usual. Run with
 * `--client` set to each client the tool offers, the killed run's member on the same client.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { HEADERS } from '../../../adapters/kafka';
import { EXIT, runCli } from '../../../adapters/cli';
import { clientRows, describeEachClient } from './support/clients';
import { BROKERS, makeKafka, TopicFixture, unique } from './support/kafka-helpers';
import { waitFor } from '../../support/wait';

const ROOT = join(__dirname, '..', '..', '..');

describeEachClient(['kafka'], 'twophase dlq replay on Kafka after a killed run (real broker)', clientRows('kafkajs', 'platformatic-classic'), (row) => {
  const library = row.name === 'kafkajs' ? 'kafkajs' : 'platformatic';
  const kafka = makeKafka('twophase-replay-ops');
  const topics = new TopicFixture(kafka);
  afterAll(async () => {
    await topics.destroy();
  });

  test('a re-run while the killed run\'s member still holds the group says why it waits, then replays', async () => {
    const topic = await topics.create('replay-killed', 1);
    const dlq = `${topic}.dlq`;
    const groupId = `twophase-dlq-replay.${dlq}`;
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({ topic: dlq, messages: [{ key: 'k', value: '{}', headers: { [HEADERS.originalTopic]: topic, 'idempotency-key': unique('key'), [HEADERS.reason]: 'permanent_error' } }] });
    await producer.disconnect();

    // A member of the replay group in another process, on the same client, killed without leaving the group.
    const member = { client: row.name, clientId: 'killed-replay', groupId, topic: dlq, sessionTimeout: 20_000 };
    const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, 'support', 'group-member-child.ts'), JSON.stringify(member)], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, TS_NODE_TRANSPILE_ONLY: 'true' },
    });
    let joined = false;
    child.stdout!.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('joined')) joined = true;
    });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    try {
      await waitFor(() => joined || child.exitCode !== null, { what: 'the first run joined the replay group', timeoutMs: 60_000 });
      expect(child.exitCode).toBeNull();
    } finally {
      child.kill('SIGKILL');
      await exited;
    }

    const err: string[] = [];
    const out: string[] = [];
    const code = await runCli(['dlq', 'replay', dlq, '--broker', 'kafka', '--client', library, '--url', BROKERS.join(',')], { io: { stdout: (t) => out.push(t), stderr: (t) => err.push(t) }, env: {} });
    const text = err.join('');
    expect({ code, text }).toMatchObject({ code: EXIT.ok });
    expect(text).toMatch(new RegExp(`warning: consumer group "${groupId.replace(/\./g, '\\.')}" still has 1 member\\(s\\) \\(killed-replay@.*\\): another replay of ".*" is running, or an earlier one was killed\\. The broker drops a dead member only after its session timeout`));
    expect(text).toMatch(/warning: still joining consumer group ".*" after 3 s: the broker waits for its current members to rejoin or to pass their session timeout/);
    expect(text).toMatch(/note: joined consumer group ".*" after \d+\.\d s/);
    expect(out.join('')).toMatch(/^1 replayed/);
  }, 150_000);

  test('a dry run shows each record\'s error text; a topic that is not a dead-letter topic gets a warning', async () => {
    const topic = await topics.create('replay-dry', 1);
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({ topic: `${topic}.dlq`, messages: [{ key: 'k', value: '{}', headers: { [HEADERS.originalTopic]: topic, 'idempotency-key': 'dry-1', [HEADERS.reason]: 'permanent_error', [HEADERS.errorMessage]: 'bug: currency missing' } }] });
    await producer.send({ topic, messages: [{ key: 'k', value: '{}' }] });
    await producer.disconnect();
    const dlqRun = { out: [] as string[], err: [] as string[] };
    expect(await runCli(['dlq', 'replay', `${topic}.dlq`, '--broker', 'kafka', '--client', library, '--url', BROKERS.join(','), '--dry-run'], { io: { stdout: (t) => dlqRun.out.push(t), stderr: (t) => dlqRun.err.push(t) }, env: {} })).toBe(EXIT.ok);
    expect(dlqRun.err.join('')).toMatch(/would replay dry-1 \(permanent_error\) → topic ".*" — error: bug: currency missing/);
    expect(dlqRun.err.join('')).not.toMatch(/warning/);
    const plainRun = { out: [] as string[], err: [] as string[] };
    expect(await runCli(['dlq', 'replay', topic, '--broker', 'kafka', '--client', library, '--url', BROKERS.join(','), '--dry-run'], { io: { stdout: (t) => plainRun.out.push(t), stderr: (t) => plainRun.err.push(t) }, env: {} })).toBe(EXIT.ok);
    expect(plainRun.err.join('')).toMatch(new RegExp(`warning: the first record of "${topic}" carries no dead-letter headers \\(twophase-reason, twophase-original-topic\\): "${topic}" does not look like a dead-letter topic`));
  }, 60_000);
});
