#!/usr/bin/env node
/**
 * Offline dependency check (CI step "dependencies"): every package installed in node_modules, as
 * `npm ls --all --json` reports it, must be listed with its exact version in
 * scripts/ci/dependency-allowlist.txt (one `name@version` a line, sorted; `#` starts a comment).
 * A package or version nobody reviewed (a lock file change that pulled in something new) fails
 * the step, and so does a tree npm itself reports broken (missing, invalid or extraneous
 * packages). Entries no longer installed are reported, not failed.
 *
 * It needs no network: it reads the installed tree, so it runs where the registry's advisory
 * endpoint (`npm audit`) cannot be reached. It does not know about vulnerabilities; it makes
 * every change of the dependency tree a reviewed change. Run `npm audit` where the endpoint
 * works (docs/security.md).
 *
 * Usage:
 *   node scripts/ci/deps-check.mjs              check the installed tree
 *   node scripts/ci/deps-check.mjs --update     rewrite the allow-list from the installed tree
 *                                               (after reviewing a dependency change)
 *   --tree <file>       read `npm ls --all --json` output from a file instead of running npm
 *   --allowlist <file>  use another allow-list file
 * Exit codes: 0 the tree is allowed, 1 it is not (each package named), 2 bad usage.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const flag = (name) => {
  const i = args.indexOf(name);
  if (i === -1) return undefined;
  const value = args[i + 1];
  if (value === undefined || value.startsWith('--')) usage(`${name} needs a value`);
  return value;
};
function usage(message) {
  process.stderr.write(`deps-check: ${message}\nusage: node scripts/ci/deps-check.mjs [--update] [--tree <file>] [--allowlist <file>]\n`);
  process.exit(2);
}
for (const a of args) if (a.startsWith('--') && !['--update', '--tree', '--allowlist'].includes(a)) usage(`unknown option ${a}`);

const allowlistPath = flag('--allowlist') ?? join(root, 'scripts', 'ci', 'dependency-allowlist.txt');
const treeFile = flag('--tree');

/** `npm ls --all --json`; npm exits non-zero when the tree has problems, and still prints it. */
function readTree() {
  if (treeFile !== undefined) return JSON.parse(readFileSync(treeFile, 'utf8'));
  try {
    return JSON.parse(execFileSync('npm', ['ls', '--all', '--json'], { cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, stdio: ['ignore', 'pipe', 'ignore'] }));
  } catch (error) {
    if (typeof error.stdout === 'string' && error.stdout.trim().startsWith('{')) return JSON.parse(error.stdout);
    throw error;
  }
}

/** Every `name@version` in the tree, and npm's own problem reports. */
function installed(tree) {
  const found = new Set();
  const problems = [...(tree.problems ?? [])];
  const walk = (node) => {
    for (const [name, dep] of Object.entries(node.dependencies ?? {})) {
      if (dep.missing) {
        if (!dep.peerMissing && !(dep.optional === true)) problems.push(`missing: ${name}${dep.required ? `@${dep.required}` : ''}`);
        continue;
      }
      if (dep.version === undefined) continue;
      // Not skipped when seen: the first place npm lists a package may be a `deduped` entry without its dependencies.
      found.add(`${name}@${dep.version}`);
      walk(dep);
    }
  };
  walk(tree);
  return { found, problems: [...new Set(problems)] };
}

function readAllowlist() {
  let text;
  try {
    text = readFileSync(allowlistPath, 'utf8');
  } catch {
    return new Set();
  }
  return new Set(text.split('\n').map((line) => line.replace(/#.*/, '').trim()).filter((line) => line !== ''));
}

const { found, problems } = installed(readTree());
if (args.includes('--update')) {
  const header = '# Packages (name@version) allowed in node_modules; checked by scripts/ci/deps-check.mjs.\n# Regenerate with `node scripts/ci/deps-check.mjs --update` after reviewing a dependency change.\n';
  writeFileSync(allowlistPath, header + [...found].sort().join('\n') + '\n');
  process.stdout.write(`deps-check: wrote ${found.size} packages to ${allowlistPath}\n`);
  process.exit(0);
}
const allowed = readAllowlist();
const unknown = [...found].filter((id) => !allowed.has(id)).sort();
const gone = [...allowed].filter((id) => !found.has(id)).sort();
for (const p of problems) process.stderr.write(`deps-check: npm reports a broken tree: ${p}\n`);
for (const id of unknown) process.stderr.write(`deps-check: not in the allow-list: ${id}\n`);
if (gone.length > 0) process.stderr.write(`deps-check: ${gone.length} allow-listed package(s) no longer installed (run with --update to drop them): ${gone.slice(0, 10).join(', ')}${gone.length > 10 ? ', …' : ''}\n`);
if (unknown.length > 0 || problems.length > 0) {
  process.stderr.write(
    `deps-check: FAILED: ${unknown.length} package(s) not allowed, ${problems.length} problem(s). Review the change (npm ls <name>, the lock file diff), ` +
      'then run `node scripts/ci/deps-check.mjs --update` and commit the allow-list.\n',
  );
  process.exit(1);
}
process.stdout.write(`deps-check: ${found.size} installed packages, all allow-listed\n`);
