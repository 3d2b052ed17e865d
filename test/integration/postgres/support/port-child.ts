/**
 * A worker process for the SIGKILL test of the transactional mode through a transaction port:
 * claims one key with the port's claimer, writes the effect through the library's transaction,
 * records a marker (auto-committed, outside the transaction) and hangs until the parent kills it
 * with SIGKILL: between the effect and the COMMIT.
 *
 *   node -r ts-node/register/transpile-only port-child.ts '<json config>'
 */
import { Pool } from 'pg';
import { PostgresClaimer } from '../../../../adapters/postgres';
import { type PortName, portUnderTest } from './ports';

interface ChildConfig {
  readonly schema: string;
  readonly pg: Record<string, unknown>;
  readonly port: PortName;
  readonly key: string;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '{}') as ChildConfig;
  const pool = new Pool(config.pg);
  pool.on('error', () => undefined);
  const p = portUnderTest(config.port, pool);
  const claimer = new PostgresClaimer({ pool, transactions: p.port }, { schema: config.schema, mode: 'transactional' });
  const claim = await claimer.claim(config.key, { leaseTtlMs: 60_000, doneTtlMs: 60_000 });
  if (claim.state !== 'acquired') throw new Error(`child: expected acquired, got ${claim.state}`);
  await p.write(claim.receipt.transaction, `${config.schema}.effects`, config.key, claim.receipt.fencingToken);
  await pool.query(`INSERT INTO ${config.schema}.markers (name) VALUES ('inserted')`);
  await new Promise(() => undefined);
}

main().catch((error: unknown) => {
  process.stderr.write(`port-child: ${String(error)}\n`);
  process.exit(1);
});
