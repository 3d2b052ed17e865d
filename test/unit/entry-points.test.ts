/**
 * The split between the application entry point (`twophase`, src/index.ts) and the adapter kit
 * (`twophase/adapter-kit`, src/adapter-kit.ts): the helpers only a claimer or source author
 * needs are exported from the kit and no longer from the application API, and package.json
 * publishes the kit as an entry point of its own.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import * as app from '../../src';
import * as kit from '../../src/adapter-kit';

/** The runtime values of the kit (its types leave no trace at runtime). */
const KIT_VALUES = [
  'checkKnownOptions',
  'optionNames',
  'closestName',
  'describeType',
  'withoutPasswords',
  'checkClaimer',
  'validateClaimOptions',
  'checkTtl',
  'encodeResult',
  'decodeResult',
  'commitEach',
  'LeaseReceipt',
  'NonAcquiredReceipt',
  'backoffDelay',
  'sleep',
  'withDeadline',
  'retryWithin',
  'retry',
  'retryAfter',
  'LeaseKeeper',
  'resolveConsumerOptions',
  'truncateErrorMessage',
  'requirePeer',
  'checkPeerVersion',
  'installedVersion',
  'satisfiesRange',
  'errorType',
  'settledSubmission',
  'isIntendedRedelivery',
  'requeueInPlace',
  'UNSETTLED_RETRY_MS',
  'checkInteger',
  'checkBoolean',
  'checkFraction',
  'attemptsAfterRequeue',
  'Semaphore',
  'LogLimiter',
  'LOG_BURST',
  'LOG_WINDOW_MS',
  'AdapterEvents',
  'validateKey',
  'monotonicClock',
  'keyFromHeaderValue',
  'validatePublishedKey',
  'toOutboxEnvelope',
];

/** Kit values still re-exported by `twophase`, deprecated, until 0.3.0. */
const DEPRECATED_IN_APP = ['validateKey', 'monotonicClock', 'keyFromHeaderValue', 'validatePublishedKey', 'toOutboxEnvelope'];

test('the adapter kit exports the helpers for claimers and sources, and nothing else at runtime', () => {
  expect(Object.keys(kit).sort()).toEqual([...KIT_VALUES].sort());
});

test('the application entry point exports no helper of the kit, but the deprecated re-exports (the same values)', () => {
  expect(KIT_VALUES.filter((name) => name in app && !DEPRECATED_IN_APP.includes(name))).toEqual([]);
  for (const name of DEPRECATED_IN_APP) expect((app as Record<string, unknown>)[name]).toBe((kit as Record<string, unknown>)[name]);
});

test('every name twophase shares with the kit is a re-export marked @deprecated with its new path (types too)', () => {
  const source = ts.createSourceFile('index.ts', readFileSync(join(__dirname, '..', '..', 'src', 'index.ts'), 'utf8'), ts.ScriptTarget.Latest, true);
  const kitSource = ts.createSourceFile('adapter-kit.ts', readFileSync(join(__dirname, '..', '..', 'src', 'adapter-kit.ts'), 'utf8'), ts.ScriptTarget.Latest, true);
  const kitNames = new Set(exportedNames(kitSource).map((e) => e.name));
  const shared = exportedNames(source).filter((e) => kitNames.has(e.name));
  expect(shared.length).toBeGreaterThanOrEqual(24);
  const undeprecated = shared.filter((e) => !/@deprecated Import `\w+` from `twophase\/adapter-kit`/.test(e.doc)).map((e) => e.name);
  expect(undeprecated).toEqual([]);
});

/** The names a file re-exports by name, each with the JSDoc written on its specifier. */
function exportedNames(file: ts.SourceFile): { name: string; doc: string }[] {
  const out: { name: string; doc: string }[] = [];
  for (const statement of file.statements) {
    if (!ts.isExportDeclaration(statement) || !statement.exportClause || !ts.isNamedExports(statement.exportClause)) continue;
    for (const element of statement.exportClause.elements) {
      const doc = ts.getJSDocTags(element).map((tag) => `@${tag.tagName.text} ${ts.getTextOfJSDocComment(tag.comment) ?? ''}`).join(' ');
      out.push({ name: element.name.text, doc });
    }
  }
  return out;
}

test('the application entry point keeps the consumer author API', () => {
  for (const name of ['ConsumerBase', 'InMemoryClaimer', 'runConsumers', 'ack', 'requeue', 'reject', 'ConfigurationError', 'CONSUMER_DEFAULTS']) {
    expect(app).toHaveProperty(name);
  }
});

test('package.json publishes twophase/adapter-kit with its types, for every resolution mode', () => {
  const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as {
    exports: Record<string, unknown>;
    typesVersions: Record<string, Record<string, string[]>>;
  };
  expect(pkg.exports['./adapter-kit']).toEqual({ types: './dist/src/adapter-kit.d.ts', default: './dist/src/adapter-kit.js' });
  expect(pkg.typesVersions['*']['adapter-kit']).toEqual(['dist/src/adapter-kit.d.ts']);
});

test('package.json publishes twophase/gated with its types, and the entry point exports the gated claimer', () => {
  const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as {
    exports: Record<string, unknown>;
    typesVersions: Record<string, Record<string, string[]>>;
  };
  expect(pkg.exports['./gated']).toEqual({ types: './dist/adapters/gated/index.d.ts', default: './dist/adapters/gated/index.js' });
  expect(pkg.typesVersions['*']['gated']).toEqual(['dist/adapters/gated/index.d.ts']);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const gated = require('../../adapters/gated') as Record<string, unknown>;
  expect(Object.keys(gated).sort()).toEqual(['GATED_CLAIMER_DEFAULTS', 'GatedClaimer']);
});
