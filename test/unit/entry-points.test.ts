/**
 * The split between the application entry point (`twophase`, src/index.ts) and the adapter kit
 * (`twophase/adapter-kit`, src/adapter-kit.ts): the helpers only a claimer or source author
 * needs are exported from the kit and no longer from the application API, and package.json
 * publishes the kit as an entry point of its own.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as app from '../../src';
import * as kit from '../../src/adapter-kit';

/** The runtime values of the kit (its types leave no trace at runtime). */
const KIT_VALUES = [
  'checkKnownOptions',
  'optionNames',
  'closestName',
  'describeType',
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
];

test('the adapter kit exports the helpers for claimers and sources, and nothing else at runtime', () => {
  expect(Object.keys(kit).sort()).toEqual([...KIT_VALUES].sort());
});

test('the application entry point no longer exports any helper of the kit', () => {
  expect(KIT_VALUES.filter((name) => name in app)).toEqual([]);
});

test('the application entry point keeps the consumer author API', () => {
  for (const name of ['ConsumerBase', 'InMemoryClaimer', 'runConsumers', 'ack', 'requeue', 'reject', 'ConfigurationError', 'validateKey', 'monotonicClock', 'CONSUMER_DEFAULTS']) {
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
