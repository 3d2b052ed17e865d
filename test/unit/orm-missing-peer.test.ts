/**
 * The ORM entry points (`twophase/prisma`, `twophase/kysely`, `twophase/typeorm`) in a project
 * without their library: an error naming the package and the fix, not Node's bare "Cannot find
 * module"; and each entry's supported range is its package.json peerDependencies range.
 */
import { requireWithout } from '../support/require-without';

test.each([
  ['adapters/postgres/orm/prisma', '@prisma/client', 'twophase/prisma'],
  ['adapters/postgres/orm/kysely', 'kysely', 'twophase/kysely'],
  ['adapters/postgres/orm/typeorm', 'typeorm', 'twophase/typeorm'],
])('require(%s) without %s names the package and the install command', (entry, peer, name) => {
  const run = requireWithout(entry, peer);
  expect(run.status).not.toBe(0);
  expect(run.stderr).toMatch(/MissingPeerDependencyError/);
  expect(run.stderr).toContain(`${name} needs the package "${peer}"`);
  expect(run.stderr).toContain(`npm install ${peer}`);
});

test.each([
  ['adapters/postgres/orm/prisma'],
  ['adapters/postgres/orm/kysely'],
  ['adapters/postgres/orm/typeorm'],
])('require(%s) with its library installed loads under plain Node (Kysely 0.29 is ES modules, required natively)', (entry) => {
  const run = requireWithout(entry, '');
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
});

test("each ORM entry's supported range is its package.json peerDependencies range", async () => {
  const pkg = (await import('../../package.json')) as { peerDependencies: Record<string, string> };
  const ranges = {
    '@prisma/client': (await import('../../adapters/postgres/orm/prisma')).SUPPORTED_RANGE,
    kysely: (await import('../../adapters/postgres/orm/kysely')).SUPPORTED_RANGE,
    typeorm: (await import('../../adapters/postgres/orm/typeorm')).SUPPORTED_RANGE,
  };
  for (const [peer, range] of Object.entries(ranges)) expect([peer, range]).toEqual([peer, pkg.peerDependencies[peer]]);
});
