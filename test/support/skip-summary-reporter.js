// Jest reporter: at the end of every run, lists what was skipped and why, so "7 skipped" in the
// default summary never hides a suite that did not run. describeWithServices (services.ts) puts
// its reason in the skipped describe's title as "[skipped: <reason>]"; any other skip (it.skip,
// describe.skip, it.todo) is reported as skipped in the code.
'use strict';

const path = require('node:path');

const SKIPPED_STATUSES = new Set(['pending', 'skipped', 'disabled', 'todo']);
const REASON = /\[skipped: (.*)\]$/;

/**
 * Groups the skipped tests of a run by file and skipped group.
 * @param {readonly { testFilePath: string, testResults: readonly { status: string, ancestorTitles: readonly string[], title: string }[] }[]} fileResults
 * @param {string} rootDir paths are printed relative to it
 * @returns {{ file: string, group: string, reason: string, tests: number }[]} one entry per group, in run order
 */
function summariseSkips(fileResults, rootDir) {
  /** @type {Map<string, { file: string, group: string, reason: string, tests: number }>} */
  const groups = new Map();
  for (const file of fileResults) {
    const relative = path.relative(rootDir, file.testFilePath) || file.testFilePath;
    for (const test of file.testResults) {
      if (!SKIPPED_STATUSES.has(test.status)) continue;
      // The outermost title that carries a reason names the group; else the test itself.
      const index = test.ancestorTitles.findIndex((t) => REASON.test(t));
      const group = index >= 0 ? test.ancestorTitles.slice(0, index + 1).join(' › ') : [...test.ancestorTitles, test.title].join(' › ');
      const reason =
        index >= 0 ? REASON.exec(test.ancestorTitles[index])[1] : test.status === 'todo' ? 'todo' : 'skipped in the code (it.skip / describe.skip) or by a name filter (-t)';
      const id = `${relative}\u0000${group}`;
      const entry = groups.get(id) ?? { file: relative, group: group.replace(/ \[skipped: .*\]$/, ''), reason, tests: 0 };
      entry.tests++;
      groups.set(id, entry);
    }
  }
  return [...groups.values()];
}

/** Renders the summary printed at the end of a run. */
function formatSkips(entries) {
  if (entries.length === 0) return 'Skipped: nothing (every suite ran).';
  const tests = entries.reduce((n, e) => n + e.tests, 0);
  const lines = [`Skipped: ${tests} test${tests === 1 ? '' : 's'} in ${entries.length} group${entries.length === 1 ? '' : 's'}:`];
  for (const e of entries) lines.push(`  - ${e.file} › ${e.group} (${e.tests} test${e.tests === 1 ? '' : 's'}): ${e.reason}`);
  return lines.join('\n');
}

class SkipSummaryReporter {
  constructor(globalConfig) {
    this.rootDir = globalConfig.rootDir;
  }

  onRunComplete(_contexts, results) {
    process.stderr.write(`\n${formatSkips(summariseSkips(results.testResults, this.rootDir))}\n`);
  }
}

module.exports = SkipSummaryReporter;
module.exports.summariseSkips = summariseSkips;
module.exports.formatSkips = formatSkips;
