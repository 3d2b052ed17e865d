/**
 * scripts/ci/deps-check.mjs, the offline dependency check: every installed name@version must be
 * on the committed allow-list; an unknown package or version and a tree npm reports broken fail.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SCRIPT = join(__dirname, '..', '..', 'scripts', 'ci', 'deps-check.mjs');

describe('deps-check (offline dependency allow-list)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'deps-check-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  function run(tree: object, allowlist: string, ...extra: string[]) {
    writeFileSync(join(dir, 'tree.json'), JSON.stringify(tree));
    writeFileSync(join(dir, 'allow.txt'), allowlist);
    const r = spawnSync(process.execPath, [SCRIPT, '--tree', join(dir, 'tree.json'), '--allowlist', join(dir, 'allow.txt'), ...extra], { encoding: 'utf8' });
    return { code: r.status, out: r.stdout, err: r.stderr };
  }

  // `b` is listed first as a deduped entry without its dependencies, then in full.
  const tree = {
    name: 'app',
    dependencies: {
      a: { version: '1.0.0', dependencies: { b: { version: '2.0.0' } } },
      b: { version: '2.0.0', dependencies: { c: { version: '3.0.0' } } },
    },
  };

  test('a tree whose every package is allow-listed passes', () => {
    expect(run(tree, '# comment\na@1.0.0\nb@2.0.0\nc@3.0.0\n')).toMatchObject({ code: 0, out: 'deps-check: 3 installed packages, all allow-listed\n' });
  });

  test('an unknown package, or a known one at another version, fails and is named', () => {
    const r = run(tree, 'a@1.0.0\nb@1.9.0\n');
    expect(r.code).toBe(1);
    expect(r.err).toContain('not in the allow-list: b@2.0.0');
    expect(r.err).toContain('not in the allow-list: c@3.0.0');
    expect(r.err).toContain('FAILED: 2 package(s) not allowed');
  });

  test('a tree npm reports broken fails', () => {
    const r = run({ ...tree, problems: ['invalid: b@2.0.0 node_modules/b'] }, 'a@1.0.0\nb@2.0.0\nc@3.0.0\n');
    expect(r.code).toBe(1);
    expect(r.err).toContain('npm reports a broken tree: invalid: b@2.0.0');
  });

  test('--update writes the sorted list, which then passes; an unknown option is a usage error', () => {
    expect(run(tree, '', '--update').code).toBe(0);
    expect(readFileSync(join(dir, 'allow.txt'), 'utf8').split('\n').filter((l) => l !== '' && !l.startsWith('#'))).toEqual(['a@1.0.0', 'b@2.0.0', 'c@3.0.0']);
    expect(run(tree, readFileSync(join(dir, 'allow.txt'), 'utf8')).code).toBe(0);
    expect(run(tree, '', '--updat').code).toBe(2);
  });
});
