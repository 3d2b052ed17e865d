/**
 * A worker process for the SIGKILL tests of the ORM ports (Prisma, Kysely, TypeORM): claims one key
 * with the claimer on the library's port, writes the effect through the library's own API on
 * `receipt.transaction`, records a marker (auto-committed, outside the transaction) and hangs until
 * the parent kills it with SIGKILL: between the effect and the COMMIT.
 *
 *   node -r ts-node/register/transpile-only orm-child.ts '<json config>'
 */
import { Pool } from 'pg';
import { PostgresClaimer } from '../../../../adapters/postgres';
import { type OrmName, ormUnderTest } from './orm-libraries';

interface ChildConfig {
  readonly schema: string;
  readonly pg: Record<string, unknown>;
  readonly orm: OrmName;
  readonly key: string;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '{}') as ChildConfig;
  const pool = new Pool(config.pg);
  pool.on('error', () => undefined);
  const lib = await ormUnderTest(config.orm, config.schema);
  const claimer = new PostgresClaimer({ pool, transactions: lib.port }, { schema: config.schema, mode: 'transactional' });
  const claim = await claimer.claim(config.key, { leaseTtlMs: 60_000, doneTtlMs: 60_000 });
  if (claim.state !== 'acquired') throw new Error(`child: expected acquired, got ${claim.state}`);
  await lib.writeEffect(claim.receipt.transaction, config.key, claim.receipt.fencingToken);
  await pool.query(`INSERT INTO ${config.schema}.markers (name) VALUES ('inserted')`);
  await new Promise(() => undefined);
}

main().catch((error: unknown) => {
  process.stderr.write(`orm-child: ${String(error)}\n`);
  process.exit(1);
});
