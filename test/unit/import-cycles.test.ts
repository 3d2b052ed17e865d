/**
 * No import cycle among the files of src/ and adapters/: every file stands above all it imports,
 * so a module is loaded only after its dependencies, and a layer can be read from the bottom up.
 * `import type` counts too: a type-only loop ties two files together as tightly for a reader.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, posix, relative } from 'node:path';
import ts from 'typescript';

const ROOT = join(__dirname, '..', '..');

/** The relative imports of each file, resolved to files of `files` (`./x` → `x.ts` or `x/index.ts`). */
function importGraph(files: ReadonlyMap<string, string>): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const [file, text] of files) {
    const targets = new Set<string>();
    for (const { fileName: spec } of ts.preProcessFile(text, true, true).importedFiles) {
      if (!spec.startsWith('.')) continue;
      const base = posix.normalize(posix.join(posix.dirname(file), spec));
      const target = [`${base}.ts`, `${base}/index.ts`].find((candidate) => files.has(candidate));
      if (target !== undefined && target !== file) targets.add(target);
    }
    graph.set(file, [...targets].sort());
  }
  return graph;
}

/**
 * One import loop per group of files that reach one another (a strongly connected component of
 * two files or more): the files along its shortest loop through the group's first file, that file
 * repeated at the end; `tied` is the size of the whole group.
 */
function importCycles(graph: ReadonlyMap<string, readonly string[]>): { loop: string[]; tied: number }[] {
  // Tarjan's strongly connected components, then one shortest loop through each group of two or more.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  let next = 0;
  const visit = (file: string): void => {
    index.set(file, next);
    low.set(file, next);
    next += 1;
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file)!, index.get(target)!));
      }
    }
    if (low.get(file) === index.get(file)) {
      const group: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        group.push(member);
      } while (member !== file);
      if (group.length > 1) groups.push(group.sort());
    }
  };
  for (const file of [...graph.keys()].sort()) if (!index.has(file)) visit(file);
  return groups.map((group) => ({ loop: shortestLoop(graph, group[0]!, new Set(group)), tied: group.length }));
}

function shortestLoop(graph: ReadonlyMap<string, readonly string[]>, start: string, within: ReadonlySet<string>): string[] {
  const previous = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const file = queue.shift()!;
    for (const target of graph.get(file) ?? []) {
      if (!within.has(target)) continue;
      if (target === start) {
        const path = [start];
        for (let at = file; at !== start; at = previous.get(at)!) path.splice(1, 0, at);
        return [...path, start];
      }
      if (!previous.has(target)) {
        previous.set(target, file);
        queue.push(target);
      }
    }
  }
  return [start, start];
}

function sourceFiles(folder: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) files.set(relative(ROOT, path).split('\\').join('/'), readFileSync(path, 'utf8'));
    }
  };
  walk(join(ROOT, folder));
  return files;
}

describe('import cycles', () => {
  const graph = importGraph(new Map([...sourceFiles('src'), ...sourceFiles('adapters')]));

  test.each(['src', 'adapters'])('no file of %s/ imports itself through other files', (folder) => {
    const edges = [...graph.values()].reduce((sum, targets) => sum + targets.length, 0);
    expect(edges).toBeGreaterThan(graph.size); // the imports were read at all
    const loops = importCycles(graph).filter(({ loop }) => loop[0]!.startsWith(`${folder}/`));
    expect(loops.map(({ loop, tied }) => `${loop.join(' -> ')} (${tied} files tied in all)`)).toEqual([]);
  });

  test('the check finds a loop of two files, a loop through an index.ts, and a type-only loop', () => {
    const files = new Map([
      ['a/one.ts', "import { two } from './two';\nexport const one = 1;"],
      ['a/two.ts', "export { one } from './one';\nexport const two = 2;"],
      ['b/index.ts', "export * from './inner';"],
      ['b/inner.ts', "import { other } from '../c/other';"],
      ['c/other.ts', "import type { X } from '../b';\nimport { readFileSync } from 'node:fs';"],
      ['d/alone.ts', "import { one } from '../a/one';"],
    ]);
    expect(importCycles(importGraph(files))).toEqual([
      { loop: ['a/one.ts', 'a/two.ts', 'a/one.ts'], tied: 2 },
      { loop: ['b/index.ts', 'b/inner.ts', 'c/other.ts', 'b/index.ts'], tied: 3 },
    ]);
  });
});
