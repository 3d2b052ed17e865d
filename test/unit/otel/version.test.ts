import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { INSTRUMENTATION_NAME, INSTRUMENTATION_VERSION } from '../../../adapters/otel';

it("the tracer and meter carry the package's name and version", () => {
  const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'package.json'), 'utf8')) as { name: string; version: string };
  expect({ name: INSTRUMENTATION_NAME, version: INSTRUMENTATION_VERSION }).toEqual({ name: pkg.name, version: pkg.version });
});

it('the runtime dependency of twophase/otel is @opentelemetry/api alone, an optional peer the user installs', () => {
  const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
    peerDependencies: Record<string, string>;
    peerDependenciesMeta: Record<string, { optional?: boolean }>;
  };
  expect(Object.keys(pkg.dependencies).filter((d) => d.startsWith('@opentelemetry/'))).toEqual([]);
  expect(Object.keys(pkg.peerDependencies).filter((d) => d.startsWith('@opentelemetry/'))).toEqual(['@opentelemetry/api']);
  expect(pkg.peerDependenciesMeta['@opentelemetry/api']).toEqual({ optional: true });
});
