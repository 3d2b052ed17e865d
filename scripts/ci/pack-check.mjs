#!/usr/bin/env node
/**
 * The package as users install it (CI step "package"):
 *
 *  1. `npm pack` (its `prepack` script builds dist/), then `publint` and `@arethetypeswrong/cli`
 *     on the tarball; both fail the step on errors.
 *  2. Every source map in the tarball carries the text of each source it names (`sourcesContent`)
 *     or the source itself ships: a map never points at a file the user does not have. Every
 *     relative link in a shipped Markdown file (README.md, docs/, examples/, CHANGELOG.md)
 *     reaches a file that ships. No shipped declaration (.d.ts) carries an `@internal` tag.
 *  3. A temporary project installs the tarball and the peer clients (the versions package.json
 *     asks for: peerDependencies, else dependencies) and compiles, with `strict` and
 *     `skipLibCheck: false`, under three settings:
 *       cjs      package.json "type": "commonjs", module/moduleResolution node16
 *       esm      package.json "type": "module",   module/moduleResolution node16
 *       bundler  module esnext, moduleResolution bundler
 *     the sources:
 *       - every ```ts block of README.md, docs/*.md and examples/*\/README.md that is marked
 *         `<!-- typecheck -->` (an HTML comment right above the fence; lines inside the comment
 *         are declarations prepended to the block, e.g. `declare const logger: Logger;`). A ts
 *         block must be marked `<!-- typecheck -->` or `<!-- typecheck: skip (why) -->`, so no
 *         block escapes the check unnoticed. `<!-- typecheck: esm (why) -->` checks a block in the
 *         esm and bundler settings only (a library that ships ES modules only, such as Kysely);
 *       - every .ts file under examples/, with its imports of the repository's own folders
 *         (`../../src`, `../../src/adapter-kit`, `../../adapters/redis`) rewritten to the
 *         package's entry points (`twophase`, `twophase/adapter-kit`, `twophase/redis`): an
 *         example that reaches past an entry point fails.
 *         In the esm setting relative imports get the `.js` ending node16 ESM requires.
 *
 *     The ORM libraries of the transaction port are installed as a user installs them: Prisma's
 *     CLI and driver adapter beside @prisma/client, then `prisma generate` on the schema that
 *     docs/orm/prisma.md shows, into docs-blocks/generated/prisma of each setting (the module
 *     format and import endings of that setting), which the Prisma blocks import.
 *
 *  4. Only the clients a service uses get installed: a project with the tarball and kafkajs holds
 *     no amqplib nor amqp-connection-manager, and one with the tarball and the RabbitMQ clients
 *     holds no kafkajs (npm installs a dependency's required peers, so no dependency of twophase
 *     may require a client).
 *
 * Usage: node scripts/ci/pack-check.mjs [--keep] [--only cjs,esm,bundler]
 *   TWOPHASE_PACK_CHECK_EXTRA="pkg@range ..." installs more packages into the temporary project
 *   (for diagnosis only; CI sets nothing).
 * Exit code 0 when everything passes, 1 otherwise.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const keep = args.includes('--keep');
const onlyArg = args.indexOf('--only');
const SETTINGS = {
  cjs: { type: 'commonjs', compilerOptions: { module: 'node16', moduleResolution: 'node16' } },
  esm: { type: 'module', compilerOptions: { module: 'node16', moduleResolution: 'node16' } },
  bundler: { type: 'module', compilerOptions: { module: 'esnext', moduleResolution: 'bundler' } },
};
const settings = onlyArg >= 0 ? args[onlyArg + 1].split(',') : Object.keys(SETTINGS);
for (const s of settings) if (!SETTINGS[s]) fail(`unknown setting "${s}" (known: ${Object.keys(SETTINGS).join(', ')})`);

/** Packages the examples import besides twophase and the peer clients, at the repository's versions. */
const EXAMPLE_PACKAGES = ['commander', '@opentelemetry/sdk-node', '@opentelemetry/sdk-metrics', '@opentelemetry/sdk-trace-base', 'express', '@types/express'];
/** Packages only the docs' blocks import (not used by the repository itself). @nestjs/common 12 ships ESM only, so a CommonJS package runs Nest 11: the check uses 11. */
const DOC_PACKAGES = ['@nestjs/common@11', 'rxjs@7', 'reflect-metadata@0.2'];
/** The peer clients a user installs next to twophase. */
const PEER_CLIENTS = ['ioredis', 'amqplib', 'amqp-connection-manager', 'kafkajs', '@platformatic/kafka', 'pg', '@opentelemetry/api', 'drizzle-orm', '@prisma/client', 'kysely', 'typeorm'];
/** What a Prisma user installs beside @prisma/client: the CLI that generates the client, and the driver adapter. */
const PRISMA_TOOLS = ['prisma', '@prisma/adapter-pg'];
/**
 * TypeORM 1.1 declares an optional peer ioredis@^5, which npm refuses beside ioredis 6 (ERESOLVE);
 * docs/orm/typeorm.md gives users this override.
 */
const OVERRIDES = { typeorm: { ioredis: '^6.0.0' } };
/**
 * `prisma generate` runs no engine, but the CLI looks for its schema engine first and downloads it
 * from binaries.prisma.sh when missing; any existing file named here skips that download.
 */
const PRISMA_ENV = { PRISMA_SCHEMA_ENGINE_BINARY: process.execPath, PRISMA_HIDE_UPDATE_MESSAGE: '1' };
/** Declarations of peer clients whose own type errors under `skipLibCheck: false` are not twophase's (they are shown, not counted). */
// ioredis 6.1.0's own declarations import redis-errors, which ships no types (2 errors inside
// node_modules/ioredis under skipLibCheck: false; 6.0.0 had none).
const FOREIGN_DECLARATIONS = ['../node_modules/drizzle-orm/', '../node_modules/ioredis/'];
/** Type packages a user installs beside a peer client that ships no types of its own (pg). */
const PEER_TYPES = ['@types/pg'];

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const problems = [];

function fail(message) {
  console.error(`pack-check: ${message}`);
  process.exit(1);
}

function run(cmd, argv, cwd, { capture = false } = {}) {
  const result = spawnSync(cmd, argv, { cwd, encoding: 'utf8', stdio: capture ? 'pipe' : 'inherit' });
  if (result.error) throw result.error;
  return result;
}

function versionOf(name) {
  const range = pkg.peerDependencies?.[name] ?? pkg.dependencies?.[name] ?? pkg.devDependencies?.[name];
  if (!range) fail(`package.json names no version of ${name}`);
  return `${name}@${range}`;
}

function walk(dir, keepFile) {
  const out = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...walk(path, keepFile));
    else if (keepFile(path)) out.push(path);
  }
  return out;
}

// ---- 1. pack, publint, attw -------------------------------------------------------------------
const work = mkdtempSync(join(tmpdir(), 'twophase-pack-'));
console.log(`== npm run build, npm pack (work dir ${work})`);
if (run('npm', ['run', '--silent', 'build'], ROOT).status !== 0) fail('npm run build failed');
// The prepack script builds too; it just ran, and its output would mix with pack's JSON.
const packed = JSON.parse(execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', work], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }));
const tarball = join(work, packed[0].filename);
const files = packed[0].files.map((f) => f.path);
console.log(`   ${packed[0].filename}: ${files.length} files, ${packed[0].size} bytes`);

console.log('== publint');
if (run('npx', ['--no-install', 'publint', 'run', tarball, '--level', 'warning'], ROOT).status !== 0) problems.push('publint reported errors');

console.log('== @arethetypeswrong/cli');
if (run('npx', ['--no-install', 'attw', tarball, '--format', 'table-flipped'], ROOT).status !== 0) problems.push('@arethetypeswrong/cli reported problems');

// ---- 2. source maps ---------------------------------------------------------------------------
console.log('== source maps');
const unpacked = join(work, 'unpacked');
mkdirSync(unpacked);
execFileSync('tar', ['xzf', tarball, '-C', unpacked]);
let maps = 0;
const problemsBeforeMaps = problems.length;
for (const file of files.filter((f) => f.endsWith('.map'))) {
  maps++;
  const mapPath = join(unpacked, 'package', file);
  const map = JSON.parse(readFileSync(mapPath, 'utf8'));
  map.sources.forEach((source, i) => {
    const shipped = files.includes(relative(join(unpacked, 'package'), resolve(dirname(mapPath), map.sourceRoot ?? '', source)));
    if (!shipped && typeof map.sourcesContent?.[i] !== 'string') problems.push(`${file} points at ${source}, which neither ships nor is inlined`);
  });
}
console.log(`   ${maps} maps checked, ${problems.length - problemsBeforeMaps} pointing at a source that neither ships nor is inlined`);

// ---- 2b. links in the shipped documents -------------------------------------------------------
// Someone who installed the package reads node_modules/twophase/README.md and docs/: every
// relative link in a shipped Markdown file must reach a file that ships too.
console.log('== links in shipped documents');
const problemsBeforeLinks = problems.length;
let links = 0;
for (const doc of files.filter((f) => f.endsWith('.md'))) {
  const text = readFileSync(join(unpacked, 'package', doc), 'utf8').replace(/```[\s\S]*?```/g, '');
  for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = match[1].split('#')[0];
    if (target === '' || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
    links++;
    const path = relative(join(unpacked, 'package'), resolve(dirname(join(unpacked, 'package', doc)), decodeURIComponent(target)));
    const shipped = files.includes(path) || files.some((f) => f.startsWith(`${path}/`));
    if (!shipped) problems.push(`${doc} links to ${match[1]}, which does not ship`);
  }
}
console.log(`   ${links} relative links checked, ${problems.length - problemsBeforeLinks} pointing at a file that does not ship`);

// ---- 2c. no internals in the published types -------------------------------------------------
// A member tagged `@internal` in a shipped declaration is part of the types users compile
// against all the same: what the package keeps to itself must not be public in the first place.
console.log('== internals in shipped declarations');
const problemsBeforeInternals = problems.length;
const declarations = files.filter((f) => f.endsWith('.d.ts'));
for (const declaration of declarations) {
  const lines = readFileSync(join(unpacked, 'package', declaration), 'utf8').split('\n');
  lines.forEach((line, i) => {
    if (/@internal\b/.test(line)) problems.push(`${declaration}:${i + 1} publishes a member tagged @internal`);
  });
}
console.log(`   ${declarations.length} declaration files checked, ${problems.length - problemsBeforeInternals} lines tagged @internal`);

// ---- 3. compile as a user ---------------------------------------------------------------------
/** Code blocks marked for the check, as { name, code }. */
function docBlocks() {
  const docs = ['README.md', ...walk(join(ROOT, 'docs'), (p) => p.endsWith('.md') && !p.includes(`${join('docs', 'api')}`)).map((p) => relative(ROOT, p))];
  for (const dir of readdirSync(join(ROOT, 'examples'))) {
    if (existsSync(join(ROOT, 'examples', dir, 'README.md'))) docs.push(join('examples', dir, 'README.md'));
  }
  const blocks = [];
  for (const doc of docs) {
    const lines = readFileSync(join(ROOT, doc), 'utf8').split('\n');
    for (let i = 0; i < lines.length; i++) {
      if (!/^```(ts|typescript)\b/.test(lines[i])) continue;
      // The marker: an HTML comment ending on the line above the fence.
      let j = i - 1;
      if (j >= 0 && lines[j].trim() === '-->') while (j > 0 && !lines[j].startsWith('<!--')) j--;
      const marker = j >= 0 ? lines[j].trim() : '';
      if (/^<!--\s*typecheck:\s*skip/.test(marker)) continue;
      const esmOnly = /^<!--\s*typecheck:\s*esm\b/.test(marker);
      if (!/^<!--\s*typecheck\b/.test(marker)) {
        problems.push(`${doc}:${i + 1}: a ts block without <!-- typecheck --> or <!-- typecheck: skip (why) --> above it`);
        continue;
      }
      const prelude = marker.endsWith('-->') ? [] : lines.slice(j + 1, i - 1);
      let end = i + 1;
      while (end < lines.length && !lines[end].startsWith('```')) end++;
      const name = `${doc.replace(/[^A-Za-z0-9]+/g, '-').toLowerCase()}-line-${i + 1}.ts`;
      blocks.push({ name, esmOnly, code: [...prelude, ...lines.slice(i + 1, end), 'export {};', ''].join('\n') });
      i = end;
    }
  }
  return blocks;
}

/** Rewrites the repository-relative imports of an example file to package entry points. */
function asUserCode(file, code, esm) {
  const fileDir = dirname(file);
  return code.replace(/(from\s+|import\s*\(\s*|import\s+)(['"])(\.{1,2}\/[^'"]+)\2/g, (whole, lead, quote, spec) => {
    const target = relative(ROOT, resolve(fileDir, spec)).split('\\').join('/');
    if (target === 'src') return `${lead}${quote}twophase${quote}`;
    if (target === 'src/adapter-kit') return `${lead}${quote}twophase/adapter-kit${quote}`;
    const adapter = /^adapters\/([a-z]+)$/.exec(target);
    if (adapter) return `${lead}${quote}twophase/${adapter[1]}${quote}`;
    // The database libraries' transaction ports: adapters/postgres/orm/drizzle → twophase/drizzle.
    const orm = /^adapters\/postgres\/orm\/([a-z]+)$/.exec(target);
    if (orm) return `${lead}${quote}twophase/${orm[1]}${quote}`;
    if (target.startsWith('src/') || target.startsWith('adapters/')) {
      problems.push(`${relative(ROOT, file)} imports ${spec}, past the package's entry points`);
      return whole;
    }
    return esm && !spec.endsWith('.js') ? `${lead}${quote}${spec}.js${quote}` : whole;
  });
}

/** A doc block's relative imports (`./generated/prisma/client`) with the `.js` ending node16 ESM requires. */
function withJsEndings(code) {
  return code.replace(/(from\s+)(['"])(\.{1,2}\/[^'"]+?)(?<!\.js)\2/g, (_whole, lead, quote, spec) => `${lead}${quote}${spec}.js${quote}`);
}

/** The first ```prisma block of docs/orm/prisma.md: the schema its examples use. */
function prismaSchema() {
  const match = /^```prisma\n([\s\S]*?)^```/m.exec(readFileSync(join(ROOT, 'docs', 'orm', 'prisma.md'), 'utf8'));
  if (!match) fail('docs/orm/prisma.md shows no ```prisma schema block');
  return match[1];
}

/** `prisma generate` in the setting's folder, as its user would: output docs-blocks/generated/prisma. */
function generatePrismaClient(dir, setting) {
  const esm = SETTINGS[setting].type === 'module';
  const generator = `  output   = "../docs-blocks/generated/prisma"\n  moduleFormat = "${esm ? 'esm' : 'cjs'}"\n  importFileExtension = "${setting === 'esm' ? 'js' : ''}"\n`;
  const schema = prismaSchema().replace(/^\s*output\s*=.*\n/m, generator);
  mkdirSync(join(dir, 'prisma'), { recursive: true });
  writeFileSync(join(dir, 'prisma', 'schema.prisma'), schema);
  const result = spawnSync(process.execPath, [join(project, 'node_modules', 'prisma', 'build', 'index.js'), 'generate', '--schema', join('prisma', 'schema.prisma')], {
    cwd: dir,
    encoding: 'utf8',
    env: { ...process.env, ...PRISMA_ENV },
  });
  if (result.status !== 0) {
    process.stdout.write(result.stdout + result.stderr);
    problems.push(`${setting}: prisma generate failed`);
  }
}

console.log('== temporary project: install the tarball and the peer clients');
const project = join(work, 'project');
mkdirSync(project);
writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'twophase-pack-check', private: true, version: '0.0.0', overrides: OVERRIDES }, null, 2));
const installs = [
  tarball,
  ...PEER_CLIENTS.map(versionOf),
  ...PEER_TYPES.map(versionOf),
  ...EXAMPLE_PACKAGES.map(versionOf),
  ...PRISMA_TOOLS.map(versionOf),
  ...DOC_PACKAGES,
  versionOf('@types/node'),
  ...(process.env.TWOPHASE_PACK_CHECK_EXTRA ?? '').split(/\s+/).filter(Boolean),
];
console.log(`   npm install ${installs.map((s) => (s === tarball ? 'twophase.tgz' : s)).join(' ')}`);
if (run('npm', ['install', '--no-audit', '--no-fund', '--loglevel', 'error', ...installs], project).status !== 0) fail('npm install in the temporary project failed');

const sources = [
  ...docBlocks().map(({ name, code, esmOnly }) => ({ path: join('docs-blocks', name), code, example: false, esmOnly })),
  ...walk(join(ROOT, 'examples'), (p) => p.endsWith('.ts')).map((p) => ({ path: relative(ROOT, p), code: readFileSync(p, 'utf8'), file: p })),
];
const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
for (const setting of settings) {
  console.log(`== compile as a user: ${setting} (${JSON.stringify(SETTINGS[setting].compilerOptions)}), ${sources.length} files`);
  const dir = join(project, setting);
  mkdirSync(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `check-${setting}`, private: true, type: SETTINGS[setting].type }, null, 2));
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify(
      {
        compilerOptions: {
          ...SETTINGS[setting].compilerOptions,
          target: 'ES2022',
          lib: ['ES2022'],
          types: ['node'],
          strict: true,
          skipLibCheck: false,
          noEmit: true,
        },
        include: ['**/*.ts'],
      },
      null,
      2,
    ),
  );
  for (const source of sources) {
    if (source.esmOnly && SETTINGS[setting].type !== 'module') continue;
    const out = join(dir, source.path);
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, source.file ? asUserCode(source.file, source.code, setting === 'esm') : setting === 'esm' ? withJsEndings(source.code) : source.code);
  }
  generatePrismaClient(dir, setting);
  const result = run(process.execPath, [tsc, '-p', 'tsconfig.json', '--pretty', 'false'], dir, { capture: true });
  // Errors inside a peer client's own declarations are the client's (drizzle-orm 0.45 does not pass
  // skipLibCheck: false: its sqlite-core types, a DOM TextDecoder type): shown, not counted.
  const lines = (result.stdout + result.stderr).split('\n');
  const theirs = (line) => FOREIGN_DECLARATIONS.some((prefix) => line.startsWith(prefix));
  const counted = lines.filter((line) => /error TS/.test(line) && !theirs(line));
  const foreign = lines.filter((line) => /error TS/.test(line) && theirs(line));
  if (foreign.length > 0) console.log(`   ${foreign.length} errors inside ${FOREIGN_DECLARATIONS.join(', ')} (not counted)`);
  if (result.status !== 0 && (counted.length > 0 || foreign.length === 0)) {
    process.stdout.write(lines.filter((line) => !theirs(line)).join('\n'));
    problems.push(`${setting}: the user's compile failed (${counted.length} errors)`);
  } else {
    console.log('   ok');
  }
}

// ---- 4. a service installs only its own clients ------------------------------------------------
console.log('== one broker only: the tarball with kafkajs, then with the RabbitMQ clients');
for (const [name, clients, absent] of [
  ['kafka-only', ['kafkajs'], ['amqplib', 'amqp-connection-manager']],
  ['rabbitmq-only', ['amqplib', 'amqp-connection-manager'], ['kafkajs']],
]) {
  const dir = join(work, name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `twophase-${name}`, private: true, version: '0.0.0' }, null, 2));
  if (run('npm', ['install', '--no-audit', '--no-fund', '--loglevel', 'error', tarball, ...clients.map(versionOf)], dir).status !== 0) {
    fail(`${name}: npm install failed`);
    continue;
  }
  const installed = absent.filter((peer) => existsSync(join(dir, 'node_modules', peer)));
  if (installed.length > 0) problems.push(`${name}: npm installed ${installed.join(', ')} too`);
  else console.log(`   ${name}: no ${absent.join(', ')}`);
}

if (keep) console.log(`kept ${work}`);
else rmSync(work, { recursive: true, force: true });
if (problems.length > 0) {
  console.error(`\npack-check: FAILED\n- ${problems.join('\n- ')}`);
  process.exit(1);
}
console.log('\npack-check: the package installs, lints and compiles as users use it');
