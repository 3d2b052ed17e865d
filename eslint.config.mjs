// Lint rules. The import restrictions hold the architecture: the core (src/) knows no broker,
// store or telemetry SDK, its folders are layers that import only downwards, and an adapter
// reaches the core only through its two public entry points, `../../src` (twophase) and
// `../../src/adapter-kit` (twophase/adapter-kit).
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const brokerAndStoreClients = ['amqplib', 'amqp-connection-manager', 'kafkajs', 'ioredis', 'pg', '@opentelemetry/*'];

/** What no file of src/ imports: a client library, or an adapter. */
const corePatterns = [
  { group: brokerAndStoreClients, message: 'src/ is the core: it must not import a broker, store or telemetry client.' },
  { group: ['../adapters/*', '../../adapters/*', '../../../adapters/*'], message: 'the core never imports an adapter.' },
];

/**
 * The core's layers, lowest first. A file of a layer imports its own folder and the layers below
 * it, never a layer above nor the entry points (src/index.ts, src/adapter-kit.ts), which stand on
 * top of all. run-once/ stands beside ports/ … relay/ and uses util/, outbox/ and claim/ only.
 */
const coreLayers = ['util', 'outbox', 'claim', 'ports', 'config', 'pipeline', 'consumer', 'relay'];
const layerUses = Object.fromEntries([...coreLayers.map((layer, i) => [layer, coreLayers.slice(0, i)]), ['run-once', ['util', 'outbox', 'claim']]]);

// Every file of src/ is an entry point or lies in a layer folder: none escapes the layer rules.
for (const entry of readdirSync(fileURLToPath(new globalThis.URL('./src', import.meta.url)), { withFileTypes: true })) {
  const known = entry.isDirectory() ? entry.name in layerUses : ['index.ts', 'adapter-kit.ts'].includes(entry.name);
  if (!known) throw new Error(`eslint.config.mjs: src/${entry.name} is neither an entry point nor a layer folder (coreLayers)`);
}

/** The `no-restricted-imports` block of one layer folder. */
function layerRule(layer) {
  const uses = layerUses[layer];
  const others = Object.keys(layerUses).filter((other) => other !== layer && !uses.includes(other));
  const below = uses.length === 0 ? 'nothing else of src/' : uses.map((u) => `src/${u}/`).join(', ');
  return {
    files: [`src/${layer}/**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...corePatterns,
            {
              group: others.flatMap((other) => [`../${other}`, `../${other}/**`]),
              message: `src/${layer}/ may import ${below} (the layers below it; see eslint.config.mjs), not src/${others.join('/, src/')}/.`,
            },
            { regex: '^[.][.](/index|/adapter-kit)?/?$', message: 'the entry points (src/index.ts, src/adapter-kit.ts) import the layers, never the other way round.' },
          ],
        },
      ],
    },
  };
}

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', '.kafka/**', '.tmp/**', 'scripts/**/*.mjs', 'docs/api/**', 'test/support/prisma/generated/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-empty': ['error', { allowEmptyCatch: false }],
    },
  },
  {
    files: ['src/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: corePatterns }] },
  },
  ...Object.keys(layerUses).map(layerRule),
  {
    files: ['adapters/**/*.ts'],
    ignores: ['adapters/cli/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['../../src/**', '!../../src/adapter-kit'],
              message: 'import the core through its entry points only: ../../src (the application API) and ../../src/adapter-kit (the helpers for claimers and sources)',
            },
            { group: ['../memory/*', '../redis/*', '../rabbitmq/*', '../kafka/*', '../otel/*', '../postgres/*', '../gated/*', '../memory', '../redis', '../rabbitmq', '../kafka', '../otel', '../postgres', '../gated'], message: 'adapters never import one another (only the CLI combines them).' },
          ],
        },
      ],
    },
  },
  {
    files: ['*.js', '*.cjs', 'test/**/*.js'],
    languageOptions: { sourceType: 'commonjs', globals: { module: 'writable', require: 'readonly', __dirname: 'readonly', process: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts', 'examples/**/*.ts'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off', 'no-console': 'off' },
  },
);
