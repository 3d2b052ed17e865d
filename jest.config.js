/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  moduleFileExtensions: ['ts', 'js', 'json'],
  // Integration suites start and stop real services; keep them serial on a 2-core machine.
  maxWorkers: 1,
  testTimeout: 60000,
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  // The default reporter, then a list of every skipped suite with its reason (issue #12 item 10).
  reporters: ['default', '<rootDir>/test/support/skip-summary-reporter.js'],
};
