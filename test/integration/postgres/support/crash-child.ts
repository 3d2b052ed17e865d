/**
 * A worker process for the SIGKILL tests of the transactional mode through a transaction port:
 * claims one key with the claimer on the port under test (a raw port of ports.ts, or an ORM's port
 * of orm-libraries.ts: Prisma, Kysely, TypeORM), writes the effect through that library's
 * transaction (`receipt.transaction`), records a marker (auto-committed, outside the transaction)
 * and hangs until the parent kills it with SIGKILL: between the effect and the COMMIT.
 *
 *   node -r ts-node/register/transpile-only crash-child.ts '<json config>'
 */
import { Pool, type PoolConfig } from 'pg';
import { PostgresClaimer, type TransactionPort } from '../../../../adapters/postgres';
import { type OrmName, ormUnderTest } from './orm-libraries';
import { type PortName, portUnderTest } from './ports';

/** The child's argument: one of `port` or `orm`. */
export interface CrashChildConfig {
  readonly schema: string;
  readonly pg: PoolConfig;
  readonly key: string;
  readonly port?: PortName;
  readonly orm?: OrmName;
}

interface UnderTest {
  readonly port: TransactionPort<unknown>;
  /** The pool the claimer must use, when the library's path needs its own. */
  readonly claimerPool?: Pool;
  write(tx: unknown, key: string, token: number): Promise<void>;
}

async function underTest(config: CrashChildConfig, pool: Pool): Promise<UnderTest> {
  if (config.orm !== undefined) {
    const lib = await ormUnderTest(config.orm, config.schema);
    return {
      port: lib.port as TransactionPort<unknown>,
      claimerPool: lib.claimerPool,
      write: (tx, key, token) => {
        lib.checkClaimTransaction?.(tx as never);
        return lib.writeEffect(tx as never, key, token);
      },
    };
  }
  if (config.port === undefined) throw new Error('crash-child: the config names neither a port nor an ORM');
  const p = portUnderTest(config.port, pool);
  return { port: p.port as TransactionPort<unknown>, write: (tx, key, token) => p.write(tx as never, `${config.schema}.effects`, key, token) };
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '{}') as CrashChildConfig;
  const pool = new Pool(config.pg);
  pool.on('error', () => undefined);
  const lib = await underTest(config, pool);
  const claimer = new PostgresClaimer({ pool: lib.claimerPool ?? pool, transactions: lib.port }, { schema: config.schema, mode: 'transactional' });
  const claim = await claimer.claim(config.key, { leaseTtlMs: 60_000, doneTtlMs: 60_000 });
  if (claim.state !== 'acquired') throw new Error(`child: expected acquired, got ${claim.state}`);
  await lib.write(claim.receipt.transaction, config.key, claim.receipt.fencingToken);
  await pool.query(`INSERT INTO ${config.schema}.markers (name) VALUES ('inserted')`);
  await new Promise(() => undefined);
}

main().catch((error: unknown) => {
  process.stderr.write(`crash-child: ${String(error)}\n`);
  process.exit(1);
});
