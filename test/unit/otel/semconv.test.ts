/**
 * Every OpenTelemetry semantic-convention name twophase emits (adapters/otel/semconv.ts) is a name
 * of the current registry, and none is deprecated there. The registry is read from the
 * declarations of `@opentelemetry/semantic-conventions` (a devDependency pinned to the registry
 * version docs/otel.md names): each constant is `declare const NAME: "value"`, and a deprecated one
 * carries `@deprecated` in its doc comment.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as semconv from '../../../adapters/otel/semconv';

interface RegistryEntry {
  readonly constant: string;
  readonly deprecated: boolean;
}

/** value → the constants that hold it, from every declaration file of the package. */
function readRegistry(): { version: string; byValue: Map<string, RegistryEntry[]> } {
  // The package's exports map does not list package.json: resolve its entry point (dist/index.cjs).
  const dist = dirname(require.resolve('@opentelemetry/semantic-conventions'));
  const version = (JSON.parse(readFileSync(join(dist, '..', 'package.json'), 'utf8')) as { version: string }).version;
  const byValue = new Map<string, RegistryEntry[]>();
  const declaration = /\/\*\*((?:(?!\*\/)[\s\S])*)\*\/\s*declare const (\w+): "([^"]+)";/g;
  for (const file of readdirSync(dist).filter((f) => /^(stable|experimental)_(attributes|metrics)\.d\.cts$/.test(f))) {
    const text = readFileSync(join(dist, file), 'utf8');
    for (const [, doc, constant, value] of text.matchAll(declaration)) {
      const list = byValue.get(value!) ?? [];
      list.push({ constant: constant!, deprecated: /@deprecated/.test(doc!) });
      byValue.set(value!, list);
    }
  }
  return { version, byValue };
}

/** The names twophase writes that belong to the registry: everything but its own `twophase.*` namespace. */
const EMITTED = Object.entries(semconv)
  .filter(([constant, value]) => typeof value === 'string' && constant !== 'ATTR_MESSAGING_OPERATION_LEGACY' && constant !== 'EVENT_PREFIX')
  .filter(([, value]) => !(value as string).startsWith('twophase.'))
  .map(([constant, value]) => ({ constant, value: value as string }));

describe('semantic-convention names', () => {
  const registry = readRegistry();

  it('the registry read is the version docs/otel.md names', () => {
    const doc = readFileSync(join(__dirname, '..', '..', '..', 'docs', 'otel.md'), 'utf8');
    const minor = registry.version.split('.').slice(0, 2).join('\\.');
    expect(doc).toMatch(new RegExp(`\`@opentelemetry/semantic-conventions\`\\s+${minor}\\b`));
  });

  it('the test sees every registry name twophase emits', () => {
    expect(EMITTED.map((e) => e.value).sort()).toEqual(
      [
        'error.type',
        'kafka.message.key',
        'kafka.offset',
        'messaging.consumer.group.name',
        'messaging.destination.name',
        'messaging.destination.partition.id',
        'messaging.message.id',
        'messaging.operation.name',
        'messaging.operation.type',
        'messaging.process.duration',
        'messaging.system.name',
        'process',
        'rabbitmq.destination.routing_key',
        'rabbitmq.message.delivery_tag',
        'send',
        'settle',
      ].sort(),
    );
  });

  it.each(EMITTED)('$constant ("$value") is a current, non-deprecated registry name', ({ value }) => {
    const entries = registry.byValue.get(value) ?? [];
    expect(entries.length).toBeGreaterThan(0);
    expect(entries.filter((e) => !e.deprecated).map((e) => e.constant)).not.toEqual([]);
  });

  it('the pre-1.26 name is only read, and it is deprecated in the registry', () => {
    const entries = registry.byValue.get(semconv.ATTR_MESSAGING_OPERATION_LEGACY) ?? [];
    expect(entries.length).toBeGreaterThan(0);
    expect(entries.every((e) => e.deprecated)).toBe(true);
  });
});
