/**
 * `twophase/prisma` on the shared PostgreSQL: the port's contract on a generated Prisma 7 client
 * (test/support/prisma) with `@prisma/adapter-pg`, Prisma's interactive-transaction timer set from
 * twophase's limits, and the committed test client matching what `prisma generate` writes.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { ConfigurationError, silentLogger } from '../../../../src';
import { PostgresClaimer, TransactionAbortedError } from '../../../../adapters/postgres';
import { prismaTransactions } from '../../../../adapters/postgres/orm/prisma';
import { PrismaClient } from '../../../support/prisma/generated/client';
import { describeWithServices } from '../../../support/services';
import { createEffectTable, describePortContract, effectCount } from '../support/port-contract';
import { freshSchema } from '../support/pg-helpers';
import { ormUnderTest, type OrmUnderTest, prismaOn, prismaUnderTest, type PrismaTx } from '../support/orm-libraries';
import { describeClaimerThroughOrm } from '../support/orm-claimer-suite';

describeWithServices(['postgres'], 'twophase/prisma', () => {
  describePortContract<PrismaTx>('orm_more_prisma', 'prisma', (f) => prismaUnderTest(f.schema));
  describeClaimerThroughOrm('prisma');
  describeClaimerThroughOrm('prisma-pool');

  test("Prisma's interactive-transaction timeout is limits.timeoutMs: a transaction open longer is closed by Prisma and its write rolled back", async () => {
    const f = await freshSchema('orm_more_prisma_timer');
    const prisma = prismaOn(f.schema);
    try {
      await createEffectTable(f.pool, f.schema);
      const port = prismaTransactions(prisma);
      const started = Date.now();
      await expect(
        port.transaction(async (tx) => {
          await tx.effect.create({ data: { key: 't1', amount: 1 } });
          await new Promise((resolve) => setTimeout(resolve, 1500));
          await tx.effect.create({ data: { key: 't1', amount: 2 } });
        }, { timeoutMs: 600, maxWaitMs: 2000 }),
      ).rejects.toThrow(/timeout|expired|closed/i);
      expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
      expect(await effectCount(f.pool, f.schema, 't1')).toBe(0);
      // and a transaction longer than Prisma's own default (5000 ms) commits when the limit allows it
      const long = await port.transaction(async (tx) => {
        await tx.effect.create({ data: { key: 't2', amount: 1 } });
        await new Promise((resolve) => setTimeout(resolve, 5500));
        return tx.effect.count({ where: { key: 't2' } });
      }, { timeoutMs: 8000, maxWaitMs: 2000 });
      expect(long).toBe(1);
      expect(await effectCount(f.pool, f.schema, 't2')).toBe(1);
    } finally {
      await prisma.$disconnect();
      await f.cleanup();
    }
  });

  test.each(['prisma', 'prisma-pool'] as const)("%s: a handler busy past Prisma's timer (the lease plus operationTimeoutMs): the commit rejects with TransactionAbortedError naming the lease, in twophase's words; nothing is applied or left open", async (name) => {
    const f = await freshSchema('orm_more_prisma_expired');
    const lib = (await ormUnderTest(name, f.schema)) as unknown as OrmUnderTest<PrismaTx>;
    try {
      await createEffectTable(f.pool, f.schema);
      const claimer = new PostgresClaimer({ pool: lib.claimerPool ?? f.pool, logger: silentLogger, transactions: lib.port }, { schema: f.schema, mode: 'transactional', operationTimeoutMs: 1000 });
      await lib.port.transaction((tx) => tx.$queryRawUnsafe('SELECT 1'), { timeoutMs: 5000, maxWaitMs: 5000 }); // connected before the claim's 1000 ms wait starts
      const claim = await claimer.claim('busy-1', { leaseTtlMs: 400, doneTtlMs: 60_000 });
      if (claim.state !== 'acquired') throw new Error(`expected acquired, got ${claim.state}`);
      lib.checkClaimTransaction?.(claim.receipt.transaction as PrismaTx);
      const tx = claim.receipt.transaction as PrismaTx;
      await tx.effect.create({ data: { key: 'busy-1', amount: 1 } });
      // Short statements back to back: never idle for the lease, no statement as long as it, so
      // the server's timeouts stay quiet and Prisma's 1400 ms timer is what ends the transaction.
      // The handler stops at its first failed statement (Prisma refusing the expired transaction).
      const until = Date.now() + 3000;
      let failed: unknown;
      while (failed === undefined && Date.now() < until) await tx.$queryRawUnsafe('SELECT 1 AS one FROM pg_sleep(0.05)').catch((error: unknown) => (failed = error));
      expect(failed).toBeDefined();
      const late = await claim.receipt.commit().then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(late).toBeInstanceOf(TransactionAbortedError);
      const message = (late as Error).message;
      expect(message).toMatch(/^commit of "busy-1": the transaction did not commit \(Prisma closed the interactive transaction when its timer \(1400 ms\) ran out/);
      expect(message).toMatch(/raise leaseTtlMs\); nothing was applied$/);
      expect(message).not.toMatch(/queryRawUnsafe|interactive transaction timeout/);
      expect(await effectCount(f.pool, f.schema, 'busy-1')).toBe(0);
      const open = await f.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state LIKE 'idle in transaction%' AND datname = current_database() AND query LIKE '%${f.schema}%'`);
      expect(open.rows[0]!.n).toBe(0);
      const next = await claimer.claim('busy-1', { leaseTtlMs: 5000, doneTtlMs: 60_000 });
      expect(next).toMatchObject({ state: 'acquired', attempt: 2 });
      await next.receipt.release();
    } finally {
      await lib.close();
      await f.cleanup();
    }
  });

  test('prismaTransactions refuses an object that is not a PrismaClient and an unknown option (ConfigurationError)', () => {
    expect(() => prismaTransactions({} as unknown as PrismaClient)).toThrow(ConfigurationError);
    expect(() => prismaTransactions(prismaOn('public'), { timeoutMs: 1 } as never)).toThrow(/unknown option "timeoutMs"/);
  });
});

describe('the committed Prisma test client', () => {
  test('is what `prisma generate` writes for test/support/prisma/schema.prisma with the installed Prisma', () => {
    const source = join(__dirname, '../../../support/prisma');
    const dir = mkdtempSync(join(tmpdir(), 'orm-more-prisma-'));
    try {
      cpSync(join(source, 'schema.prisma'), join(dir, 'schema.prisma'));
      execFileSync(process.execPath, [require.resolve('prisma/build/index.js'), 'generate', '--schema', join(dir, 'schema.prisma')], {
        cwd: join(__dirname, '../../../..'),
        env: { ...process.env, ...PRISMA_GENERATE_ENV },
        stdio: 'pipe',
      });
      expect(tree(join(dir, 'generated'))).toEqual(tree(join(source, 'generated')));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

/**
 * `prisma generate` needs no engine binary, but the CLI checks for its schema engine before any
 * command it lists, and downloads it from binaries.prisma.sh when missing. Pointing
 * PRISMA_SCHEMA_ENGINE_BINARY at any existing file skips that download (the engine is not run).
 */
const PRISMA_GENERATE_ENV = { PRISMA_SCHEMA_ENGINE_BINARY: process.execPath, PRISMA_HIDE_UPDATE_MESSAGE: '1' };

function tree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else out[relative(root, path)] = readFileSync(path, 'utf8');
    }
  };
  walk(root);
  return out;
}
