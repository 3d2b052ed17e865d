/**
 * Loading an adapter's entry point in a project without its client library: an error naming the
 * package and the fix (`npm install kafkajs`), not Node's bare "Cannot find module".
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { requireWithout } from '../support/require-without';
import { satisfiesRange } from '../../src/util/peer-check';

test('require(adapters/kafka) with @platformatic/kafka but without kafkajs loads (either client is enough)', () => {
  const run = requireWithout('adapters/kafka', 'kafkajs');
  expect(run.stderr).not.toMatch(/MissingPeerDependencyError/);
  expect(run.status).toBe(0);
});

test.each([
  ['adapters/kafka', 'kafkajs,@platformatic/kafka', 'twophase/kafka'],
  ['adapters/rabbitmq', 'amqplib', 'twophase/rabbitmq'],
  ['adapters/postgres', 'pg', 'twophase/postgres'],
  ['adapters/postgres/orm/drizzle', 'drizzle-orm', 'twophase/drizzle'],
  ['adapters/otel', '@opentelemetry/api', 'twophase/otel'],
])('require(%s) without %s names the package and the install command', (entry, peer, name) => {
  const run = requireWithout(entry, peer);
  const named = peer.split(',')[0]!;
  expect(run.status).not.toBe(0);
  expect(run.stderr).toMatch(/MissingPeerDependencyError/);
  expect(run.stderr).toContain(`${name} needs the package "${named}"`);
  expect(run.stderr).toContain(`npm install ${named}`);
});

test('require(adapters/rabbitmq) without both of its clients names both, and one install command for the two', () => {
  const run = requireWithout('adapters/rabbitmq', 'amqplib,amqp-connection-manager');
  expect(run.status).not.toBe(0);
  expect(run.stderr).toContain('twophase/rabbitmq needs the packages "amqplib" and "amqp-connection-manager"');
  expect(run.stderr).toContain('npm install amqplib amqp-connection-manager');
});

test.each([['kafka'], ['rabbitmq'], ['postgres'], ['otel']])(
  'the published adapters/%s/index.js requires ./peer before any other module (as tsconfig.build.json compiles it)',
  (adapter) => {
    const source = readFileSync(join(__dirname, '..', '..', 'adapters', adapter, 'index.ts'), 'utf8');
    const { outputText } = ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 } });
    const requires = [...outputText.matchAll(/\brequire\("([^"]+)"\)/g)].map((m) => m[1]);
    expect(requires[0]).toBe('./peer');
  },
);

test('supported ranges: caret ranges and alternatives, as in package.json peerDependencies', () => {
  expect(satisfiesRange('2.3.1', '^2.3.1')).toBe(true);
  expect(satisfiesRange('2.9.0', '^2.3.1')).toBe(true);
  expect(satisfiesRange('0.10.9', '^2.3.1')).toBe(false);
  expect(satisfiesRange('2.3.0', '^2.3.1')).toBe(false);
  expect(satisfiesRange('3.0.0', '^2.3.1')).toBe(false);
  expect(satisfiesRange('6.0.0', '^5.9.2 || ^6.0.0')).toBe(true);
  expect(satisfiesRange('5.9.1', '^5.9.2 || ^6.0.0')).toBe(false);
});

test("each adapter's supported range is its package.json peerDependencies range", async () => {
  const pkg = (await import('../../package.json')) as { peerDependencies: Record<string, string> };
  const ranges = {
    kafkajs: (await import('../../adapters/kafka/peer')).SUPPORTED_RANGE,
    amqplib: (await import('../../adapters/rabbitmq/peer')).SUPPORTED_RANGE,
    pg: (await import('../../adapters/postgres/peer')).SUPPORTED_RANGE,
    ioredis: (await import('../../adapters/redis/peer')).SUPPORTED_RANGE,
    'drizzle-orm': (await import('../../adapters/postgres/orm/drizzle-peer')).SUPPORTED_RANGE,
    '@opentelemetry/api': (await import('../../adapters/otel/peer')).SUPPORTED_RANGE,
  };
  for (const [peer, range] of Object.entries(ranges)) expect([peer, range]).toEqual([peer, pkg.peerDependencies[peer]]);
});
