/**
 * The main job on real input: the demo consuming from the local RabbitMQ with the RedisClaimer,
 * with crashes at every step, reaches the same verdict as on the embedded default.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import amqplib from 'amqplib';
import { describeWithServices } from '../../support/services';

const ROOT = join(__dirname, '..', '..', '..');

function runDemo(args: string[]) {
  return spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', join(ROOT, 'examples/demo/main.ts'), '--quiet', ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 240_000,
  });
}

describeWithServices(['rabbitmq', 'redis'], 'demo on RabbitMQ + Redis', () => {
  test('publishes, crashes workers at every step, loses nothing, and attributes every duplicated effect to the documented window', () => {
    const result = runDemo(['--broker', 'rabbitmq', '--claimer', 'redis', '--messages', '3000', '--crash-rate', '0.004', '--seed', '7']);
    expect(result.stderr).not.toMatch(/Error/);
    expect(result.stdout).toMatch(/RabbitMQ \+ RedisClaimer/);
    expect(result.stdout).toMatch(/payments lost \(no effect\)\s+0\n/);
    expect(result.stdout).toMatch(/duplicated effects: any other cause\s+0\n/);
    // crashes really happened at every step
    for (const step of ['before the effect', 'after the effect, before the commit', 'after the commit, before the ack']) {
      expect(result.stdout).toMatch(new RegExp(`crashes: ${step.replace(/[()]/g, '\\$&')}\\s+[1-9]`));
    }
    expect(result.stdout).toMatch(/VERDICT: PASS/);
    expect(result.status).toBe(0);
  });
});

describeWithServices(['rabbitmq', 'postgres'], 'outbox demo on PostgreSQL + RabbitMQ', () => {
  test('ships every committed order once, then removes its queue, dead-letter queue, delay queue and dead-letter exchange', async () => {
    const result = runDemo(['--outbox', '--messages', '300', '--seed', '5', '--timeout-s', '60']);
    expect(result.stdout).toMatch(/verdict: OK/);
    expect(result.status).toBe(0);
    const queue = /RabbitMQ queue\s+(\S+)/.exec(result.stdout)?.[1];
    expect(queue).toMatch(/^demo\.outbox\./);
    const connection = await amqplib.connect(process.env.TWOPHASE_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672');
    try {
      const left: string[] = [];
      for (const [kind, name] of [['queue', queue], ['queue', `${queue}.dlq`], ['queue', `${queue}.delay.200ms`], ['exchange', `${queue}.dlx`]] as const) {
        // A passive declare of a missing entity closes its channel with 404: one channel per check.
        const channel = await connection.createChannel();
        channel.on('error', () => undefined);
        const found = await (kind === 'queue' ? channel.checkQueue(name!) : channel.checkExchange(name)).then(() => true, () => false);
        if (found) left.push(`${kind} ${name}`);
        if (found) await channel.close();
      }
      expect(left).toEqual([]);
    } finally {
      await connection.close();
    }
  });
});

describeWithServices(['kafka', 'redis'], 'demo on Kafka + Redis', () => {
  test('creates its topic and dead-letter topic, crashes group members at every step, loses nothing, and attributes every duplicated effect to the documented window', () => {
    const result = runDemo(['--broker', 'kafka', '--claimer', 'redis', '--messages', '1500', '--crash-rate', '0.006', '--seed', '7']);
    expect(result.stderr).not.toMatch(/Error/);
    expect(result.stdout).toMatch(/Kafka \+ RedisClaimer/);
    expect(result.stdout).toMatch(/payments lost \(no effect\)\s+0\n/);
    expect(result.stdout).toMatch(/duplicated effects: any other cause\s+0\n/);
    for (const step of ['before the effect', 'after the effect, before the commit', 'after the commit, before the ack']) {
      expect(result.stdout).toMatch(new RegExp(`crashes: ${step.replace(/[()]/g, '\\$&')}\\s+[1-9]`));
    }
    // every poison payment, undecodable message and keyless message reached the dead-letter topic
    expect(result.stdout).toMatch(/dead letters\s+\d+ = .*permanent_error \d+ \(of 10 poison payments\)/);
    expect(result.stdout).toMatch(/invalid_body \d+ \(of 2 undecodable messages\)/);
    // A member killed after writing a dead letter and before committing its offset writes it again
    // on redelivery (dead letters are at-least-once, docs/kafka.md "reject" row): copies ≥ 1, of exactly 1 message.
    expect(result.stdout).toMatch(/missing_key [1-9]\d* \(of 1 message without a key\)/);
    expect(result.stdout).toMatch(/VERDICT: PASS/);
    expect(result.status).toBe(0);
  });
});

describe('demo on the embedded default', () => {
  test('passes with no services and exits 0', () => {
    const result = runDemo(['--messages', '2000', '--crash-rate', '0.005', '--seed', '3']);
    expect(result.stdout).toMatch(/in-process broker \+ InMemoryClaimer/);
    expect(result.stdout).toMatch(/VERDICT: PASS/);
    expect(result.status).toBe(0);
  });

  test('explains how its counts add up: published, deliveries, handler runs and effects are sums of the parts they name', () => {
    const result = runDemo(['--messages', '2000', '--crash-rate', '0.005', '--seed', '3']);
    const count = (label: RegExp) => Number(label.exec(result.stdout)?.[1]);
    const published = /published\s+(\d+) = (\d+) payments \+ (\d+) extra copies .* \+ (\d+) poison \+ (\d+) invalid/.exec(result.stdout);
    expect(published).not.toBeNull();
    const [, total, ...parts] = published!.map(Number);
    expect(parts.reduce((a, b) => a + b, 0)).toBe(total);
    expect(total).toBe(count(/messages published \(incl\. duplicates, poison, invalid\)\s+(\d+)/));
    const deliveries = /deliveries\s+(\d+) = (\d+) published \+ (\d+) redeliveries/.exec(result.stdout)!.map(Number);
    expect(deliveries[2]! + deliveries[3]!).toBe(deliveries[1]);
    expect(deliveries[1]).toBe(count(/deliveries \(incl\. redeliveries\)\s+(\d+)/));
    const runs = /handler runs\s+(\d+) = (\d+) payments and poison payments once each \+ (\d+) again/.exec(result.stdout)!.map(Number);
    expect(runs[2]! + runs[3]!).toBe(runs[1]);
    const effects = /effects\s+(\d+) = (\d+) payments once \+ (\d+) again/.exec(result.stdout)!.map(Number);
    expect(effects[2]! + effects[3]!).toBe(effects[1]);
    expect(effects[3]).toBe(count(/duplicated effects: crash after effect, before commit\s+(\d+)/));
    // the dead-letter line names, per reason, how many messages the copies are of
    expect(result.stdout).toMatch(/permanent_error \d+ \(of 10 poison payments\)/);
    expect(result.stdout).toMatch(/busy\s+\d+ requeues .* neither an attempt nor a duplicate/s);
  });

  test('the verdict fails (exit 1) when duplicates are not explained: a control run where each worker keeps its own claims', () => {
    // As with an in-memory claimer on several replicas: duplicates across workers have no crash to blame.
    const result = runDemo(['--messages', '500', '--crash-rate', '0', '--duplicate-share', '0.3', '--per-worker-claims']);
    expect(result.stdout).toMatch(/duplicated effects: any other cause\s+[1-9]/);
    expect(result.stdout).toMatch(/VERDICT: FAIL/);
    expect(result.status).toBe(1);
  });
});

/** The inbox run on one broker: crashes at every step, and not one duplicated effect. */
function expectInboxVerdict(result: ReturnType<typeof runDemo>, brokerLabel: string): void {
  expect(result.stderr).not.toMatch(/Error/);
  expect(result.stdout).toMatch(new RegExp(`${brokerLabel} \\+ PostgresClaimer \\(transactional inbox\\)`));
  expect(result.stdout).toMatch(/payments lost \(no effect\)\s+0\n/);
  for (const step of ['before the effect', 'after the effect, before the commit', 'after the commit, before the ack']) {
    expect(result.stdout).toMatch(new RegExp(`crashes: ${step.replace(/[()]/g, '\\$&')}\\s+[1-9]`));
  }
  // The crash window of the Redis run is closed: the effect rows commit with the claim.
  expect(result.stdout).toMatch(/duplicated effects: crash after effect, before commit\s+0\n/);
  expect(result.stdout).toMatch(/duplicated effects: any other cause\s+0\n/);
  expect(result.stdout).toMatch(/VERDICT: PASS — no payment lost; 0 duplicated effects/);
  expect(result.status).toBe(0);
}

describeWithServices(['postgres'], 'demo with the PostgreSQL inbox (--claimer postgres)', () => {
  test('embedded broker: effect rows written through ctx.transaction, crashes at every step, 0 duplicated effects', () => {
    expectInboxVerdict(runDemo(['--claimer', 'postgres', '--messages', '1500', '--crash-rate', '0.006', '--seed', '5']), 'in-process broker');
  });
});

describeWithServices(['rabbitmq', 'postgres'], 'demo on RabbitMQ with the PostgreSQL inbox', () => {
  test('crashes workers at every step, loses nothing, and applies no effect twice', () => {
    expectInboxVerdict(runDemo(['--broker', 'rabbitmq', '--claimer', 'postgres', '--messages', '1500', '--crash-rate', '0.006', '--seed', '7']), 'RabbitMQ');
  });
});

describeWithServices(['kafka', 'postgres'], 'demo on Kafka with the PostgreSQL inbox', () => {
  test('crashes group members at every step, loses nothing, and applies no effect twice', () => {
    expectInboxVerdict(runDemo(['--broker', 'kafka', '--claimer', 'postgres', '--messages', '1000', '--crash-rate', '0.008', '--seed', '7']), 'Kafka');
  });
});
