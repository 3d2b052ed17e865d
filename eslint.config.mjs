// Lint rules. The import restrictions hold the architecture: the core (src/) knows no broker,
// store or telemetry SDK, and an adapter reaches the core only through its two public entry points,
// `../../src` (twophase) and `../../src/adapter-kit` (twophase/adapter-kit).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const brokerAndStoreClients = ['amqplib', 'amqp-connection-manager', 'kafkajs', 'ioredis', 'pg', '@opentelemetry/*'];

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
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: brokerAndStoreClients, message: 'src/ is the core: it must not import a broker, store or telemetry client.' },
            { group: ['../adapters/*', '../../adapters/*'], message: 'the core never imports an adapter.' },
          ],
        },
      ],
    },
  },
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
