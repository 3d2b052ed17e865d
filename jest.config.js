/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }],
    // Kysely 0.29 ships ES modules only. Node (>= 20.19) requires them natively; jest's own module
    // loader does not, so its files are turned into CommonJS for the tests that load it.
    '/node_modules/kysely/.+\\.js$': ['ts-jest', { tsconfig: { allowJs: true, module: 'commonjs', target: 'ES2022' } }],
  },
  transformIgnorePatterns: ['/node_modules/(?!kysely/)'],
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  moduleFileExtensions: ['ts', 'js', 'json'],
  // Integration suites start and stop real services; keep them serial on a 2-core machine.
  maxWorkers: 1,
  testTimeout: 60000,
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  // The default reporter, then a list of every skipped suite with its reason (issue #12 item 10).
  reporters: ['default', '<rootDir>/test/support/skip-summary-reporter.js'],
};
