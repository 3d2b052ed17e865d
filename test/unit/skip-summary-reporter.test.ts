/**
 * Issue #12 item 10: `npm test` ends with the list of skipped suites and their reasons.
 */
import { join } from 'node:path';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const reporter = require('../support/skip-summary-reporter.js') as {
  summariseSkips(results: unknown[], rootDir: string): { file: string; group: string; reason: string; tests: number }[];
  formatSkips(entries: unknown[]): string;
};

const root = '/repo';
const test = (status: string, ancestorTitles: string[], title: string) => ({ status, ancestorTitles, title });

describe('skip summary reporter', () => {
  it('groups the tests of a suite skipped by describeWithServices under its reason', () => {
    const results = [
      {
        testFilePath: join(root, 'test/integration/redis/redis-claimer.test.ts'),
        testResults: [
          test('pending', ['RedisClaimer [skipped: redis not reachable at 127.0.0.1:6379 (start redis-server)]', 'claim'], 'acquires'),
          test('pending', ['RedisClaimer [skipped: redis not reachable at 127.0.0.1:6379 (start redis-server)]'], 'commits'),
        ],
      },
      { testFilePath: join(root, 'test/unit/a.test.ts'), testResults: [test('passed', ['a'], 'runs'), test('pending', ['a'], 'later'), test('todo', [], 'idea')] },
    ];
    const entries = reporter.summariseSkips(results, root);
    expect(entries).toEqual([
      { file: 'test/integration/redis/redis-claimer.test.ts', group: 'RedisClaimer', reason: 'redis not reachable at 127.0.0.1:6379 (start redis-server)', tests: 2 },
      { file: 'test/unit/a.test.ts', group: 'a › later', reason: 'skipped in the code (it.skip / describe.skip) or by a name filter (-t)', tests: 1 },
      { file: 'test/unit/a.test.ts', group: 'idea', reason: 'todo', tests: 1 },
    ]);
    const text = reporter.formatSkips(entries);
    expect(text).toContain('Skipped: 4 tests in 3 groups:');
    expect(text).toContain('test/integration/redis/redis-claimer.test.ts › RedisClaimer (2 tests): redis not reachable at 127.0.0.1:6379');
  });

  it('says so when nothing was skipped', () => {
    expect(reporter.formatSkips(reporter.summariseSkips([{ testFilePath: join(root, 'x.test.ts'), testResults: [test('passed', [], 'x')] }], root))).toBe(
      'Skipped: nothing (every suite ran).',
    );
  });

  it('is registered in the jest configuration after the default reporter', () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const config = require('../../jest.config.js') as { reporters: string[] };
    expect(config.reporters).toEqual(['default', '<rootDir>/test/support/skip-summary-reporter.js']);
  });
});
